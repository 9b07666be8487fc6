"""The components a model serves: Rayleigh-Ritz within the span of the solver's iterate.

KHA drives the rows of ``W = A Phi'`` towards the leading eigenvectors of the
feature-space covariance *and* towards ``W W^T = I`` (seed 000 §3), both
stochastically: at any pass the span of W is already better than W itself,
whose norms and mutual angles still carry the noise of the last steps. Eq.
22's error ``E(A) = ||K' - (A K')^T A K'||_F`` is smallest, for a given span,
when the components are orthonormal, and then depends on the span alone.

`ritz_components` returns the orthonormal basis of span(W) that diagonalises
the covariance on it: with the Gram matrix ``G = A K' A^T = AK A^T`` and
``H = A K'^2 A^T = AK AK^T`` (both r x r, from the state alone), solve
``H v = mu G v`` and set ``A_r = V^T A``, ``AK_r = V^T AK`` with
``V^T G V = I``. Then ``A_r K' A_r^T = I``, component i captures variance
``mu_i`` (an estimate of ``lambda_i(K')``, the eigenvalue eq. 13 estimates,
and exact when the span is), and the components are ordered by it. At
KHA's fixed point (W the leading eigenvectors, orthonormal) this changes
nothing but the order and signs.

The solver state and its checkpoints keep the raw iterate (resuming stays
bit-exact); only what is served -- projections, reported eigenvalues, the
convergence figure -- uses these components (docs/papers.md gives the
excess error of both, measured).

Solved without inverting G (`whitening`): ``G = U diag(d) U^T``, whiten
with ``U diag(d)^-1/2`` and diagonalise the whitened H. If G has fewer than r
directions above ``rtol * max(d)`` (components that collapsed onto each
other, e.g. a diverging run), the raw components are returned unchanged.
Cost ``O(r^2 l + r^3)``, no kernel rows.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

RELATIVE_RANK_TOL = 1e-10  # directions of a Gram matrix kept: eigenvalue d > RELATIVE_RANK_TOL * max(d)


def eigenvalue_estimates(A: np.ndarray, AK: np.ndarray) -> np.ndarray:
    """Seed 000 eq. 13: ``lambda_i = ||[A K']_i|| / ||A_i||``, shape (r,). Cost O(r l)."""
    num = np.linalg.norm(AK, axis=1)
    den = np.linalg.norm(A, axis=1)
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def whitening(G: np.ndarray, rtol: float = RELATIVE_RANK_TOL) -> np.ndarray:
    """``W = U_k diag(d_k)^-1/2`` (r x k) with ``W^T G W = I``, from ``G = U diag(d) U^T`` (symmetrised).

    Keeps the k directions with ``d > rtol * max(d)``, so that a generalised
    eigenproblem ``H v = mu G v`` becomes the ordinary one of ``W^T H W``
    without inverting G; k = 0 if G is not finite or has no positive
    eigenvalue. Shared by `ritz_components` and the warm start
    (`kpca.solvers._warm`). Cost O(r^3).
    """
    G = 0.5 * (G + G.T)
    if not np.all(np.isfinite(G)):
        return np.zeros((G.shape[0], 0))
    d, U = scipy.linalg.eigh(G)
    top = float(d[-1]) if d.size else 0.0
    if not top > 0:
        return np.zeros((G.shape[0], 0))
    keep = d > rtol * top
    return U[:, keep] / np.sqrt(d[keep])


def ritz_components(A: np.ndarray, AK: np.ndarray, rtol: float = RELATIVE_RANK_TOL):
    """``(A_r, AK_r, mu)``: the Rayleigh-Ritz components of span(A Phi') and their variances.

    ``A_r K' A_r^T = I``; ``mu`` (r,) descending. Each component's sign makes
    its largest-magnitude entry of ``AK_r`` positive. Returns ``(A, AK,
    eigenvalue_estimates(A, AK))`` if ``A K' A^T`` is numerically singular.
    Arrays come back in A's dtype. Cost ``O(r^2 l + r^3)``.
    """
    A64, AK64 = np.asarray(A, dtype=np.float64), np.asarray(AK, dtype=np.float64)
    H = AK64 @ AK64.T
    r = H.shape[0]
    W = whitening(AK64 @ A64.T, rtol)
    if W.shape[1] < r:
        return A, AK, eigenvalue_estimates(A, AK)
    mu, beta = np.linalg.eigh(W.T @ ((H + H.T) / 2) @ W)
    V = W @ beta[:, ::-1]
    A_r, AK_r = V.T @ A64, V.T @ AK64
    flip = np.sign(AK_r[np.arange(r), np.abs(AK_r).argmax(axis=1)])
    flip[flip == 0] = 1.0
    A_r *= flip[:, None]
    AK_r *= flip[:, None]
    return A_r.astype(A.dtype, copy=False), AK_r.astype(A.dtype, copy=False), mu[::-1].copy()


def ritz_values(H: np.ndarray, G: np.ndarray, a2: np.ndarray, ak2: np.ndarray,
                rtol: float = RELATIVE_RANK_TOL) -> np.ndarray:
    """The variances ``mu`` (r,) of `ritz_components` from the r x r products alone: ``H = AK AK^T``,
    ``G = AK A^T`` and the squared row norms ``a2`` of A, ``ak2`` of AK (for the eq. 13 estimates
    returned where G is singular, as `ritz_components` does). What a sharded fit reports, whose A and
    AK stay on the shards (`kpca.shards.ShardGroup.grams`). Cost O(r^3)."""
    W = whitening(np.asarray(G, dtype=np.float64), rtol)
    if W.shape[1] < H.shape[0]:
        num, den = np.sqrt(ak2), np.sqrt(a2)
        return np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    H = np.asarray(H, dtype=np.float64)
    return np.linalg.eigh(W.T @ ((H + H.T) / 2) @ W)[0][::-1].copy()
