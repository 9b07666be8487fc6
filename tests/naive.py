"""Slow, obviously-correct twins of the fast code, written as the papers write it.

Every jitted kernel and every block update in `kpca` is compared with these.
The step-by-step KHA updates (`kha_steps`, `smd_steps`, `step_block_reference`)
and pass loop (`run_passes_reference`), the readable references of
`kpca.solvers._blocked` and `kpca.driver`, are defined in bench/_stepwise.py,
because bench/kha_speed.py times them too, and imported here. `leading_eigenpair` is the plain
Lanczos iteration that `kpca.solvers._leading_pair._lanczos` runs jitted.
"""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from bench._common import start_iterative
from bench._stepwise import kha_steps, run_passes_reference, smd_steps, step_block_reference  # noqa: F401
from kpca._dense import eigh
from kpca.solvers._leading_pair import CHECK_EVERY, MAX_ITER, TOL


def lt(M):
    """Lower-triangular part (zero above the diagonal), seed 000 eq. 2."""
    return np.tril(M)


def kernel_matrix(X, Y, spec):
    """k(x_i, y_j) from the definitions in kpca.kernels, one row x_i at a time against every y_j (the
    definitions written out per row, not through kpca's blocked code; a pair at a time was the slowest
    part of the digits tests)."""
    X, Y = np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64)
    K = np.empty((X.shape[0], Y.shape[0]))
    for i, x in enumerate(X):
        if spec.type == "gaussian":
            K[i] = np.exp(-np.sum((Y - x) ** 2, axis=1) / (2 * spec.sigma**2))
        elif spec.type == "laplacian":
            K[i] = np.exp(-np.sqrt(np.sum((Y - x) ** 2, axis=1)) / spec.sigma)
        elif spec.type == "polynomial":
            K[i] = (spec.gamma * (Y @ x) + spec.offset) ** spec.degree
        elif spec.type == "linear":
            K[i] = Y @ x
        elif spec.type == "tanh":
            K[i] = np.tanh(spec.gamma * (Y @ x) + spec.offset)
        else:
            raise ValueError(f"kernel_matrix: no definition of {spec.type!r} here")
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


def start_state(solver: str, n_components: int, rows, seed: int = 0, **given) -> dict:
    """An iterative solver's first state through the registry, with the given parameters (the
    others defaulted, but the start the paper's random one unless ``init`` is given: these tests
    follow the iteration; gains from ``trace(K')/l`` of a `DenseRows` source or the rows' centring):
    `bench._common.start_iterative`, as the benches start."""
    centering = getattr(rows, "centering", None)
    mean_diagonal = centering.mean_diagonal if centering is not None else float(np.trace(rows.Kc)) / rows.n_rows
    return start_iterative(solver, rows, n_components, mean_diagonal, seed=seed, **given)[1]


def shadow_set(X, epsilon):
    """Seed 004 Algorithm 2 as printed: while rows remain, the first is a centre and takes every
    remaining row closer than epsilon (its shadow S), weight |S|. Returns (centres, counts). O(m l n)."""
    remaining = list(range(X.shape[0]))
    centres, counts = [], []
    while remaining:
        c = X[remaining[0]]
        shadow = [i for i in remaining if np.sqrt(np.sum((X[i] - c) ** 2)) < epsilon]
        centres.append(c)
        counts.append(len(shadow))
        remaining = [i for i in remaining if i not in set(shadow)]
    return np.array(centres), np.array(counts, dtype=np.float64)


def repeated_kpca(centres, counts, spec, n_components):
    """Exact kernel PCA of the data set in which centre j appears counts[j] times (integers):
    ``(eigenvalues of K', model)``, the quantised set of seed 004 §5 that reduced-set KPCA stands for."""
    from kpca.model import KernelModel
    from kpca.rows import KernelRows
    from kpca.solvers import exact_components

    rows = KernelRows(np.repeat(centres, counts.astype(int), axis=0), spec)
    rows.fit_centering()
    Kc = rows.dense()
    eigenvalues, A = exact_components(Kc, n_components)
    return eigenvalues, KernelModel(rows, A, A @ Kc, eigenvalues)


# -- autoencoder KPCA (seed 003 §4-5), with M formed and numpy.linalg.eigh for every eigenpair ----------

