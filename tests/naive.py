"""Slow, obviously-correct twins of the fast code, written as the papers write it.

Every jitted kernel and every block update in `kpca` is compared with these.
The step-by-step KHA updates (`kha_steps`, `smd_steps`, `step_block_reference`)
are the readable references of `kpca.solvers._blocked`; bench/kha_speed.py
times them too.
"""

import numba
import numpy as np

from kpca.solvers._transforms import RHO_MAX

_LN2 = np.log(2.0)


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


@numba.njit(nogil=True, cache=True)
def kha_steps(A, AK, rows, idx, gain, t0, decay, l_sched):
    """KHA / KHA-t / KHA-et steps (eq. 8-11 with eq. 18 for A K').

    gain : (r,) base gain per component; the step-t gain is
    ``gain * l_sched / (t + l_sched)`` when ``decay`` else ``gain``.
    Cost per row O(r l).
    """
    r, l = A.shape
    y = np.empty(r, dtype=A.dtype)
    cA = np.empty(l, dtype=A.dtype)
    cAK = np.empty(l, dtype=A.dtype)
    for s in range(rows.shape[0]):
        k = rows[s]
        p = idx[s]
        factor = l_sched / (t0 + s + l_sched) if decay else 1.0
        for i in range(r):
            acc = 0.0
            for j in range(l):
                acc += A[i, j] * k[j]
            y[i] = acc
        cA[:] = 0.0
        cAK[:] = 0.0
        for i in range(r):
            yi = y[i]
            gy = gain[i] * factor * yi
            for j in range(l):
                cA[j] += yi * A[i, j]
                cAK[j] += yi * AK[i, j]
                A[i, j] -= gy * cA[j]  # eq. 8: - eta lt(y y^T) A
                AK[i, j] += gy * (k[j] - cAK[j])  # eq. 17-18
            A[i, p] += gy  # eq. 8: + eta y e_p^T


@numba.njit(nogil=True, cache=True)
def smd_steps(A, B, AK, BK, rho, rows, idx, gain, t0, l_sched, mu, xi):
    """KHA-SMD steps: eq. 16 (rho), 21 (B), 15 (A), 18 (A K'), in that order; B K' by eq. 21 times K'.

    gain : (r,) KHA/et base gains (eq. 12 without the l/(t+l) factor, which
    is applied here). Cost per row O(r l).
    """
    r, l = A.shape
    y = np.empty(r, dtype=A.dtype)
    Bk = np.empty(r, dtype=A.dtype)
    cA = np.empty(l, dtype=A.dtype)
    cB = np.empty(l, dtype=A.dtype)
    dA = np.empty(l, dtype=A.dtype)
    cAK = np.empty(l, dtype=A.dtype)
    cBK = np.empty(l, dtype=A.dtype)
    dAK = np.empty(l, dtype=A.dtype)
    for s in range(rows.shape[0]):
        k = rows[s]
        p = idx[s]
        factor = l_sched / (t0 + s + l_sched)
        for i in range(r):
            ay = 0.0
            by = 0.0
            for j in range(l):
                ay += A[i, j] * k[j]
                by += B[i, j] * k[j]
            y[i] = ay
            Bk[i] = by
        cA[:] = 0.0
        cB[:] = 0.0
        dA[:] = 0.0
        cAK[:] = 0.0
        cBK[:] = 0.0
        dAK[:] = 0.0
        for i in range(r):
            yi = y[i]
            bki = Bk[i]
            # prefix sums over rows m <= i (old values) and <Gamma_i K', B_i>
            gkb = 0.0
            for j in range(l):
                cA[j] += yi * A[i, j]
                cB[j] += yi * B[i, j]
                dA[j] += bki * A[i, j]
                cAK[j] += yi * AK[i, j]
                cBK[j] += yi * BK[i, j]
                dAK[j] += bki * AK[i, j]
                gkb += cAK[j] * B[i, j]
            # eq. 16 with eq. 17: diag(Gamma K' B^T)_i = y_i (B_i k - <lt-row of A K', B_i>)
            # eq. 16 with the safeguards of kpca.solvers._transforms.RHO_MAX
            drho = mu * yi * (bki - gkb)
            rho[i] = min(max(rho[i] + min(max(drho, -_LN2), _LN2), -RHO_MAX), RHO_MAX)
            g = np.exp(rho[i]) * gain[i] * factor
            gy = g * yi
            gv = g * (yi + xi * bki)
            for j in range(l):
                # eq. 21 (all terms but the e_p column)
                B[i, j] = xi * B[i, j] - g * (yi * (cA[j] + xi * cB[j]) + xi * (bki * cA[j] + yi * dA[j]))
                A[i, j] -= gy * cA[j]  # eq. 15
                AK[i, j] += gy * (k[j] - cAK[j])  # eq. 18
                # eq. 21 times K' (B K' for the blocked form; its e_p column becomes k)
                BK[i, j] = (xi * BK[i, j] - g * (yi * (cAK[j] + xi * cBK[j]) + xi * (bki * cAK[j] + yi * dAK[j]))
                            + gv * k[j])
            B[i, p] += gv
            A[i, p] += gy


