"""Blocked Kernel Hebbian Algorithm updates: b sequential steps as small-matrix algebra plus a few GEMMs.

`blocked_step_block` has exactly the semantics of `kpca.solvers.step_block`
(one KHA / KHA-t / KHA-et / KHA-SMD step per row, in order; pure), but it
does not touch the r x l state matrices once per row. Within a sub-block of
``m`` rows it accumulates the steps as a small transform of the sub-block's
starting matrices and applies it with GEMMs at the end. The results equal
the step-by-step kernels of `kpca.solvers._steps` up to rounding (the same
sums, associated differently).

Notation (seed 000): ``A`` (r x l) expansion coefficients, ``AK = A K'``,
``B`` (r x l) SMD differential parameters, ``rho`` (r,) log-gains. A
sub-block holds the rows ``K_b = K'[p_0 .. p_{m-1}, :]`` (m x l), ``k_s`` its
row s, ``g_s`` (r,) the gains of step s, ``G_s = diag(g_s)``,
``y_s = A_s k_s`` (eq. 7), ``L_s = lt(y_s y_s^T)``. ``E`` (m x l) has rows
``e_{p_j}^T`` (``E X^T = X[:, p]^T``, ``E K' = K_b``) and
``K_bb = K_b[:, p]`` (m x m), ``K_bb[s, j] = K'[p_s, p_j]``.

Maintenance note
----------------
*KHA family* (eq. 8, 11, 17-18). One step is

    A_{s+1}  = M_s A_s  + (G_s y_s) e_{p_s}^T,     M_s = I - G_s L_s   (r x r)
    AK_{s+1} = M_s AK_s + (G_s y_s) k_s^T

(``e_p^T K' = k_s^T`` as K' is symmetric). By induction, with the
coefficient matrix ``W_s = [T_s | C_s]`` (r x (r + m)) over the *basis*
``X = [A_0; E]`` ((r + m) x l) and its image ``X_K = [AK_0; K_b]``:

    A_s = W_s X = T_s A_0 + C_s E,     AK_s = W_s X_K = T_s AK_0 + C_s K_b,
    W_0 = [I | 0],   W_{s+1} = M_s W_s + (G_s y_s) e_{r+s}^T,

i.e. W evolves by the *same* KHA step as A, with column ``r + s`` playing the
part of ``p_s``. The only l-length quantity a step needs is
``y_s = A_s k_s = W_s (X k_s) = W_s q_s`` with ``q_s^T`` row s of

    Q^T = [K_b A_0^T | K_bb]     (m x (r + m); one GEMM per sub-block).

A step thus costs O(r (r + s)) (the ``lt(y y^T) W`` product by the prefix
sums of `kpca.solvers._steps`, over the r + s non-zero columns of W). At the
end of the sub-block ``A = T A_0`` plus C scattered (added) into the columns
p, and ``AK = T AK_0 + C K_b``. A row index repeated inside a sub-block is
harmless (E then has equal rows; the scatter adds); within one pass the rows
are a permutation and never repeat.

*KHA-SMD* (Algorithm 1: eq. 16, 21, 15, 18, in that order). With
``Bk = B_s k_s``, ``L2 = lt(Bk y^T + y Bk^T)`` and the log-gain step clipped
to [-ln 2, ln 2] as in `_smd_steps`, eq. 21 and 15 read

    A_{s+1} = (I - G L) A_s + G y e_p^T
    B_{s+1} = xi (I - G L) B_s - G (L + xi L2) A_s + G (y + xi Bk) e_p^T

(row i of ``lt(Bk y^T) A`` is ``Bk_i sum_{m<=i} y_m A_m`` and of
``lt(y Bk^T) A`` is ``y_i sum_{m<=i} Bk_m A_m``: prefix sums again). This is
linear in ``Z = [A; B]`` (2r x l) with a lower block-triangular 2r x 2r
transform plus a column at p, so ``Z_s = W_s X`` with ``W`` 2r x n,
``n = 2r + m``, ``X = [A_0; B_0; E]``, ``W_0 = [I | 0]``; the A rows of W
keep zeros in the B_0 columns, and ``AK_s = W_A X_K`` with
``X_K = [AK_0; 0; K_b]``. Then ``[y; Bk] = W_s q_s`` with
``Q^T = [K_b Z_0^T | K_bb]``.

Eq. 16 needs ``diag(Gamma K' B^T)_i = y_i (Bk_i - sum_{m<=i} y_m H[m, i])``
with ``H = AK_s B_s^T = W_A Gm W_B^T`` and the Gram matrix
``Gm = X_K X^T`` (n x n). Rather than form H (O(r n^2) per step) keep
``R = W Gm^T`` (2r x n; row i is ``Gm W[i]^T``). ``R`` is W times a fixed
matrix, so it evolves by the same row operations as W, with the column
term ``e_{2r+s}^T`` replaced by row ``2r + s`` of ``Gm^T``. Then
``sum_{m<=i} y_m H[m, i] = cA . R[r + i]`` with ``cA = sum_{m<=i} y_m W_A[m]``
the prefix sum the A update uses anyway -- the same shape as `_smd_steps`,
where the sum is ``<sum_{m<=i} y_m AK_m, B_i>``. ``Gm^T`` is assembled from

    Gm^T = [[Z_0 AK_0^T,   0,  Z_0 K_b^T],
            [AK_0[:, p]^T, 0,  K_bb^T   ]]

(the first block row is 2r high; ``Z_0 K_b^T`` is already in Q). A step
costs O(r n). At the end, with ``T = [[T_AA, 0], [T_BA, T_BB]]`` and
``C = [C_A; C_B]``: ``A = T_AA A_0``, ``B = T_BA A_0 + T_BB B_0`` plus C
scattered into columns p, and ``AK = T_AA AK_0 + C_A K_b``.

Costs, per sub-block of m rows (flops; r components, l rows of K'):

=========  =====================================  ===========================
solver     GEMMs                                   small loop (numba)
=========  =====================================  ===========================
KHA, t/et  Q: 2 r m l; A: 2 r^2 l; AK: 2 r^2 l     O(r (r + m)) per row
           + 2 r m l
KHA-SMD    Q: 4 r m l; Gm: 4 r^2 l;               O(r (2r + m)) per row
           [A; B]: 8 r^2 l; AK: 2 r^2 l + 2 r m l
=========  =====================================  ===========================

i.e. per row ``4 r l`` (KHA) or ``6 r l`` (SMD) flops of GEMM plus
``O(r^2 l / m)``, against O(r l) memory-bound passes over A, AK (and B)
per row step by step.

*Stability.* ``T`` is a product of near-identity matrices. The blocked
result differs from the step-by-step one by roughly
``eps ||T|| ||Z_0||`` (the reassociation), which stays at rounding level
while ``||T||`` is moderate. If ``||T||_F / sqrt(dim T)`` (1 at the start of
a sub-block) exceeds ``growth_limit`` (default `GROWTH_LIMIT` = 1e3) the
sub-block ends early: the transform is applied to the big matrices and a
new accumulation starts with the next row. In practice the ratio stays
below 1 (``I - G lt(y y^T)`` contracts) unless the gain is so large that
the step-by-step iteration diverges too; there the guard bounds how far
one transform grows before it is applied, and the driver's divergence
guard reacts as it does step by step (tests/kpca/test_blocked.py).

*Precision.* The state (A, AK, B, the transforms) is kept in its own
dtype. With float32 rows (kernel tiles computed in float32,
``KernelRows(dtype=float32)``) the two GEMMs that read the rows -- ``Q``
and ``C K_b``, ``6 r l`` of the per-row flops -- run in float32, on
float32 copies of ``Z_0`` and ``C``, and their results are accumulated into
the float64 state: they read half the bytes at twice the SIMD width. The
rows themselves carry float32 rounding already, so this adds an error of
the same order (about ``1e-7`` relative per product). In ``AK`` these
errors add up over the sub-blocks like a random walk (the transforms ``T``
contract rather than amplify them). bench/kha_speed.py reports the effect
on the excess error after 20 passes.

*Determinism.* The rounding depends on the sub-block partition, which is
fixed by the block (sub-blocks start at the block's first row; the default
size depends on r and l only), so resuming at a block boundary is
bit-exact, as with the step-by-step kernels.
"""

