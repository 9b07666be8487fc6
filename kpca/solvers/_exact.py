"""The exact solver: the leading eigenpairs of the dense K' (the reference for small l)."""

from __future__ import annotations

import numpy as np

from kpca._dense import leading_eigh
from kpca.solvers._registry import KERNEL_PRECISION, FitContext, Solver, register
from kpca.solvers._ritz import RELATIVE_RANK_TOL
from kpca.solvers._state import ComponentsState


def exact_components(Kc: np.ndarray, n_components: int, floor: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Leading eigenpairs of the centred kernel matrix, as KHA-style coefficients.

    Parameters
    ----------
    Kc : ndarray of shape (l, l)
        Centred kernel matrix K' (symmetric).
    n_components : int
    floor : float
        An eigenvalue not above it is rounding too (`kpca.solvers._ritz.rounding_floor` of the raw
        kernel matrix K' was centred from, where the caller has it).

    Returns
    -------
    eigenvalues : ndarray of shape (r,), descending, eigenvalues of K'; 0 past
        the numerical rank (an eigenvalue not above ``RELATIVE_RANK_TOL``
        times the largest is rounding, or negative: K' is positive
        semi-definite for the kernels that define a feature space)
    A : ndarray of shape (r, l), rows ``v_i / sqrt(lambda_i)`` so that the
        feature-space components ``W = A Phi'`` are orthonormal
        (``A K' A^T = I``) — the fixed point KHA converges to. Components past
        the numerical rank get a zero row (they project every point to 0).
        Cost O(l^2 r) per Lanczos restart where r is small against l, else
        O(l^3) (`kpca._dense.leading_eigh`); O(l^2) memory.
    """
    r = int(n_components)
    w, V = leading_eigh(Kc, r)
    w, V = w[::-1], V[:, ::-1]
    # deterministic sign: largest-magnitude entry of each eigenvector positive
    signs = np.sign(V[np.abs(V).argmax(axis=0), np.arange(r)])
    V = V * np.where(signs == 0, 1, signs)
    kept = (w > RELATIVE_RANK_TOL * max(float(w[0]), 0.0)) & (w > floor)
    w = np.where(kept, w, 0.0)
    scale = np.where(kept, 1.0 / np.sqrt(np.where(kept, w, 1.0)), 0.0)
    return w, np.ascontiguousarray((V * scale).T)


def _fit(rows, n_components: int, params: dict, context: FitContext, report=None) -> ComponentsState:
    """The centring pass, the dense K' and its leading eigenpairs. O(l^2 n + l^3) time, O(l^2) memory."""
    centering = rows.fit_centering().require_variance()
    eigenvalues, A = exact_components(rows.dense().astype(np.float64, copy=False), n_components)
    return ComponentsState(solver="exact", A=A, eigenvalues=eigenvalues, n_rows=rows.n_rows,
                           centering=centering.to_state())


register(Solver("exact", "leading eigenpairs of the dense centred kernel matrix (ARPACK where few components of "
                         "many rows are asked, else LAPACK): exact, O(l^2) memory and O(l^2 r) to O(l^3) time, for "
                         "data sets up to the exact limit", params=(KERNEL_PRECISION,), dense=True,
                clusterable=True, fit=_fit))
