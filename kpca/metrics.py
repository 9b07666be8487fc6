"""Quality measures of a set of kernel principal components.

``A`` (r x l) are expansion coefficients, ``AK = A K'``; components live in
feature space as ``W = A Phi'``, so their Gram matrix is ``A K' A^T``.
"""

from __future__ import annotations

import numpy as np


def reconstruction_error(Kc: np.ndarray, AK: np.ndarray) -> float:
    """Eq. 22: ``E(A) = ||K' - (A K')^T A K'||_F``. Cost O(r l^2)."""
    R = Kc - AK.T @ AK
    return float(np.linalg.norm(R))


def minimal_error(eigenvalues_all: np.ndarray, n_components: int) -> float:
    """``E_min`` of eq. 22: ``sqrt(sum_{i > r} lambda_i^2)`` from all eigenvalues of K'."""
    lam = np.sort(np.asarray(eigenvalues_all, dtype=np.float64))[::-1]
    return float(np.sqrt(np.sum(lam[n_components:] ** 2)))


def excess_error(Kc: np.ndarray, AK: np.ndarray, e_min: float) -> float:
    """Excess relative reconstruction error ``E(A)/E_min - 1`` (seed 000 §5)."""
    return reconstruction_error(Kc, AK) / e_min - 1.0


def orthonormality_error(A: np.ndarray, AK: np.ndarray) -> float:
    """``||A K' A^T - I||_F``: how far the components are from orthonormal in feature space. O(r^2 l)."""
    G = AK @ A.T
    return float(np.linalg.norm(G - np.eye(G.shape[0])))


def subspace_angles(A1: np.ndarray, A2: np.ndarray, Kc: np.ndarray) -> np.ndarray:
    """Principal angles (radians, ascending) between span(A1 Phi') and span(A2 Phi').

    Uses feature-space Gram matrices ``Ai K' Aj^T``; cost O(r l^2). Each
    subspace is orthonormalised by a Cholesky factor of its own Gram matrix.
    """
    G11 = A1 @ Kc @ A1.T
    G22 = A2 @ Kc @ A2.T
    G12 = A1 @ Kc @ A2.T
    L1 = np.linalg.cholesky(G11)
    L2 = np.linalg.cholesky(G22)
    M = np.linalg.solve(L1, np.linalg.solve(L2, G12.T).T)
    s = np.clip(np.linalg.svd(M, compute_uv=False), 0.0, 1.0)
    return np.sort(np.arccos(s))