def step_block_reference(state: dict, rows, indices: np.ndarray) -> dict:
    """The step-by-step form of the KHA family's step: the readable reference the blocked one
    (`kpca.solvers._blocked`) is tested against.

    Maintenance note: every update contains ``lt(y y^T) M`` for an r x l matrix M; row i of it
    is ``y_i * sum_{m <= i} y_m M[m]``, a prefix sum over the rows of M, evaluated in O(r l).
    ``rows`` is the (b, l) array ``K'[indices, :]`` or a row source (then ``rows.block(indices)``).
    Cost O(b r l) memory-bound work for b rows, plus an O(r l) copy of the state arrays.
    """
    if state["solver"] == "kha-smd" and "BK" not in state:
        raise ValueError("state: a kha-smd state needs 'BK' (B K')")
    new = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in state.items()}
    A, AK = new["A"], new["AK"]
    if not isinstance(rows, np.ndarray):  # a row source: the rows themselves
        rows = rows.block(indices)
    rows = np.ascontiguousarray(rows, dtype=A.dtype)
    idx = np.ascontiguousarray(indices, dtype=np.int64)
    l = new["n_rows"]
    gain = new["gain"].astype(A.dtype)
    solver = new["solver"]
    if solver == "kha-smd":
        smd_steps(A, new["B"], AK, new["BK"], new["rho"], rows, idx, gain, new["t"], float(l), new["mu"], new["xi"])
    else:
        kha_steps(A, AK, rows, idx, gain, new["t"], solver != "kha", float(l))
    new["t"] += len(idx)
    new["position"] += len(idx)
    return new


def start_state(solver: str, n_components: int, rows, seed: int = 0, **given) -> dict:
    """An iterative solver's first state through the registry, with the given parameters (the
    others defaulted, but the start the paper's random one unless ``init`` is given: these tests
    follow the iteration; gains from ``trace(K')/l`` of a `DenseRows` source or the rows' centring)."""
    from kpca.solvers import SOLVERS, FitContext

    centering = getattr(rows, "centering", None)
    mean_diagonal = centering.mean_diagonal if centering is not None else float(np.trace(rows.Kc)) / rows.n_rows
    chosen = SOLVERS[solver]
    context = FitContext(n_rows=rows.n_rows, n_components=n_components, mean_diagonal=mean_diagonal)
    return chosen.start(rows, n_components, chosen.resolved({"seed": seed, "init": "random", **given}, context))


def run_passes_reference(rows, state: dict, passes: int, block_size: int, step=step_block_reference) -> dict:
    """The pass loop of `kpca.driver.run_passes` written plainly, with the step-by-step ``step``:
    same permutations, blocks, pass starts and divergence guard."""
    from kpca.driver import permutation
    from kpca.solvers import SOLVERS

    solver = SOLVERS[state["solver"]]
    while state["pass"] < passes:
        if state["position"] == 0:
            state = solver.begin_pass(state)
        pass_start = state
        order = permutation(state["seed"], state["pass"], rows.n_rows)
        while state["position"] < rows.n_rows:
            idx = order[state["position"] : state["position"] + block_size]
            state = step(state, rows.block(idx), idx)
            if solver.diverged(state):
                state = pass_start = solver.damped(pass_start)
        state = dict(state, position=0)
        state["pass"] += 1
    return state


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
    """NJW's normalised affinity L = D^-1/2 K D^-1/2 (seed 000 §5.3, [13]), K uncentred, D = diag(K 1)."""
    K = kernel_matrix(X, X, spec)
    s = 1.0 / np.sqrt(K.sum(axis=1))
    return s[:, None] * K * s[None, :]


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
