"""Pre-images by distance constraints (Kwok & Tsang, "The pre-image problem in kernel methods",
ICML 2003; seed 002 ref. [10], seed 003 ref. [2]): non-iterative, and the start of the other methods."""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np

from kpca.kernels import KERNELS, KernelSpec
from kpca.model import KernelModel, Target

KWOK_TSANG_KERNELS = tuple(name for name, kernel in KERNELS.items() if kernel.inverse is not None)
_EPS = np.finfo(np.float64).eps
#: eigenvalues of the neighbours' Gram matrix below ``_GRAM_FLOOR (k + n)`` times its largest are rounding (a
#: hundred times the error of forming and decomposing it)
_GRAM_FLOOR = 100 * _EPS


def _check_kwok_tsang(spec: KernelSpec) -> Callable:
    """The kernel's inverse profile (`kpca.kernels.Kernel.inverse`); ValueError if it has none."""
    if spec.kernel.inverse is None:
        raise ValueError(f"method: Kwok-Tsang pre-images need a kernel whose feature distances determine input "
                         f"distances ({', '.join(KWOK_TSANG_KERNELS)}), not {spec.type!r}; use method='gradient'")
    return spec.kernel.inverse


def _input_distances(model: KernelModel, target: Target, neighbours: np.ndarray, dist: np.ndarray,
                     P: np.ndarray) -> np.ndarray:
    """Squared input-space distances from the pre-image to the neighbours, (b, k) (Kwok & Tsang).

    Radial kernels: ``d~^2 = ||Psi - Phi(x_i)||^2 ~ 2 - 2 f(d^2)``, so
    ``d^2 = f^-1(1 - d~^2 / 2)`` (the kernel's inverse profile,
    `kpca.kernels.Kernel.inverse`). Dot-product kernels:
    ``<Psi, Phi(x_i)> = (K gamma)_i ~ f(<z, x_i>)`` and ``||Psi||^2 ~ f(||z||^2)``
    give ``d^2 = ||z||^2 + ||x_i||^2 - 2 <z, x_i>``.
    """
    spec = model.kernel
    inverse = _check_kwok_tsang(spec)
    if spec.kernel.radial:
        return inverse(spec, 1.0 - 0.5 * np.take_along_axis(dist, neighbours, axis=1))
    inner = inverse(spec, np.take_along_axis(target.k_gamma, neighbours, axis=1))
    zz = inverse(spec, target.norm2)
    d2 = zz[:, None] + np.einsum("bkn,bkn->bk", P, P) - 2.0 * inner
    return np.maximum(d2, 0.0)


def _kwok_tsang_position(P: np.ndarray, d2: np.ndarray) -> np.ndarray:
    """Position from neighbours and squared input distances (Kwok & Tsang 2003, closed form).

    With the neighbours centred, ``X H = U Lambda V^T`` (thin SVD) and
    ``Z = Lambda V^T`` their coordinates in the basis U, the point with
    ``||z - z_i||^2 ~ d_i^2`` is ``z = -1/2 Lambda^{-1} V^T (d^2 - d0^2)``,
    ``d0_i^2 = ||z_i||^2`` (from ``||z - z_i||^2 = d_i^2``, multiplied by Z,
    using ``Z 1 = 0``), mapped back as ``U z + mean``. Mapped back, that is
    ``mean - 1/2 (X H)^T G^+ (d^2 - d0^2)`` with ``G = (X H)^T (X H) = V Lambda^2 V^T``,
    the neighbours' k x k Gram matrix, and ``d0^2`` its diagonal: computed so, by
    an eigendecomposition of G (k x k) instead of an SVD of the k x n neighbours
    (a third of the cost on 7 x 7 patches). Directions whose eigenvalue is within
    `_GRAM_FLOOR` times the largest are dropped: below it an eigenvalue of G is
    rounding (the centred neighbours span at most k - 1 directions, so one is
    always zero).

    Parameters
    ----------
    P : ndarray of shape (b, k, n), the neighbours of each point
    d2 : ndarray of shape (b, k)

    Returns
    -------
    ndarray of shape (b, n). Cost O(b k^2 n + b k^3).
    """
    mean = P.mean(axis=1)
    C = P - mean[:, None, :]
    G = C @ C.transpose(0, 2, 1)
    eigenvalues, V = np.linalg.eigh(G)
    d0 = np.einsum("bkk->bk", G)
    floor = _GRAM_FLOOR * (P.shape[1] + P.shape[2]) * eigenvalues[:, -1:]
    keep = eigenvalues > floor
    inv = np.divide(1.0, eigenvalues, out=np.zeros_like(eigenvalues), where=keep)
    y = np.einsum("bkq,bq->bk", V, inv * np.einsum("bkq,bk->bq", V, d2 - d0))  # G^+ (d^2 - d0^2)
    return mean - 0.5 * np.einsum("bk,bkn->bn", y, C)


