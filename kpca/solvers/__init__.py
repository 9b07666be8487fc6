"""Solvers: a resumable state (plain dict of arrays and scalars) plus step functions.

Iterative solvers (seed 000): ``kha`` (constant gain, eq. 8-10), ``kha-t``
(gain eta0 l/(t+l)), ``kha-et`` (eq. 11-14) and ``kha-smd`` (eq. 15-21,
Algorithm 1). ``exact`` is the dense eigendecomposition (small l only).

The state of an iterative solver:

==============  ============================================================
key             value
==============  ============================================================
solver          name
A               (r, l) expansion coefficients; components W = A Phi'
AK              (r, l) A K', kept current incrementally (eq. 17-18)
B, rho          (r, l) SMD differential parameters, (r,) log-gains (SMD)
gain            (r,) base gain of the current pass (eq. 12 without l/(t+l))
eigenvalues     (r,) eigenvalue estimates of K' at the start of the pass (eq. 13)
eta0, mu, xi    resolved hyper-parameters
t, pass,        steps taken, passes completed, rows of the current pass done
position
seed            permutation of pass p is default_rng([seed, p]).permutation(l)
init            how A_1 was chosen: "random" or "subset" (`init_state`)
init_size       (``init="subset"`` only) the subset size m actually used
==============  ============================================================

Everything needed to resume bit for bit is in the dict; nothing else is.
A model serves not the raw ``A`` but `ritz_components` of it (the
orthonormal, variance-ordered basis of the same span; `kpca.solvers._ritz`).
"""

from __future__ import annotations

import numpy as np

from kpca.defaults import XI_DEFAULT, default_eta0, default_mu
from kpca.solvers._blocked import blocked_step_block, is_row_source, require_complete
from kpca.solvers._exact import exact_components
from kpca.solvers._ritz import ritz_components
from kpca.solvers._steps import _kha_steps, _smd_steps
from kpca.solvers._warm import INITS, check_init, default_init_size, subset_start

ITERATIVE = ("kha", "kha-t", "kha-et", "kha-smd")
SOLVERS = ITERATIVE + ("exact",)
_INIT_COLUMNS = 64


def resolve_params(solver: str, mean_diagonal: float, eta0=None, mu=None, xi=None, init: str = "random",
                   n_rows: int | None = None) -> dict:
    """Hyper-parameters actually used: user values, else the defaults of `kpca.defaults`
    (smaller after the warm start ``init="subset"``, the more so the more rows ``n_rows``
    a pass has: `kpca.defaults.warm_scale`)."""
    if solver not in SOLVERS:
        raise ValueError(f"solver: unknown solver {solver!r}; choose one of {SOLVERS}")
    if solver == "exact":
        return {}
    out = {"eta0": float(eta0) if eta0 is not None else default_eta0(solver, mean_diagonal, init, n_rows)}
    if solver == "kha-smd":
        out["mu"] = float(mu) if mu is not None else default_mu(mean_diagonal, init, n_rows)
        out["xi"] = float(xi) if xi is not None else XI_DEFAULT
    return out


def permutation(seed: int, pass_index: int, n_rows: int) -> np.ndarray:
    """The visiting order of pass ``pass_index``: a fresh random permutation of Z_l (seed 000 §2)."""
    return np.random.default_rng([seed, pass_index]).permutation(n_rows)


def init_state(solver: str, n_components: int, centered_rows, n_rows: int, params: dict, seed: int = 0,
               dtype=np.float64, init: str = "random", init_size: int | None = None) -> dict:
    """Initial state of an iterative solver (Algorithm 1, step 1).

    ``init="random"`` (the default, the paper's algorithm): ``A_1`` is
    Gaussian on a random subset S of ``s = min(l, max(64, 4 r))`` columns
    (variance 1/(r s)) and zero elsewhere, the sparse start that seed 000
    suggests: then ``A_1 K' = A_1[:, S] K'[S, :]`` costs s kernel rows
    instead of l (step 1e in O(r s l)).

    ``init="subset"`` (a warm start, `kpca.solvers._warm`): ``A_1`` holds the
    r leading principal components of the whole data set within the span of
    a random subset of m points (m = ``init_size``, default
    `default_init_size`), normalised to unit feature-space norm. It costs m
    kernel rows, O(m^2 l + m^3) time and m l memory, and starts the solver
    far closer to the optimum than the random start; with m = l it is exact
    kernel PCA. If the subset spans fewer than r feature-space directions,
    the remaining rows are random (on the same m columns).

    Parameters
    ----------
    centered_rows : callable
        ``centered_rows(indices) -> K'[indices, :]`` of shape (b, l).
    params : dict
        Resolved hyper-parameters (`resolve_params`).
    dtype : numpy dtype
        dtype of ``A`` and ``A K'`` (and ``B``, ``rho``).
    init : {"random", "subset"}
    init_size : int or None
        Subset size m for ``init="subset"``, between n_components and l
        (validated whatever ``init`` is, used only by "subset").

    Raises
    ------
    ValueError
        Naming the field: ``solver`` not iterative, unknown ``init``,
        ``init_size`` out of range.
    """
    if solver not in ITERATIVE:
        raise ValueError(f"solver: {solver!r} is not iterative; choose one of {ITERATIVE}")
    r, l = int(n_components), int(n_rows)
    check_init(init, init_size, r, l)
    extra = {"init": init}
    if init == "subset":
        A, AK, m = subset_start(centered_rows, r, l, seed, init_size, dtype)
        extra["init_size"] = m
    else:
        rng = np.random.default_rng([seed, 2**31])
        s = min(l, max(_INIT_COLUMNS, 4 * r))
        cols = np.sort(rng.choice(l, size=s, replace=False))
        A = np.zeros((r, l), dtype=dtype)
        A[:, cols] = rng.normal(scale=1.0 / np.sqrt(r * s), size=(r, s))
        AK = np.ascontiguousarray(A[:, cols] @ centered_rows(cols), dtype=dtype)
    state = {"solver": solver, "A": A, "AK": AK, "gain": np.full(r, params["eta0"], dtype=np.float64),
             "eigenvalues": eigenvalue_estimates(A, AK), "t": 0, "pass": 0, "position": 0, "seed": int(seed),
             "n_rows": l, **params, **extra}
    if solver == "kha-smd":
        state["B"] = np.zeros_like(A)
        state["BK"] = np.zeros_like(A)  # B K'; kept like AK so that B k_s = BK[:, p_s]
        state["rho"] = np.ones(r, dtype=dtype)  # Algorithm 1, step 1b
    return state


