"""The pass loop: owns permutations, blocks, progress callbacks, stop requests
and the divergence guard; the jitted kernels own the arithmetic.

``rows`` is anything with ``block(indices) -> K'[indices, :]`` (e.g.
`kpca.rows.KernelRows`, or `DenseRows` over an in-memory K').
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from kpca.solvers import begin_pass, permutation, step_block

# A state is diverged when a component's squared feature-space norm
# (diag A K' A^T, which KHA drives to 1) exceeds this, or is not finite.
NORM_LIMIT = 1e4
MAX_GAIN_REDUCTIONS = 8
GAIN_REDUCTION = 0.25


class Diverged(RuntimeError):
    """The iteration blew up even after the gain was reduced; the message says what to try."""


class DenseRows:
    """Row provider over an in-memory centred kernel matrix (small l)."""

    def __init__(self, Kc: np.ndarray):
        self.Kc = Kc
        self.n_rows = Kc.shape[0]

    def block(self, indices: np.ndarray) -> np.ndarray:
        return self.Kc[indices]


def is_diverged(state: dict) -> bool:
    """True if any component norm ``(A K' A^T)_ii`` is non-finite or above NORM_LIMIT. O(r l)."""
    norms = np.einsum("ij,ij->i", state["AK"], state["A"])
    return bool(not np.all(np.isfinite(norms)) or np.any(np.abs(norms) > NORM_LIMIT))


def run_passes(
    rows,
    state: dict,
    passes: int,
    block_size: int,
    on_pass: Callable[[dict], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    on_block: Callable[[dict], None] | None = None,
    step: Callable[[dict, np.ndarray, np.ndarray], dict] = step_block,
) -> tuple[dict, bool]:
    """Run passes ``state["pass"] .. passes-1`` (resuming mid-pass if needed).

    Each pass visits the rows in the order `permutation(seed, pass)`, in blocks
    of ``block_size``: one call to ``rows.block`` (the kernel rows, the
    expensive part) then ``block_size`` sequential updates.

    The divergence guard: after every block, if `is_diverged`, the state at
    the start of the pass is restored, eta0 (and mu) multiplied by GAIN_REDUCTION, and the pass
    restarted; ``state["gain_reductions"]`` counts this. After
    MAX_GAIN_REDUCTIONS failures `Diverged` is raised.

    Returns ``(state, stopped)``; ``stopped`` is True when ``should_stop()``
    returned True after some block (the state is then mid-pass and resumable).
    ``on_pass(state)`` is called after every completed pass. ``step`` is the
    block update (default the blocked `step_block`; `step_block_reference`
    runs the step-by-step form).
    """
    l = rows.n_rows
    while state["pass"] < passes:
        if state["position"] == 0:
            state = begin_pass(state)
        pass_start = state
        order = permutation(state["seed"], state["pass"], l)
        while state["position"] < l:
            a = state["position"]
            idx = order[a : min(a + block_size, l)]
            state = step(state, rows.block(idx), idx)
            if is_diverged(state):
                state = _reduce_gain(pass_start)
                pass_start = state
                continue
            if on_block is not None:
                on_block(state)
            if should_stop is not None and should_stop() and state["position"] < l:
                return state, True
        state = dict(state, position=0)
        state["pass"] += 1
        if on_pass is not None:
            on_pass(state)
        if should_stop is not None and should_stop() and state["pass"] < passes:
            return state, True
    return state, False


def _reduce_gain(pass_start: dict) -> dict:
    reductions = int(pass_start.get("gain_reductions", 0)) + 1
    if reductions > MAX_GAIN_REDUCTIONS:
        raise Diverged(
            f"the fit diverged (component norms became non-finite or exceeded {NORM_LIMIT:g}) even after "
            f"reducing the gain {MAX_GAIN_REDUCTIONS} times (eta0 is now {pass_start['eta0']:.3g}); "
            "retry with a smaller eta0 (and mu for kha-smd), or leave them out to use the defaults"
        )
    state = dict(pass_start, gain_reductions=reductions, eta0=pass_start["eta0"] * GAIN_REDUCTION)
    if "mu" in state:
        state["mu"] = state["mu"] * GAIN_REDUCTION
    state["gain"] = pass_start["gain"] * GAIN_REDUCTION
    return state
