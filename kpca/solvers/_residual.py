"""The convergence figure of orthonormal components, from their training projections: the relative
residual ``||Q w_i - mu_i w_i|| / mu_i`` (`kpca.solvers._rayleigh_ritz`, module docstring), computed so
that rounding and inconsistent products make it larger, never 0 (issue 51: a negative square clamped to 0
read as "converged")."""

from __future__ import annotations

import numpy as np


def residual_squares(Z: np.ndarray, ZK: np.ndarray, X: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(squared, mu)``: the squared residuals ``||Q w_i - mu_i w_i||^2 = z_i K' z_i^T - mu_i^2`` of
    orthonormal components from their training projections ``Z`` and ``Z K'`` (r, l), as computed, sign
    and all, and their variances ``mu_i = ||z_i||^2`` (module docstring). Given the components'
    coefficients X (``Z = X K'``), the same figure as ``(z_i K' - mu_i z_i) . (z_i - mu_i x_i)``,
    differences of vectors whose rounding is relative to the residual, not to its square. A negative
    value is rounding or products inconsistent with the components (float32 tiles): never a small
    residual (`residual`). Float64 sums. O(r l)."""
    Z, ZK = np.asarray(Z, dtype=np.float64), np.asarray(ZK, dtype=np.float64)
    mu = np.einsum("ij,ij->i", Z, Z)
    if X is None:
        return np.einsum("ij,ij->i", ZK, Z) - mu**2, mu
    return np.einsum("ij,ij->i", ZK - mu[:, None] * Z, Z - mu[:, None] * np.asarray(X, dtype=np.float64)), mu


def relative_residuals(squared: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """``sqrt(|squared_i|) / mu_i`` (0 for a component without variance): the absolute value, so that
    rounding and inconsistency make the figure larger, never 0. O(r)."""
    return np.divide(np.sqrt(np.abs(squared)), mu, out=np.zeros_like(mu), where=mu > 0)


def residual(Z: np.ndarray, ZK: np.ndarray, X: np.ndarray | None = None) -> float:
    """The relative residual ``max_i sqrt(|z_i K' z_i^T - ||z_i||^4|) / ||z_i||^2`` of orthonormal
    components (`residual_squares`, `relative_residuals`); 0 for components without variance. O(r l)."""
    return float(relative_residuals(*residual_squares(Z, ZK, X)).max(initial=0.0))
