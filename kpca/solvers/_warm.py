"""The warm start of the iterative solvers (``init="subset"``): principal components within a random subset's span.

What it computes. Pick a random set S of m training points (sorted) and
fetch their centred kernel rows ``R = K'[S, :]`` (m x l). Among the
components that lie in the span of ``Phi'(x_i), i in S`` — ``w = a^T Phi'_S``
with ``a`` in R^m — find the r that capture the most variance of the FULL
data set. The variance of w over all l points is
``||w^T Phi'^T||^2 = a^T R R^T a`` and its squared feature-space norm is
``a^T K'_SS a`` (``K'_SS = R[:, S]``), so the components are the leading
solutions of the generalised eigenproblem

    maximise  a^T (R R^T) a   subject to   a^T K'_SS a = 1,

i.e. the Rayleigh-Ritz approximation of the feature-space covariance
``Q = Phi'^T Phi'`` on that subspace. With orthonormal components the data's
feature-space reconstruction error (seed 000 eq. 1, ``||Phi'^T - W^T W Phi'^T||_F^2
= trace Q - trace(W Q W^T)``) is minimised over the subspace exactly when the
captured variance is maximised, so in the sense of eq. 1 this is the best
rank-r start the subset can express; its quality is measured, like every solver here, by the excess
error of seed 000 eq. 22.

It is solved robustly, without ever inverting K'_SS (`kpca.solvers._ritz.whitening`,
as for the served components): eigendecompose
``K'_SS = U diag(d) U^T``, keep the k directions with ``d > 1e-10 max(d)``
(duplicated points and the centring make K'_SS singular), whiten
``W = U_k diag(d_k)^-1/2`` (then ``a = W b`` turns the constraint into
``b^T b = 1``), take the leading r eigenvectors ``beta`` of the k x k matrix
``M = W^T (R R^T) W`` and set ``alpha = W beta``. The start is
``A[:, S] = alpha^T`` (zero on the other columns) and
``A K' = alpha^T R``, exact from the rows already fetched. The components are
orthonormal in feature space: ``A K' A^T = beta^T beta = I`` (unit norms, as
at the solution KHA seeks, whose rows of W are the leading eigenvectors,
seed 000 §3).

This is the subset-of-regressors / Nystrom-style start: a low-rank method
on a subset of m of the points, the family seed 004 §1 reviews (the Nystrom
method with uniformly chosen centres). Unlike the "subsampled KPCA" of seed
004 §6, which diagonalises K'_SS alone and which that paper finds the least
accurate, the criterion here uses all l points through ``R R^T``. When S
is all of Z_l it is exact kernel PCA: ``K'_SS = K'``, ``M = diag(d_k)`` and
``alpha`` are the leading eigenvectors of K' scaled by ``lambda^-1/2``, as
`kpca.solvers.exact_components` returns them.

If K'_SS has fewer than r kept directions (a data set of rank < r in
feature space, e.g. a linear kernel on fewer than r features, or many
duplicated points), the kept ones fill the leading rows and the remaining
rows are Gaussian on the columns S with variance 1/(r m), like the random
start of `kpca.solvers._kha.start` (so their ``A K'`` needs no further kernel rows); KHA
then orthogonalises them.

Cost: m centred kernel rows (``O(m l n)`` kernel arithmetic; about m/l of a
pass), ``O(m^2 l)`` for ``R R^T`` and ``O(m^3)`` for the two
eigendecompositions; memory ``m l`` for R (plus ``m^2``). The default m
(`default_init_size`) keeps ``m l <= INIT_BUDGET`` entries.
"""

from __future__ import annotations

import numbers

import numpy as np

from kpca._dense import eigh
from kpca.defaults import formed_block_size
from kpca.solvers._ritz import whitening

INITS = ("auto", "random", "subset")
INIT_BUDGET = 2**25  # entries of the m x l block R (256 MiB in float64): the default start's memory
FETCH_ROWS = 256  # kernel rows fetched per call


