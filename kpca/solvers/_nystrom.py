"""``nystrom``: uniform-landmark Nyström KPCA in its Rayleigh-Ritz form, in one streaming pass.

What it computes. Draw m landmarks ``S = {s_1..s_m}`` uniformly from the l
rows (`kpca.reduced_sets.uniform_subset`). Among the components that lie in
their span, ``w = Phi_S a`` (``Phi_S = [Phi(s_1) .. Phi(s_m)]``), find the r
that capture the most variance of ALL l rows: the Rayleigh-Ritz
approximation of the feature-space covariance
``C = 1/l sum_i (Phi(x_i) - mu)(Phi(x_i) - mu)^T`` on span(S).

Centring without the l x l kernel. Let ``W = K_SS`` (m x m), ``k_S(x) =
[k(s_j, x)]_j`` and ``m_S = 1/l sum_i k_S(x_i) = Phi_S^T mu``. The projection
of the data mean onto span(S) is ``mu_S = Phi_S b`` with ``b = W^+ m_S``
(``Phi_S^T mu_S = W W^+ m_S = m_S``: m_S lies in the range of W). For any
w in span(S), ``<w, mu - mu_S> = a^T (Phi_S^T mu - W b) = 0``, hence

    <w, Phi(x) - mu> = <w, Phi(x) - mu_S>      for every x:

components in span(S) project exactly with the centring by mu_S, which
needs m kernel values per row, not l. The model keeps S with the weights b
(`kpca.rows.Centering.weighted(W, b, normalize=False)`: column means ``g = W
b``, grand mean ``b^T W b = ||mu_S||^2``), and its centred kernel row of a
point is ``k'(x) = [<Phi(s_j) - mu_S, Phi(x) - mu_S>]_j = P (k_S(x) - g)``,
``P = I - 1 b^T``.

The eigenproblem. Components ``w = sum_j A_j (Phi(s_j) - mu_S)`` project as
``A k'(x)`` (what `kpca.model.KernelModel` computes). Over the data, ``1/l
sum_i k'(x_i) = P (m_S - g) = 0``, so their variance is ``A M' A^T`` with the
second moment ``M' = 1/l sum_i k'(x_i) k'(x_i)^T = P (M - m_S g^T - g m_S^T +
g g^T) P^T``, ``M = 1/l sum_i k_S(x_i) k_S(x_i)^T``; their Gram matrix is
``A W' A^T`` with ``W' = P W P^T = K'_S``, the landmarks' centred kernel
matrix. The components are the leading solutions of

    M' a = nu W' a,        A W' A^T = I,

solved by whitening W' (`kpca.solvers._ritz.whitening`, no inverse, its
null directions dropped). nu_t is the variance of the data along component
t; ``l nu_t`` estimates the eigenvalue ``lambda_t`` of the training rows' K'
and by Cauchy interlacing never exceeds it. The span of ``Phi(s_j) - mu_S``
is span(S) unless mu_S is an affine combination of the landmarks (then one
dimension less, e.g. S = all rows, where it is kernel PCA's own span of
``Phi(x_i) - mu``, and the fit is exact KPCA). With S = all rows, ``M' = K'^2
/ l`` and ``W' = K'``: exact KPCA (tests/kpca/test_reduced.py).

Relation to seed 003 eq. 13-14. The classic, one-shot Nyström method
diagonalises the landmarks' m x m kernel matrix alone and extends: the
eigenvectors of K by eq. 13, ``v_j ~ sqrt(m)/(l lambda_hat_j) K_lm v_hat_j``,
and the eigenvalues by eq. 14, ``lambda_j ~ (l/m) lambda_hat_j``; it uses the
l rows only to evaluate the extension (``subsampled`` is that method, centred).
Here the l x m kernel block between rows and landmarks -- the same block
eq. 13 multiplies -- enters the eigenproblem itself through ``M = K_lm^T K_lm
/ l``, so the components are the best the span of the landmarks holds for
the whole data set, and the eigenvalue estimates are variances of the whole
data set, not a rescaled subsample's. The pass accumulates m_S and M chunk
by chunk (`kpca.rows.KernelRows.chunks`): no l x l or l x m array is formed.

Cost: one pass, O(l m (n + m)) (kernel values and the rank-b updates of
M), plus O(m^2 n + m^3); memory O(m^2) plus a block of at most
`kpca.reduced_sets.BLOCK_ENTRIES` kernel values. Projection O(m n) per point.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from kpca._dense import eigh, eigvalsh
from kpca.kernels import kernel_block, kernel_diagonal, squared_norms
from kpca.reduced_sets import BLOCK_ENTRIES, uniform_subset
from kpca.rows import Centering
from kpca.solvers._reduced import LANDMARKS, check_centres
from kpca.solvers._registry import SEED, FitContext, Solver, register
from kpca.solvers._ritz import rounding_floor, whitening
from kpca.solvers._state import ComponentsState


def landmark_moments(rows, landmarks: np.ndarray, about: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """One streaming pass: ``m_S = mean_i k_S(x_i)`` (m,), the second moment ``M = mean_i (k_S(x_i) - c)
    (k_S(x_i) - c)^T`` (m, m) about ``c = about`` (m,), and ``mean_i k(x_i, x_i)``, all float64, the kernel
    values from the rows' local coordinates (`kpca.rows.KernelRows.to_local`; ``landmarks`` in the data's).
    A ``c`` near ``m_S`` (the landmarks' own mean kernel row) keeps M's entries at the size of the kernel
    values' spread, not of the values: a moment about 0 of values far from 0 (a kernel far wider than the
    rows' distances; a dot-product kernel on rows far from the origin) lost its digits when centred (issue
    51). Cost O(l m (n + m)); memory O(m^2) plus a block of kernel values (never l x m)."""
    kernel = rows.kernel
    S = rows.to_local(landmarks, np.float64)
    s_norms = squared_norms(S)
    m = S.shape[0]
    total, M, diagonal = np.zeros(m), np.zeros((m, m)), 0.0
    step = max(1, BLOCK_ENTRIES // m)
    for _, Y in rows.chunks(local=True):
        Y = np.ascontiguousarray(Y, dtype=np.float64)
        diagonal += float(kernel_diagonal(Y, kernel).sum())
        for a in range(0, Y.shape[0], step):
            block = kernel_block(Y[a : a + step], S, kernel, y_sqnorms=s_norms) - about
            total += block.sum(axis=0)
            M += block.T @ block
    l = rows.n_rows
    return about + total / l, 0.5 * (M + M.T) / l, diagonal / l


def ritz_landmark_components(W: np.ndarray, mean_row: np.ndarray, M: np.ndarray, n_components: int,
                             about: np.ndarray | None = None):
    """The Rayleigh-Ritz components in span(S) (module docstring): ``(nu, A, AK, b)``.

    Parameters
    ----------
    W : (m, m) the landmarks' kernel matrix K_SS.
    mean_row : (m,) m_S.
    M : (m, m) ``mean_i (k_S(x_i) - c) (k_S(x_i) - c)^T``, the second moment about ``c = about`` (default 0:
        ``mean_i k_S(x_i) k_S(x_i)^T``; `landmark_moments`).

    Returns
    -------
    nu : (r,) variances along the components (per row): their Rayleigh quotients ``a M'_c a^T / a W'_c a^T``
        over all rows, never above what the rows support; descending up to rounding.
    A : (r, m) coefficients over the centred landmarks, ``A W' A^T = I`` (zero
        rows where W' has fewer than r directions).
    AK : (r, m) ``A W'``.
    b : (m,) weights of mu_S, ``W^+ m_S`` over W's kept directions.

    Each component's sign makes its largest-magnitude entry of AK positive. The whitening keeps only
    directions above W's rounding (`kpca.solvers._ritz.rounding_floor`): past them, zero components.
    Cost O(m^3).
    """
    m, r = W.shape[0], int(n_components)
    floor = rounding_floor(W)  # W_c is W less numbers of its size: its directions below this are rounding
    Z = whitening(W, floor=floor)
    b = Z @ (Z.T @ mean_row)
    g = W @ b
    shift = g - (0.0 if about is None else about)  # the moment about g from the one about c: M - d s^T - s d^T + s s^T
    drift = mean_row - (0.0 if about is None else about)
    centred_moment = M - np.outer(drift, shift) - np.outer(shift, drift) + np.outer(shift, shift)
    M_c = _projected(centred_moment, b)
    W_c = _projected(W, b)
    Zc = whitening(W_c, floor=floor)
    k = Zc.shape[1]
    q = min(r, k)
    nu, A = np.zeros(r), np.zeros((r, m))
    if q:
        H = Zc.T @ M_c @ Zc
        _, beta = eigh(0.5 * (H + H.T), subset_by_index=[k - q, k - 1])
        A[:q] = (Zc @ beta[:, ::-1]).T
        # the Rayleigh quotients over all rows (M_c holds their second moment) of the components as they
        # are, variance over squared norm: never above what the rows support
        norms = np.einsum("ij,jk,ik->i", A[:q], W_c, A[:q])
        nu[:q] = np.divide(np.einsum("ij,jk,ik->i", A[:q], M_c, A[:q]), norms, out=np.zeros(q), where=norms > 0)
        nu[:q] = np.maximum(nu[:q], 0.0)
    AK = A @ W_c
    flip = np.sign(AK[np.arange(r), np.abs(AK).argmax(axis=1)])
    flip[flip == 0] = 1.0
    return nu, A * flip[:, None], AK * flip[:, None], b


def _projected(X: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``P X P^T`` for ``P = I - 1 b^T`` and a symmetric X (m, m), as rank-one updates:
    ``X - 1 (X b)^T - (X b) 1^T + (b^T X b) 1 1^T``, symmetrised. O(m^2)."""
    Xb = X @ b
    out = X - Xb[None, :] - Xb[:, None] + float(b @ Xb)
    return 0.5 * (out + out.T)