from __future__ import annotations

import numba
import numpy as np

# The SMD safeguards of kpca.solvers._steps, repeated here on purpose: numba's
# on-disk cache of this module would not notice a change made in the other
# one. tests/kpca/test_blocked.py checks that they are equal.
_LN2 = np.log(2.0)
RHO_MAX = 3.0

# The transforms' dot products and prefix sums may be reassociated (vectorised); no flag that
# assumes finite values, so a diverging state still turns non-finite for the driver's guard.
_LOOP_FASTMATH = {"reassoc", "contract", "nsz"}
GROWTH_LIMIT = 1e3
SUB_BLOCK_RANGE = (32, 256)  # bounds of `default_sub_block`


@numba.njit(inline="always")
def _leading_norm2(W, k):
    """``||W[:k, :k]||_F^2``, the growth of the accumulated transform T."""
    norm2 = 0.0
    for i in range(k):
        for c in range(k):
            norm2 += W[i, c] * W[i, c]
    return norm2


@numba.njit(nogil=True, cache=True, fastmath=_LOOP_FASTMATH)
def _kha_transform(W, Qt, gain, t0, decay, l_sched, growth_limit):
    """KHA / KHA-t / KHA-et steps on the coefficient matrix W (r x (r + m)), in place.

    Qt : (m, r + m), row s is ``q_s^T = (X k_s)^T``. Column ``r + s`` of W
    stands for the observation of step s. Returns the number of steps done
    (m, or fewer if ``||W[:, :r]||_F^2 > growth_limit^2 r``).
    """
    r = W.shape[0]
    m = Qt.shape[0]
    y = np.empty(r)
    cW = np.empty(W.shape[1])
    bound = growth_limit * growth_limit * r
    for s in range(m):
        ncol = r + s  # columns of W that can be non-zero before step s
        q = Qt[s]
        factor = l_sched / (t0 + s + l_sched) if decay else 1.0
        for i in range(r):
            acc = 0.0
            for c in range(ncol):
                acc += W[i, c] * q[c]
            y[i] = acc
        cW[:ncol] = 0.0
        for i in range(r):
            yi = y[i]
            gy = gain[i] * factor * yi
            for c in range(ncol):
                cW[c] += yi * W[i, c]
                W[i, c] -= gy * cW[c]  # - G lt(y y^T) W
            W[i, ncol] += gy  # + G y e_{r+s}^T
        if s + 1 < m and _leading_norm2(W, r) > bound:
            return s + 1
    return m


