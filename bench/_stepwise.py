"""The KHA family step by step, as the papers write it: the readable references of the blocked
updates (`kpca.solvers._blocked`) and of the pass loop (`kpca.driver.run_passes`).

bench/kha_speed.py times them against the package's path (``step_by_step``, ``sequential``); the
tests compare the package with them through tests/naive.py, which re-exports them. They live here,
not in `kpca`, because nothing serves or fits through them (the package has one fit path), and not
in tests/, because a bench script must import nothing from tests/.

* `kha_steps`, `smd_steps`: jitted loops, one row at a time, O(r l) per row;
* `step_block_reference`: a block of rows through them, on a copy of the state;
* `run_passes_reference`: whole passes (same permutations, blocks and divergence guard as
  `kpca.driver.run_passes`) with a given step;
* `DenseRows`: a row source over a dense centred kernel matrix K' (small l), which the references,
  the tests and the benches' and papers' exact runs hand the solvers and the driver.
"""

import numba
import numpy as np

from kpca.solvers import as_state
from kpca.solvers._transforms import RHO_MAX

_LN2 = np.log(2.0)


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


def step_block_reference(state, rows, indices: np.ndarray):
    """The step-by-step form of the KHA family's step: the readable reference the blocked one
    (`kpca.solvers._blocked`) is tested against. ``state`` a `kpca.solvers.KHAState` or the mapping of its
    entries; returns a new `kpca.solvers.KHAState`.

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
    return as_state(new)


def run_passes_reference(rows, state: dict, passes: int, block_size: int, step=step_block_reference) -> dict:
    """The pass loop of `kpca.driver.run_passes` written plainly, with the step-by-step ``step``:
    same permutations, blocks, pass starts and divergence guard."""
    from kpca.driver import permutation
    from kpca.solvers import SOLVERS

    solver = SOLVERS[state["solver"]]
    state = as_state(state)
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
        state = state.replace(position=0)
        state.pass_ += 1
    return state


class DenseRows:
    """A row source over an in-memory centred kernel matrix K' (small l): the same interface as
    `kpca.rows.KernelRows` for the solvers and the driver (``n_rows``, ``block``, ``square``, ``times``,
    ``left_product``), for the references, the tests and the benches' exact runs. It has no
    ``centering``: K' is given centred."""

    centering = None

    def __init__(self, Kc: np.ndarray):
        self.Kc = Kc
        self.n_rows = Kc.shape[0]

    def block(self, indices: np.ndarray) -> np.ndarray:
        """``K'[indices, :]``."""
        return self.Kc[indices]

    def square(self, indices: np.ndarray) -> np.ndarray:
        """``K'[indices][:, indices]``."""
        return self.Kc[np.ix_(indices, indices)]

    def times(self, C: np.ndarray, block_size: int = 0) -> np.ndarray:
        """``C K'`` (d, l)."""
        return np.asarray(C, dtype=np.float64) @ self.Kc

    def left_product(self, indices: np.ndarray, C: np.ndarray, out: np.ndarray, T: np.ndarray | None = None,
                     start: np.ndarray | None = None) -> np.ndarray:
        """``out = T start + C K'[indices, :]`` (T the identity and start ``out`` by default)."""
        start = out if start is None else start
        out[:] = (start if T is None else T @ start) + C @ self.Kc[indices]
        return out