def _resolve(params: dict, context: FitContext) -> dict:
    return {**params, "landmarks": check_centres("landmarks", params["landmarks"], context)}


def _fit(rows, n_components: int, params: dict, context: FitContext, report=None) -> ComponentsState:
    """Landmarks, one pass for m_S and M, then `ritz_landmark_components`. Module docstring for the cost."""
    S = uniform_subset(rows.n_rows, params["landmarks"], params["seed"])
    landmarks = np.ascontiguousarray(rows.take(S), dtype=np.float64)
    local = rows.to_local(landmarks, np.float64)
    W = kernel_block(local, local, rows.kernel)
    W = 0.5 * (W + W.T)
    about = W.mean(axis=0)  # the landmarks' mean kernel row, near m_S
    mean_row, M, mean_diagonal = landmark_moments(rows, landmarks, about)
    nu, A, AK, b = ritz_landmark_components(W, mean_row, M, n_components, about)
    centering = Centering.weighted(W, b, normalize=False)
    note = None
    smallest = float(eigvalsh(W, subset_by_index=[0, 0])[0])
    if smallest < -rounding_floor(W):  # no feature space: ||mu_S||^2 is not the rows' grand mean of K
        trace = mean_diagonal - float(mean_row.mean())  # mean_S of the rows' mean kernel rows: the grand mean
        if rows.kernel.kernel.definite:  # an indefinite kind (tanh) is said of the fit (`kpca.fitting.kernel_notes`)
            note = (f"the kernel is not positive semi-definite on the landmarks (their kernel "
                                    f"matrix has an eigenvalue {smallest:.3g}): the model serves the leading "
                                    "components of its positive part only")
    else:  # trace(K')/l of the rows, up to ||mu||^2 - ||mu_S||^2 >= 0 (exact when mu lies in span(S))
        trace = mean_diagonal - centering.grand_mean
    centering = dataclasses.replace(centering, mean_diagonal=trace).require_variance()
    return ComponentsState(solver="nystrom", centres=landmarks, A=A, AK=AK, eigenvalues=rows.n_rows * nu,
                           n_rows=rows.n_rows, centering=centering.to_state(), used={"landmarks": int(S.size)},
                           solver_note=note)


register(Solver("nystrom", "uniform-landmark Nystrom KPCA, Rayleigh-Ritz form: the components in the span of m "
                           "random rows that capture the most variance of all l rows, in one pass over the data "
                           "(O(l m (n + m)) time, O(m^2) memory); serves the m landmarks: O(m n) per projection",
                params=(LANDMARKS, SEED), serves="centres", fit=_fit, resolve=_resolve))