def default_init_size(n_components: int, n_rows: int) -> int:
    """Subset size m of the warm start.

    ``min(l, max(10 r, 1000))``, capped at ``INIT_BUDGET // l`` (memory of R),
    but never below ``min(l, 4 r)``.
    """
    r, l = int(n_components), int(n_rows)
    m = min(l, max(10 * r, 1000), INIT_BUDGET // max(l, 1))
    return int(max(m, min(l, 4 * r)))


def check_init(init: str, init_size, n_components: int, n_rows: int) -> None:
    """Raise ValueError naming the field unless ``init`` is one of INITS and ``init_size`` is None or an int in [r, l].

    ``init_size`` is validated whatever ``init`` is; only ``init="subset"`` uses it.
    """
    if not isinstance(init, str) or init not in INITS:
        raise ValueError(f"init: unknown initialisation {init!r}; choose one of {INITS}")
    if init_size is None:
        return
    r, l = int(n_components), int(n_rows)
    if isinstance(init_size, bool) or not isinstance(init_size, numbers.Integral) or not r <= int(init_size) <= l:
        raise ValueError(f"init_size: must be an integer between n_components = {r} and the number of rows "
                         f"l = {l}, got {init_size!r}")


def fetch_rows(centered_rows, indices: np.ndarray, n_rows: int) -> np.ndarray:
    """``K'[indices, :]`` as one (m, l) float64 array, fetched at most FETCH_ROWS rows at a time."""
    l = int(n_rows)
    R = np.empty((indices.size, l), dtype=np.float64)
    step = max(1, min(FETCH_ROWS, formed_block_size(l)))
    for a in range(0, indices.size, step):
        R[a : a + step] = centered_rows(indices[a : a + step])
    return R


def subset_components(R: np.ndarray, S: np.ndarray, n_components: int) -> np.ndarray:
    """``alpha`` (m, q), q = min(r, k): the leading components within span{Phi'(x_i), i in S}.

    Parameters
    ----------
    R : ndarray (m, l), float64
        ``K'[S, :]``.
    S : ndarray (m,)
        The subset's row indices (the columns of R that form ``K'_SS``).

    Columns are ordered by captured variance (descending), normalised to
    ``alpha^T K'_SS alpha = I``, signed so that each one's largest-magnitude
    entry is positive. q < r only when fewer than r directions of K'_SS pass
    the rank tolerance. Cost O(m^2 l + m^3).
    """
    W = whitening(R[:, S])  # the kept directions of K'_SS, W^T K'_SS W = I
    k = W.shape[1]
    q = min(int(n_components), k)
    if q == 0:
        return np.zeros((R.shape[0], 0))
    C = R @ R.T  # (m, m) = K'[S, :] K'[:, S]
    M = W.T @ C @ W
    M = 0.5 * (M + M.T)
    _, beta = eigh(M, subset_by_index=[k - q, k - 1])
    alpha = W @ beta[:, ::-1]
    signs = np.sign(alpha[np.abs(alpha).argmax(axis=0), np.arange(q)])
    return alpha * np.where(signs == 0, 1.0, signs)


def subset_start(centered_rows, n_components: int, n_rows: int, seed: int, init_size=None,
                 dtype=np.float64) -> tuple[np.ndarray, np.ndarray, int]:
    """The warm start ``(A, AK, m)``: A (r, l) nonzero on the m columns S, ``AK = A K'``.

    S is drawn by ``default_rng([seed, 2**31 + 1])`` (the random start uses
    ``[seed, 2**31]``, pass p's permutation ``[seed, p]``); m is ``init_size``
    or `default_init_size`. Rows beyond the subset's rank are random (see the
    module docstring).
    """
    r, l = int(n_components), int(n_rows)
    m = default_init_size(r, l) if init_size is None else int(init_size)
    rng = np.random.default_rng([seed, 2**31 + 1])
    S = np.sort(rng.choice(l, size=m, replace=False))
    R = fetch_rows(centered_rows, S, l)
    alpha = subset_components(R, S, r)
    q = alpha.shape[1]
    A_S = np.empty((r, m))
    A_S[:q] = alpha.T
    A_S[q:] = rng.normal(scale=1.0 / np.sqrt(r * m), size=(r - q, m))
    A = np.zeros((r, l), dtype=dtype)
    A[:, S] = A_S
    AK = np.ascontiguousarray(A[:, S] @ R, dtype=dtype)
    return A, AK, m