@numba.njit(nogil=True, cache=True, fastmath=_LOOP_FASTMATH)
def _smd_transform(W, R, Qt, Gt, rho, gain, t0, l_sched, mu, xi, growth_limit):
    """KHA-SMD steps on W (2r x n, rows [A; B]) and R = W Gm^T (2r x n), in place.

    Qt : (m, n), row s is ``q_s^T``; Gt : (n, n) = ``Gm^T``; rho : (r,)
    log-gains, updated in place. Returns the number of steps done (see
    `_kha_transform`; the bound is on ``W[:, :2r]``).
    """
    r2, n = W.shape
    r = r2 // 2
    m = Qt.shape[0]
    y = np.empty(r)
    bk = np.empty(r)
    cA = np.empty(n)
    cB = np.empty(n)
    dA = np.empty(n)
    cV = np.empty(n)
    cU = np.empty(n)
    dV = np.empty(n)
    bound = growth_limit * growth_limit * r2
    for s in range(m):
        col = r2 + s
        q = Qt[s]
        gcol = Gt[col]
        factor = l_sched / (t0 + s + l_sched)
        for i in range(r):
            ay = 0.0
            by = 0.0
            for c in range(col):
                ay += W[i, c] * q[c]
                by += W[r + i, c] * q[c]
            y[i] = ay
            bk[i] = by
        cA[:col] = 0.0
        cB[:col] = 0.0
        dA[:col] = 0.0
        cV[:] = 0.0
        cU[:] = 0.0
        dV[:] = 0.0
        for i in range(r):
            yi = y[i]
            bki = bk[i]
            # prefix sums over rows m <= i (old values) and sum_{m<=i} y_m (AK B^T)[m, i]
            gkb = 0.0
            for c in range(col):
                cA[c] += yi * W[i, c]
                cB[c] += yi * W[r + i, c]
                dA[c] += bki * W[i, c]
                gkb += cA[c] * R[r + i, c]
            drho = mu * yi * (bki - gkb)  # eq. 16, clipped as in _smd_steps
            rho[i] = min(max(rho[i] + min(max(drho, -_LN2), _LN2), -RHO_MAX), RHO_MAX)
            g = np.exp(rho[i]) * gain[i] * factor
            gy = g * yi
            gv = g * (yi + xi * bki)
            for c in range(col):
                W[r + i, c] = xi * W[r + i, c] - g * (yi * (cA[c] + xi * cB[c]) + xi * (bki * cA[c] + yi * dA[c]))
                W[i, c] -= gy * cA[c]
            W[r + i, col] += gv  # eq. 21, e_p column
            W[i, col] += gy  # eq. 15, e_p column
            for c in range(n):  # the same row operations on R = W Gm^T
                cV[c] += yi * R[i, c]
                cU[c] += yi * R[r + i, c]
                dV[c] += bki * R[i, c]
                R[r + i, c] = (xi * R[r + i, c] - g * (yi * (cV[c] + xi * cU[c]) + xi * (bki * cV[c] + yi * dV[c]))
                               + gv * gcol[c])
                R[i, c] += gy * (gcol[c] - cV[c])
        if s + 1 < m and _leading_norm2(W, r2) > bound:
            return s + 1
    return m