def _extreme(M, which):
    """Eigenpair of symmetric M: largest algebraic ("LA") or largest magnitude ("LM")."""
    w, V = np.linalg.eigh(M)
    i = int(np.argmax(w)) if which == "LA" else int(np.argmax(np.abs(w)))
    return w[i], V[:, i]


def akpca_residual(A, B, x):
    """M = sum_j (x^T A_j x) B_j - x x^T (eq. 18) and the codes y."""
    y = np.array([x @ Aj @ x for Aj in A])
    return sum(yj * Bj for yj, Bj in zip(y, B)) - np.outer(x, x), y


def akpca_surrogate(A, B, x):
    """||M||_2, eq. 18 for one row."""
    return float(np.max(np.abs(np.linalg.eigvalsh(akpca_residual(A, B, x)[0]))))


def akpca_subgradients(A, B, x):
    """Eq. 19-20 with u = sign(lambda) v, v of the eigenvalue of largest magnitude: (dA, dB), (k, d, d) each."""
    M, y = akpca_residual(A, B, x)
    lam, v = _extreme(M, "LM")
    s = np.sign(lam)
    dA = np.array([s * (v @ Bj @ v) * np.outer(x, x) for Bj in B])
    dB = np.array([s * yj * np.outer(v, v) for yj in y])
    return dA, dB


def akpca_step(A, B, x, gain):
    """One step of `kpca.solvers._akpca` written plainly: the Polyak step gain f / ||g||^2."""
    dA, dB = akpca_subgradients(A, B, x)
    g2 = np.sum(dA**2) + np.sum(dB**2)
    eta = gain * akpca_surrogate(A, B, x) / g2 if g2 > 0 else 0.0
    return A - eta * dA, B - eta * dB


def signed_root(M, mean):
    """max(sqrt(lambda_1), 0) v_1 of M, v_1's sign with v_1 . mean >= 0 (the decoders' convention)."""
    lam, v = _extreme(M, "LA")
    return np.sqrt(lam) * (-v if v @ mean < 0 else v) if lam > 0 else np.zeros(M.shape[0])


def akpca_decode(B, y, mean):
    """g(y) of seed 003 §4 for the decoder matrices B."""
    return signed_root(sum(yj * Bj for yj, Bj in zip(y, B)), mean)


def ds_akpca_residual(H, G, P, x):
    """M = sum_i z_i x_i x_i^T - x x^T with z = G^T H k, k_i = (x . x_i)^2 (eq. 23); and k."""
    k = (P @ x) ** 2
    z = G.T @ (H @ k)
    return P.T @ np.diag(z) @ P - np.outer(x, x), k


def ds_akpca_surrogate(H, G, P, x):
    return float(np.max(np.abs(np.linalg.eigvalsh(ds_akpca_residual(H, G, P, x)[0]))))


def ds_akpca_subgradients(H, G, P, x):
    """Eq. 24-26 (with the sign of the eigenvalue of largest magnitude): (dH, dG), (k, l) each."""
    M, k = ds_akpca_residual(H, G, P, x)
    lam, v = _extreme(M, "LM")
    dz = np.sign(lam) * (P @ v) ** 2  # eq. 24
    return np.outer(G @ dz, k), np.outer(H @ k, dz)  # eq. 26, eq. 25


def ds_akpca_step(H, G, P, x, gain):
    dH, dG = ds_akpca_subgradients(H, G, P, x)
    g2 = np.sum(dH**2) + np.sum(dG**2)
    eta = gain * ds_akpca_surrogate(H, G, P, x) / g2 if g2 > 0 else 0.0
    return H - eta * dH, G - eta * dG


def ds_akpca_decode(G, P, y, mean):
    return signed_root(P.T @ np.diag(G.T @ y) @ P, mean)


def affinity_matrix(X, spec):
    """NJW's normalised affinity L = D^-1/2 A D^-1/2 (seed 000 §5.3, [13]): A the uncentred kernel matrix
    with A_ii = 0, D = diag(A 1)."""
    A = kernel_matrix(X, X, spec)
    np.fill_diagonal(A, 0.0)
    s = 1.0 / np.sqrt(A.sum(axis=1))
    return s[:, None] * A * s[None, :]