def complete_state(state: dict, centered_rows, block_size: int) -> dict:
    """``state`` with every array the updates need, computing what a saved state lacks.

    KHA-SMD states keep ``BK = B K'`` (so that the blocked update reads ``B k_s``
    as ``BK[:, p_s]``); one saved before it was kept (checkpoints written
    before 2026-11-26) gets it here from one sweep of the kernel rows,
    ``B K' = sum_c B[:, c] K'[c, :]``. Any other state is returned as it is.
    ``centered_rows`` is a function ``indices -> K'[indices, :]``, or a row
    source (`is_row_source`), whose ``left_product`` never forms the rows.
    Cost for such a state: l kernel rows in blocks of ``block_size`` plus
    ``2 r l^2`` flops.
    """
    if state["solver"] != "kha-smd" or "BK" in state:
        return state
    B, l = state["B"], int(state["n_rows"])
    BK = np.zeros_like(B)
    source = is_row_source(centered_rows)
    for a in range(0, l, block_size):
        idx = np.arange(a, min(a + block_size, l))
        if source:
            centered_rows.left_product(idx, B[:, idx], BK)
        else:
            BK += B[:, idx] @ centered_rows(idx)
    return dict(state, BK=BK)


def eigenvalue_estimates(A: np.ndarray, AK: np.ndarray) -> np.ndarray:
    """Eq. 13: ``lambda_i = ||[A K']_i|| / ||A_i||``, shape (r,). Cost O(r l)."""
    num = np.linalg.norm(AK, axis=1)
    den = np.linalg.norm(A, axis=1)
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def begin_pass(state: dict) -> dict:
    """Once per pass: re-estimate eigenvalues (eq. 13) and set the base gains (eq. 12).

    KHA and KHA-t keep the scalar gain eta0. Returns a new state.
    """
    state = dict(state)
    lam = eigenvalue_estimates(state["A"], state["AK"])
    state["eigenvalues"] = lam
    if state["solver"] in ("kha-et", "kha-smd"):
        floor = max(float(lam.max()) * 1e-12, 1e-300)
        state["gain"] = state["eta0"] * np.linalg.norm(lam) / np.maximum(lam, floor)
    return state


def step_block(state: dict, rows, indices: np.ndarray) -> dict:
    """Apply one KHA-family step per row of ``rows`` (K'[indices, :]), in order.

    Pure: returns a new state; the input state is not modified. This is the
    fast, blocked form (`kpca.solvers._blocked`): per row O(r (r + b)) small
    matrix work, and one GEMM with the rows for the block (2 r l flops per
    row, 4 r l for KHA-SMD); it equals `step_block_reference` up to rounding
    (tests/kpca/test_blocked.py). ``rows`` is the (b, l) array of rows, or a
    row source (`is_row_source`) whose kernel tiles are multiplied as they
    are computed.
    """
    return blocked_step_block(state, rows, indices)


def step_block_reference(state: dict, rows, indices: np.ndarray) -> dict:
    """The step-by-step form of `step_block`: the readable reference the blocked one is tested against.

    ``rows`` as for `step_block` (from a row source the rows are formed, ``rows.block(indices)``).
    Cost O(b r l) memory-bound work for b rows, plus an O(r l) copy of the state arrays.
    """
    require_complete(state)
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
        _smd_steps(A, new["B"], AK, new["BK"], new["rho"], rows, idx, gain, new["t"], float(l), new["mu"],
                   new["xi"])
    else:
        _kha_steps(A, AK, rows, idx, gain, new["t"], solver != "kha", float(l))
    new["t"] += len(idx)
    new["position"] += len(idx)
    return new


__all__ = ["SOLVERS", "ITERATIVE", "INITS", "resolve_params", "check_init", "default_init_size", "init_state",
           "complete_state", "require_complete", "begin_pass", "step_block", "step_block_reference", "is_row_source",
           "eigenvalue_estimates", "permutation", "exact_components", "ritz_components"]
