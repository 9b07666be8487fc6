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
with ``U diag(d)^-1/2`` and diagonalise the whitened H. If span(W) has only
k < r directions above ``rtol * max(d)`` (r above the data's rank in feature
space, or components that collapsed onto each other) the k Ritz components
are served and the other r - k are zero rows with variance 0, as are Ritz
components whose variance ``mu_i`` is not above ``rtol * mu_1``
(`rank_cut`): a component past the numerical rank is reported as such,
never made up from the iterate's noise. Cost ``O(r^2 l + r^3)``, no kernel
rows.
"""

from __future__ import annotations

import numpy as np

from kpca._dense import eigh

RELATIVE_RANK_TOL = 1e-10  # directions of a Gram matrix kept: eigenvalue d > RELATIVE_RANK_TOL * max(d)


def eigenvalue_estimates(A: np.ndarray, AK: np.ndarray) -> np.ndarray:
    """Seed 000 eq. 13: ``lambda_i = ||[A K']_i|| / ||A_i||``, shape (r,). Cost O(r l)."""
    num = np.linalg.norm(AK, axis=1)
    den = np.linalg.norm(A, axis=1)
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def whitening(G: np.ndarray, rtol: float = RELATIVE_RANK_TOL, floor: float = 0.0) -> np.ndarray:
    """``W = U_k diag(d_k)^-1/2`` (r x k) with ``W^T G W = I``, from ``G = U diag(d) U^T`` (symmetrised).

    Keeps the k directions with ``d > rtol * max(d)`` and ``d > floor`` (an absolute rounding level of
    G's entries, where the caller knows it: `rounding_floor`), so that a generalised
    eigenproblem ``H v = mu G v`` becomes the ordinary one of ``W^T H W``
    without inverting G; k = 0 if G is not finite or has no positive
    eigenvalue. Shared by `ritz_components` and the warm start
    (`kpca.solvers._warm`). Cost O(r^3).
    """
    G = 0.5 * (G + G.T)
    if not np.all(np.isfinite(G)):
        return np.zeros((G.shape[0], 0))
    d, U = eigh(G)
    top = float(d[-1]) if d.size else 0.0
    if not top > 0:
        return np.zeros((G.shape[0], 0))
    keep = (d > rtol * top) & (d > floor)
    return U[:, keep] / np.sqrt(d[keep])


def rounding_floor(K: np.ndarray) -> float:
    """The eigenvalue below which a symmetric m x m matrix computed from ``K``'s entries (K itself, or
    ``K`` centred, which subtracts numbers of K's size) is rounding: ``64 m eps max |K_ij|``, the
    rounding of its entries summed over a row. A direction under it is noise, whose whitening would blow
    a component up (issue 51: nystrom with a width 1000 times the data's distances served eigenvalues
    6.8e6 times too large). O(m^2)."""
    K = np.asarray(K)
    return float(64 * K.shape[0] * np.finfo(np.float64).eps * np.max(np.abs(K), initial=0.0))


def ritz_transform(H: np.ndarray, G: np.ndarray, rtol: float = RELATIVE_RANK_TOL):
    """``(V, mu)`` with ``V^T G V = I`` and ``V^T H V = diag(mu)`` from the r x r products ``H = AK AK^T``
    and ``G = AK A^T`` (symmetrised): V (r, k) for the k <= r directions of G above the rank tolerance,
    mu (k,) descending. The Rayleigh-Ritz components of span(A) are ``V^T A`` (`ritz_components`);
    None if G is not finite. Cost O(r^3)."""
    G = np.asarray(G, dtype=np.float64)
    if not np.all(np.isfinite(G)):
        return None
    W = whitening(G, rtol)
    H = np.asarray(H, dtype=np.float64)
    mu, beta = eigh(W.T @ ((H + H.T) / 2) @ W)
    return W @ beta[:, ::-1], mu[::-1].copy()


def rank_cut(A: np.ndarray, AK: np.ndarray, eigenvalues: np.ndarray, rtol: float = RELATIVE_RANK_TOL):
    """``(A, AK, eigenvalues)`` ordered by variance (descending) with the components past the numerical
    rank served as such: a component whose variance is not above ``rtol`` times the largest (or is
    negative, which a positive semi-definite K' cannot have) gets a zero row in A and AK and the
    variance 0, so that it projects every point to 0. Non-finite input comes back unchanged (the
    caller's divergence check sees it). New arrays; A's dtype kept. Cost O(r l)."""
    lam = np.asarray(eigenvalues, dtype=np.float64)
    if not (np.all(np.isfinite(lam)) and np.all(np.isfinite(A)) and np.all(np.isfinite(AK))):
        return A, AK, lam
    order = np.argsort(-lam, kind="stable")
    lam, A, AK = lam[order], np.array(A)[order], np.array(AK)[order]
    empty = ~(lam > rtol * max(float(lam[0]) if lam.size else 0.0, 0.0))
    A[empty], AK[empty], lam[empty] = 0, 0, 0.0
    return A, AK, lam


def ritz_components(A: np.ndarray, AK: np.ndarray, rtol: float = RELATIVE_RANK_TOL):
    """``(A_r, AK_r, mu)``: the Rayleigh-Ritz components of span(A Phi') and their variances.

    ``A_r K' A_r^T = I`` on the components with variance; ``mu`` (r,)
    descending. Each component's sign makes its largest-magnitude entry of
    ``AK_r`` positive. Where span(A Phi') has fewer than r directions, the
    missing components are zero rows with ``mu = 0`` (module docstring,
    `rank_cut`). Returns ``(A, AK, eigenvalue_estimates(A, AK))`` unchanged
    if ``A K' A^T`` is not finite (a diverged iterate). Arrays come back in
    A's dtype. Cost ``O(r^2 l + r^3)``.
    """
    A64, AK64 = np.asarray(A, dtype=np.float64), np.asarray(AK, dtype=np.float64)
    found = ritz_transform(AK64 @ AK64.T, AK64 @ A64.T, rtol)
    if found is None:
        return A, AK, eigenvalue_estimates(A, AK)
    V, mu = found  # r x k, k <= r kept directions of span(A Phi')
    r, k = V.shape
    A_r, AK_r, values = np.zeros_like(A64), np.zeros_like(AK64), np.zeros(r)
    A_r[:k], AK_r[:k], values[:k] = V.T @ A64, V.T @ AK64, mu
    flip = np.sign(AK_r[np.arange(r), np.abs(AK_r).argmax(axis=1)])
    flip[flip == 0] = 1.0
    A_r, AK_r, values = rank_cut(A_r * flip[:, None], AK_r * flip[:, None], values, rtol)
    return A_r.astype(A.dtype, copy=False), AK_r.astype(A.dtype, copy=False), values


def ritz_values(H: np.ndarray, G: np.ndarray, a2: np.ndarray, ak2: np.ndarray,
                rtol: float = RELATIVE_RANK_TOL) -> np.ndarray:
    """The variances ``mu`` (r,) of `ritz_components` from the r x r products alone: ``H = AK AK^T``,
    ``G = AK A^T`` and the squared row norms ``a2`` of A, ``ak2`` of AK (for the eq. 13 estimates
    returned where G is not finite, as `ritz_components` does). What a sharded fit reports, whose A
    and AK stay on the shards (`kpca.sharded.shards.ShardGroup.grams`). Cost O(r^3)."""
    found = ritz_transform(H, G, rtol)
    if found is None:
        num, den = np.sqrt(ak2), np.sqrt(a2)
        return np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    values = np.zeros(np.asarray(H).shape[0])
    values[: found[1].size] = found[1]
    return rank_cut(np.zeros((values.size, 0)), np.zeros((values.size, 0)), values, rtol)[2]
