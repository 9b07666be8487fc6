"""Pre-images by the fixed-point iteration of Mika et al. 1999 (seed 000 ref. [11]).

Setting the gradient of rho (`kpca.preimage._objective`) to zero for a radial
kernel gives ``z <- v / u``: Mika et al.'s ``sum gamma_i k_i x_i / sum gamma_i
k_i`` for the Gaussian, and the Weiszfeld-like weights ``gamma_i k_i /
||z - x_i||`` for the Laplacian.
"""

from __future__ import annotations

import numpy as np

from kpca.errors import Stopped
from kpca.model import KernelModel
from kpca.preimage._objective import kernel_moments, self_kernel
from kpca.preimage.kwok_tsang import kwok_tsang_block
from kpca.rows import KernelRows

FIXED_POINT_KERNELS = ("gaussian", "laplacian")


def _fixed_point_iterations(rows: KernelRows, Z: np.ndarray, G: np.ndarray, norm2: np.ndarray,
                            n_iter: int, tol: float, stop=None):
    """Iterate ``z <- v / u`` (module note) for all rows of Z at once; best iterate by rho.

    Each iteration is one pass over the training data for the rows still
    moving. A row stops when its step is below ``tol * (1 + ||z||)``, when
    ``|u| <= 1e-12 sum_i |gamma_i f'_i|`` (the denominator vanishes or
    underflows, e.g. z far from all data) or when the new iterate is not
    finite. Returns the iterate of lowest rho seen per row (b, n) and that rho
    (b,), inf if no iterate was evaluated finite. ``stop`` (a callable, or
    None) is asked before each iteration: `kpca.errors.Stopped` when it
    answers True.
    """
    Z = Z.copy()
    b = Z.shape[0]
    best_Z, best_rho = Z.copy(), np.full(b, np.inf)
    done = np.zeros(b, dtype=bool)
    active = np.arange(b)
    for it in range(n_iter + 1):
        if active.size == 0:
            break
        if stop is not None and stop():
            raise Stopped("the pre-image was asked to stop")
        s0, u, v, a = kernel_moments(rows, Z[active], G[active])
        rho = norm2[active] - 2.0 * s0 + self_kernel(rows.kernel, Z[active])[0]
        better = np.isfinite(rho) & (rho < best_rho[active])
        best_rho[active[better]] = rho[better]
        best_Z[active[better]] = Z[active[better]]
        if it == n_iter:
            break
        moving = ~done[active] & (np.abs(u) > 1e-12 * a)
        with np.errstate(all="ignore"):
            Z_new = v[moving] / u[moving, None]
        finite = np.isfinite(Z_new).all(axis=1)
        idx = active[moving][finite]
        Z_new = Z_new[finite]
        step = np.linalg.norm(Z_new - Z[idx], axis=1)
        Z[idx] = Z_new
        done[idx] = step <= tol * (1.0 + np.linalg.norm(Z_new, axis=1))
        active = idx  # converged rows get one last evaluation, then leave
    return best_Z, best_rho