def default_sub_block(n_components: int, n_rows: int) -> int:
    """Rows per transform: ``sqrt(r l) / 2`` clipped to SUB_BLOCK_RANGE.

    Per row, the GEMMs cost ``~ r^2 l / m`` that the sub-block amortises, the
    jitted loop ``~ r m``; their sum is smallest near ``m ~ sqrt(r l)`` (times
    the ratio of GEMM to loop throughput). Measured on 2 cores, one BLAS
    thread: best m 128 (r 4), 256 (r 16, 50) at l = 20000; 64 (r 4), 64-256
    (r 16), 256 (r 50) at l = 4096, within 10-20 % of the rule's choice.
    """
    low, high = SUB_BLOCK_RANGE
    return int(min(high, max(low, round(np.sqrt(n_components * n_rows) / 2))))


def _scatter_add(M: np.ndarray, columns: np.ndarray, C: np.ndarray, distinct: bool) -> None:
    """``M[:, columns] += C``; with repeated columns (``distinct`` False) every copy adds."""
    if distinct:
        M[:, columns] += C
    else:
        np.add.at(M, (slice(None), columns), C)


def blocked_step_block(state: dict, rows: np.ndarray, indices: np.ndarray, sub_block: int | None = None,
                       growth_limit: float = GROWTH_LIMIT) -> dict:
    """Apply one KHA-family step per row of ``rows`` (K'[indices, :]), in order, blocked.

    Same semantics as `kpca.solvers.step_block` (pure; returns a new state
    with the same keys, ``t`` and ``position`` advanced by b); the results
    agree up to rounding. See the module docstring for the derivation.

    Parameters
    ----------
    state : dict
        Iterative-solver state (`kpca.solvers.init_state`).
    rows : ndarray of shape (b, l)
        Centred kernel rows ``K'[indices, :]``. float32 rows are used as they
        are (the module docstring's *Precision*); other dtypes are converted
        to the state's.
    indices : ndarray of shape (b,)
        Row indices ``p_s`` of the steps (may repeat).
    sub_block : int, optional
        Rows m accumulated per transform, default
        ``min(b, default_sub_block(r, l))``. Larger values amortise the
        O(r^2 l) GEMMs over more rows but make every step's small loop
        O(r (r + m)) longer.
    growth_limit : float
        End a sub-block early when ``||T||_F / sqrt(dim T)`` exceeds this.

    Cost: per row ``4 r l`` (KHA family) or ``6 r l`` (SMD) flops in GEMMs
    plus ``O(r^2 l / m + r (r + m))``; memory O(m l + m^2) temporaries
    besides the new state.
    """
    new = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in state.items()
           if k not in ("A", "AK", "B")}
    dtype = state["A"].dtype
    r, l = state["A"].shape
    # float32 rows stay float32: the GEMMs against them then read half the bytes (see Precision)
    rows = np.ascontiguousarray(rows, dtype=np.float32 if rows.dtype == np.float32 else dtype)
    idx = np.ascontiguousarray(indices, dtype=np.int64)
    b = idx.shape[0]
    if rows.shape != (b, l):
        raise ValueError(f"rows: expected shape {(b, l)} for {b} indices, got {rows.shape}")
    if b == 0:
        new.update({k: state[k].copy() for k in ("A", "AK", "B") if k in state})
        return new
    m_max = max(1, int(sub_block) if sub_block is not None else min(b, default_sub_block(r, l)))
    gain = state["gain"].astype(dtype).astype(np.float64)  # as step_block rounds it
    # A diverging state goes non-finite silently, as in the jitted kernels; the driver's guard checks.
    with np.errstate(over="ignore", invalid="ignore"):
        if state["solver"] == "kha-smd":
            new.update(_smd_block(state, rows, idx, gain, m_max, float(growth_limit)))
        else:
            new.update(_kha_block(state, rows, idx, gain, m_max, float(growth_limit)))
    new["t"] = state["t"] + b
    new["position"] = state["position"] + b
    return new