@numba.njit(nogil=True, cache=True)
def nearest(dist: np.ndarray, k: int) -> np.ndarray:  # pragma: no cover - jitted
    """The indices of the ``k`` (<= l) least values of each row of ``dist`` (b, l), least first, ties in
    index order (a value equal to the k-th least is left out if its index is later): (b, k). One pass
    over each row keeping its k least in order. O(b l) comparisons, O(b l k) at worst."""
    b, l = dist.shape
    out = np.empty((b, k), dtype=np.int64)
    least = np.empty(k)
    for i in range(b):
        held = 0
        for j in range(l):
            d = dist[i, j]
            if held == k and not d < least[k - 1]:
                continue
            pos = held if held < k else k - 1
            while pos > 0 and least[pos - 1] > d:
                least[pos] = least[pos - 1]
                out[i, pos] = out[i, pos - 1]
                pos -= 1
            least[pos] = d
            out[i, pos] = j
            if held < k:
                held += 1
    return out


def kwok_tsang_block(model: KernelModel, target: Target, n_neighbors: int):
    """Kwok–Tsang points (b, n) and the neighbour indices (b, k), nearest first, for one block."""
    dist = model.distances(target)
    k = int(min(max(1, n_neighbors), model.rows.n_rows))
    neighbours = nearest(dist, k)
    P = np.asarray(model.rows.take(neighbours.ravel()), dtype=np.float64).reshape(*neighbours.shape, -1)
    d2 = _input_distances(model, target, neighbours, dist, P)
    Z = _kwok_tsang_position(P, d2)
    bad = ~np.isfinite(Z).all(axis=1)
    if bad.any():  # cannot happen for finite distances; the neighbours' mean is the safe answer
        Z[bad] = P[bad].mean(axis=1)
    return Z, neighbours


def kwok_tsang(model: KernelModel, X, *, n_neighbors: int = 10, components=None) -> np.ndarray:
    """Pre-images by distance constraints (Kwok & Tsang; seed 002 ref. [10]).

    For each point: feature distances ``d~_i^2 = ||Psi(x) - Phi(x_i)||^2`` to
    all training points, the ``n_neighbors`` nearest, their input-space
    distances from the kernel (`_input_distances`), and the closed-form
    position in the span of the centred neighbours (`_kwok_tsang_position`).
    Non-iterative; also the start of the other methods.

    Parameters
    ----------
    model : KernelModel
        Kernel gaussian, laplacian, polynomial or linear (ValueError naming
        "method" otherwise).
    X : ndarray of shape (m, n)
    n_neighbors : int, default 10
    components : ndarray of shape (m, r), optional
        Pre-images of these projections instead of X's (X is then unused
        beyond its shape).

    Returns
    -------
    ndarray of shape (m, n). Cost O(m l (n + r)) for the distances (in blocks
    of points) plus O(m k n min(k, n)) for the SVDs.
    """
    _check_kwok_tsang(model.kernel)
    X = model.check_points(X)
    components = model.check_components(components, X.shape[0])
    if components is not None:
        return model.map_blocks(components, lambda B: kwok_tsang_block(model, model.target_from_components(B),
                                                                        n_neighbors)[0], X.shape[1])
    return model.map_blocks(X, lambda B: kwok_tsang_block(model, model.target(B), n_neighbors)[0], X.shape[1])