def fixed_point(model: KernelModel, X, *, n_iter: int = 100, tol: float = 1e-6, restarts: int = 3,
                n_neighbors: int = 10, init=None, rng=None, components=None, stop=None) -> np.ndarray:
    """Pre-images by the fixed-point iteration of Mika et al. 1999 (seed 000 ref. [11]).

    Gaussian kernel: ``z <- sum_i gamma_i k(z, x_i) x_i / sum_i gamma_i k(z, x_i)``,
    the stationarity condition of rho. Laplacian kernel: the analogous
    Weiszfeld-like weights ``gamma_i k(z, x_i) / ||z - x_i||`` (module note).

    Starts, per point: ``init`` if given else the Kwok–Tsang point; the point
    x itself (``restarts >= 2``); and ``restarts - 2`` distinct random training
    points among its ``n_neighbors`` nearest in feature space. Every iterate
    is scored by rho and the lowest-rho iterate over all starts is returned;
    a start stops early when the denominator vanishes or the iterate is not
    finite, keeping its last finite iterate (fallback: the Kwok–Tsang point; with ``init`` and at
    most two starts, which need no Kwok–Tsang point, ``init``).

    Parameters
    ----------
    model : KernelModel
        Gaussian or Laplacian kernel; ValueError naming "method" otherwise.
    X : ndarray of shape (m, n)
    n_iter : int, default 100
    tol : float, default 1e-6
        Stop a start when ``||z_new - z|| <= tol (1 + ||z||)``.
    restarts : int, default 3
        Number of starts per point (>= 1).
    n_neighbors : int, default 10
        Neighbours for the Kwok–Tsang start and the random starts.
    init : ndarray of shape (m, n), optional
        Replaces the Kwok–Tsang start.
    rng : int or numpy.random.Generator, optional
        For the random starts; None means a fixed seed (deterministic output).
    components : ndarray of shape (m, r), optional
        Pre-images of these projections instead of X's (the estimator's
        ``inverse_transform``); X is then only the second start.
    stop : callable, optional
        Asked before every iteration; True raises `kpca.errors.Stopped` (a
        request that ended: its pre-images are not wanted any more).

    Returns
    -------
    ndarray of shape (m, n). Cost per iteration one pass over the training
    data for all moving starts, O(m restarts l n); plus the Kwok–Tsang start.
    """
    spec = model.kernel
    if spec.type not in FIXED_POINT_KERNELS:
        raise ValueError(f"method: the fixed-point iteration needs a radial kernel "
                         f"({', '.join(FIXED_POINT_KERNELS)}), not {spec.type!r}; use method='gradient'")
    restarts = int(restarts)
    if restarts < 1:
        raise ValueError(f"restarts: must be >= 1, got {restarts}")
    if int(n_iter) < 0:
        raise ValueError(f"n_iter: must be >= 0, got {n_iter}")
    X = model.check_points(X)
    init = None if init is None else model.check_points(init, "init")
    if init is not None and init.shape != X.shape:
        raise ValueError(f"init: expected shape {X.shape} like X, got {init.shape}")
    components = model.check_components(components, X.shape[0])
    rng = np.random.default_rng(0 if rng is None else rng)
    out = np.empty_like(X)
    step = model.block_rows(restarts)
    for a in range(0, X.shape[0], step):
        Xb = X[a : a + step]
        b = Xb.shape[0]
        target = model.target(Xb) if components is None else model.target_from_components(components[a : a + step])
        if init is None or restarts > 2:
            kt, neighbours = kwok_tsang_block(model, target, n_neighbors)
        else:  # the given start alone (and x): no Kwok-Tsang point to compute
            kt = init[a : a + step]
        starts = [kt if init is None else init[a : a + step]]
        if restarts >= 2:
            starts.append(Xb)
        if restarts > 2:
            k = neighbours.shape[1]
            picks = np.argsort(rng.random((b, k)), axis=1)  # a random order of each point's neighbours
            for j in range(restarts - 2):
                chosen = np.take_along_axis(neighbours, picks[:, j % k : j % k + 1], axis=1)[:, 0]
                starts.append(np.asarray(model.rows.take(chosen), dtype=np.float64))
        Z0 = np.concatenate(starts)
        G = np.tile(target.gamma, (len(starts), 1))
        norm2 = np.tile(target.norm2, len(starts))
        Z, rho = _fixed_point_iterations(model.rows, Z0, G, norm2, int(n_iter), float(tol), stop)
        Z, rho = Z.reshape(len(starts), b, -1), rho.reshape(len(starts), b)
        pick = np.argmin(rho, axis=0)
        best = Z[pick, np.arange(b)]
        none = ~np.isfinite(rho[pick, np.arange(b)])
        best[none] = kt[none]
        out[a : a + step] = best
    return out
