"""Slow, obviously-correct twins of the fast code, written as the papers write it.

Every jitted kernel and every block update in `kpca` is compared with these.
"""

import numpy as np


def lt(M):
    """Lower-triangular part (zero above the diagonal), seed 000 eq. 2."""
    return np.tril(M)


def kernel_matrix(X, Y, spec):
    """k(x_i, y_j) from the definitions in kpca.kernels, one pair at a time."""
    K = np.empty((X.shape[0], Y.shape[0]))
    for i, x in enumerate(X.astype(np.float64)):
        for j, y in enumerate(Y.astype(np.float64)):
            if spec.type == "gaussian":
                K[i, j] = np.exp(-np.sum((x - y) ** 2) / (2 * spec.sigma**2))
            elif spec.type == "laplacian":
                K[i, j] = np.exp(-np.sqrt(np.sum((x - y) ** 2)) / spec.sigma)
            elif spec.type == "polynomial":
                K[i, j] = (spec.gamma * x @ y + spec.offset) ** spec.degree
            elif spec.type == "linear":
                K[i, j] = x @ y
            elif spec.type == "tanh":
                K[i, j] = np.tanh(spec.gamma * x @ y + spec.offset)
    return K


def centered(K):
    """K' = K - MK - (MK)^T + MKM, seed 000 eq. 5, with M = 1/l."""
    l = K.shape[0]
    M = np.full((l, l), 1.0 / l)
    return K - M @ K - (M @ K).T + M @ K @ M


def kha_step(A, Kc, p, eta):
    """One KHA step, eq. 8 with a gain vector eta (eq. 11): returns A_{t+1}."""
    k = Kc[:, p]
    y = A @ k
    e = np.zeros(A.shape[1])
    e[p] = 1.0
    Gamma = np.outer(y, e) - lt(np.outer(y, y)) @ A  # eq. 9
    return A + np.diag(eta) @ Gamma  # eq. 11


def smd_step(A, B, rho, Kc, p, eta, mu, xi):
    """One KHA-SMD step, Algorithm 1 (g)-(j) with K' dense: eq. 16, 21, 15.

    The log-gain change per step is clipped to [-ln 2, ln 2] and the log-gain
    to [-3, 3], as in kpca (safeguards outside eq. 16).
    Returns (A, B, rho) at t+1; A K' is recomputed densely by the caller.
    """
    k = Kc[:, p]
    y = A @ k
    e = np.zeros(A.shape[1])
    e[p] = 1.0
    Gamma = np.outer(y, e) - lt(np.outer(y, y)) @ A  # eq. 9
    drho = mu * np.diag(Gamma @ Kc @ B.T)  # eq. 16
    rho = np.clip(rho + np.clip(drho, -np.log(2), np.log(2)), -3.0, 3.0)
    g = np.diag(np.exp(rho) * eta)
    Bk = B @ k
    B_new = xi * B + g @ (np.outer(A @ k + xi * Bk, e) - lt(np.outer(y, y)) @ (A + xi * B)
                          - xi * lt(np.outer(Bk, y) + np.outer(y, Bk)) @ A)  # eq. 21
    A_new = A + g @ Gamma  # eq. 15
    return A_new, B_new, rho


def expansion(A, X, Xnew, spec):
    """gamma of Psi(x) = P Phi'(x) + mu = sum_i gamma_i Phi(x_i), densely (kpca.preimage).

    beta = A k'(x) with k'(x) centred as in seed 000 eq. 5; alpha = A^T beta;
    gamma = alpha + (1 - sum alpha) / l.
    """
    K = kernel_matrix(X, X, spec)
    kx = kernel_matrix(Xnew, X, spec)
    kx_c = kx - kx.mean(axis=1, keepdims=True) - K.mean(axis=0)[None, :] + K.mean()
    alpha = kx_c @ A.T @ A
    return alpha + (1.0 - alpha.sum(axis=1, keepdims=True)) / X.shape[0]


def preimage_objective(z, gamma, X, spec):
    """rho(z) = ||sum_i gamma_i Phi(x_i) - Phi(z)||^2 = gamma^T K gamma - 2 gamma . k(z, X) + k(z, z)."""
    K = kernel_matrix(X, X, spec)
    kz = kernel_matrix(z[None, :], X, spec)[0]
    return gamma @ K @ gamma - 2.0 * gamma @ kz + kernel_matrix(z[None, :], z[None, :], spec)[0, 0]