def _kha_block(state, rows, idx, gain, m_max, growth_limit) -> dict:
    """New A, AK for the KHA family: per sub-block one `_kha_transform` and four GEMMs."""
    A, AK = state["A"], state["AK"]
    r, l = A.shape
    decay = state["solver"] != "kha"
    t0, b, a = int(state["t"]), idx.shape[0], 0
    while a < b:
        m = min(m_max, b - a)
        Kb, p = rows[a : a + m], idx[a : a + m]
        Qt = np.empty((m, r + m))
        Qt[:, :r] = Kb @ A.T.astype(Kb.dtype, copy=False)  # (X k_s)^T = [A_0 k_s; E k_s]^T
        Qt[:, r:] = Kb[:, p]
        W = np.zeros((r, r + m))
        W[:, :r] = np.eye(r)
        done = _kha_transform(W, Qt, gain, t0 + a, decay, float(l), growth_limit)
        T = W[:, :r].astype(A.dtype)
        C = W[:, r : r + done].astype(A.dtype)
        AK_new = T @ AK
        AK_new += C.astype(Kb.dtype, copy=False) @ Kb[:done]
        A = T @ A
        _scatter_add(A, p[:done], C, np.unique(p[:done]).size == done)
        AK = AK_new
        a += done
    return {"A": A, "AK": AK}


def _smd_block(state, rows, idx, gain, m_max, growth_limit) -> dict:
    """New A, B, AK, rho for KHA-SMD: per sub-block one `_smd_transform` and five GEMMs.

    A and B are kept stacked as ``Z = [A; B]`` (2r x l) for the block, so that
    ``K_b Z^T``, ``Z AK^T`` and ``T Z`` each read K_b or Z once.
    """
    AK = state["AK"]
    r, l = AK.shape
    Z = np.concatenate([state["A"], state["B"]])
    rho = state["rho"].astype(np.float64)
    mu, xi = float(state["mu"]), float(state["xi"])
    t0, b, a = int(state["t"]), idx.shape[0], 0
    while a < b:
        m = min(m_max, b - a)
        Kb, p = rows[a : a + m], idx[a : a + m]
        n = 2 * r + m
        Qt = np.empty((m, n))  # (X k_s)^T = [A_0 k_s; B_0 k_s; E k_s]^T
        Qt[:, : 2 * r] = Kb @ Z.T.astype(Kb.dtype, copy=False)
        Qt[:, 2 * r :] = Kb[:, p]
        Gt = np.zeros((n, n))  # Gm^T = X X_K^T, X_K = [AK_0; 0; K_b]
        Gt[: 2 * r, :r] = Z @ AK.T
        Gt[: 2 * r, 2 * r :] = Qt[:, : 2 * r].T
        Gt[2 * r :, :r] = AK[:, p].T
        Gt[2 * r :, 2 * r :] = Qt[:, 2 * r :].T
        W = np.zeros((2 * r, n))
        W[:, : 2 * r] = np.eye(2 * r)
        R = np.ascontiguousarray(Gt[: 2 * r])  # R = W Gm^T at W = [I | 0]
        done = _smd_transform(W, R, Qt, Gt, rho, gain, t0 + a, float(l), mu, xi, growth_limit)
        T = W[:, : 2 * r].astype(Z.dtype)  # [[T_AA, 0], [T_BA, T_BB]]
        C = W[:, 2 * r : 2 * r + done].astype(Z.dtype)
        AK_new = T[:r, :r] @ AK
        AK_new += C[:r].astype(Kb.dtype, copy=False) @ Kb[:done]
        Z = T @ Z  # A = T_AA A_0, B = T_BA A_0 + T_BB B_0 (the zero block costs r^2 l flops, saves a pass)
        _scatter_add(Z, p[:done], C, np.unique(p[:done]).size == done)
        AK = AK_new
        a += done
    return {"A": Z[:r], "B": Z[r:], "AK": AK, "rho": rho.astype(state["rho"].dtype)}