def njw_embedding(L, k):
    """Rows of the k leading unit eigenvectors of L, each normalised to unit length (NJW steps 3-4)."""
    w, V = np.linalg.eigh(L)
    U = V[:, ::-1][:, :k]
    return U / np.linalg.norm(U, axis=1, keepdims=True)


def variation_of_information(a, b):
    """Meila's VI(C, C') = H(C) + H(C') - 2 I(C, C') in nats, from the joint counts, term by term."""
    a, b = list(a), list(b)
    l = len(a)
    joint = {}
    for x, y in zip(a, b):
        joint[(x, y)] = joint.get((x, y), 0) + 1
    pa = {x: a.count(x) / l for x in set(a)}
    pb = {y: b.count(y) / l for y in set(b)}
    h_a = -sum(p * np.log(p) for p in pa.values())
    h_b = -sum(p * np.log(p) for p in pb.values())
    mutual = sum(n / l * np.log((n / l) / (pa[x] * pb[y])) for (x, y), n in joint.items())
    return h_a + h_b - 2 * mutual


class Eigenpair(NamedTuple):
    """``value`` (a Ritz value), unit ``vector`` (d,), ``iterations`` used and the ``residual``
    ``||M v - value v||`` (from the recurrence)."""

    value: float
    vector: np.ndarray
    iterations: int
    residual: float


def leading_eigenpair(matvec: Callable[[np.ndarray], np.ndarray], start: np.ndarray, which: str = "LA",
                      tol: float = TOL, max_iter: int = MAX_ITER) -> Eigenpair:
    """The extreme eigenpair ``which`` of the symmetric operator ``matvec`` by Lanczos: the plain twin of
    `kpca.solvers._leading_pair._lanczos` for any ``matvec`` (same iteration, tests and stopping rule, so
    the two agree to rounding; that module's docstring).

    Parameters
    ----------
    matvec : callable
        ``matvec(w) -> M w`` for w of shape (d,); M must be symmetric.
    start : ndarray of shape (d,)
        First Lanczos vector (normalised here); must not be 0.
    which : {"LA", "LM"}
        Largest algebraic, or largest magnitude, eigenvalue.
    tol : float
        Relative residual at which to stop.
    max_iter : int
        Most Lanczos vectors (at most d are used).

    Returns
    -------
    Eigenpair. Cost: at most ``min(max_iter, d)`` products and O(max_iter^2 d).
    """
    if which not in ("LA", "LM"):
        raise ValueError(f"which: must be 'LA' or 'LM', got {which!r}")
    start = np.asarray(start, dtype=np.float64)
    d = start.size
    norm = float(np.linalg.norm(start))
    if not norm > 0 or not np.isfinite(norm):
        raise ValueError("start: must be a finite, non-zero vector")
    m = max(1, min(int(max_iter), d))
    Q = np.empty((m, d))
    alpha = np.empty(m)
    beta = np.empty(m)
    q = start / norm
    for j in range(m):
        Q[j] = q
        w = np.asarray(matvec(q), dtype=np.float64)
        alpha[j] = float(q @ w)
        basis = Q[: j + 1]
        w = w - basis.T @ (basis @ w)
        w -= basis.T @ (basis @ w)  # twice is enough (Kahan, Parlett)
        beta[j] = b = float(np.sqrt(w @ w))
        exhausted = j == m - 1 or b <= 1e-13 * max(abs(alpha[j]), beta[j - 1] if j else 0.0, 1e-300)
        if exhausted or (j + 1) % CHECK_EVERY == 0:
            theta, S = _ritz(alpha[: j + 1], beta[:j])
            i = int(np.argmax(theta)) if which == "LA" else int(np.argmax(np.abs(theta)))
            residual = b * abs(float(S[-1, i]))
            if exhausted or residual <= tol * max(float(np.max(np.abs(theta))), 1e-300):
                vector = basis.T @ S[:, i]
                return Eigenpair(float(theta[i]), vector / np.linalg.norm(vector), j + 1, residual)
        q = w / b
    raise AssertionError("unreachable: the last iteration always returns")


def _ritz(alpha: np.ndarray, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (ascending) and eigenvectors of the tridiagonal with diagonal alpha and off-diagonal beta."""
    T = np.diag(alpha)
    if beta.size:
        i = np.arange(beta.size)
        T[i, i + 1] = T[i + 1, i] = beta
    return eigh(T)
