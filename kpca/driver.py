"""The pass loop of the iterative solvers: permutations, blocks, progress hooks, stop requests and
the divergence guard. The solver (`kpca.solvers.SOLVERS`) owns the arithmetic of a step.

``rows`` is a *row source* (`is_row_source`: ``n_rows``, ``square`` and
``left_product``, as `kpca.rows.KernelRows` has):
the solver's step multiplies each kernel tile while it is in cache, so the
rows of a block are never formed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kpca._threads import blas_limit
from kpca.solvers import Diverged, IterativeState, as_state, get_solver
from kpca.solvers._blocked import is_row_source

__all__ = ["PassHooks", "run_passes", "drive_passes", "permutation", "Diverged", "is_row_source"]


@dataclass(frozen=True)
class PassHooks:
    """What the caller of `run_passes` wants to hear and say.

    Attributes
    ----------
    on_pass : callable, optional
        ``on_pass(state)`` after every completed pass (progress, checkpoints), with the
        `kpca.solvers.IterativeState`.
    on_block : callable, optional
        ``on_block(state)`` after every block.
    should_stop : callable, optional
        Asked after every block; True stops the run (the state is then
        resumable, mid-pass or between passes).
    """

    on_pass: Callable[[IterativeState], None] | None = None
    on_block: Callable[[IterativeState], None] | None = None
    should_stop: Callable[[], bool] | None = None


def permutation(seed: int, pass_index: int, n_rows: int) -> np.ndarray:
    """The visiting order of pass ``pass_index``: a fresh random permutation of Z_l (seed 000 §2)."""
    return np.random.default_rng([seed, pass_index]).permutation(n_rows)


def run_passes(rows, state: IterativeState, passes: int, block_size: int, hooks: PassHooks | None = None,
               tol: float | None = None) -> tuple[IterativeState, bool]:
    """Run passes ``state.pass_ .. passes-1`` of the state's solver, resuming mid-pass if needed.

    Each pass visits the rows in the order `permutation(seed, pass)`, in
    blocks of ``block_size``: one call of the solver's ``step`` per block,
    with the row source and the block's indices. A state that `refines`
    (``update`` ``"rayleigh-ritz"``) runs the solver's ``refine`` instead, one whole
    deterministic pass at a time (`kpca.solvers._rayleigh_ritz`).

    ``tol``: the run stops before any pass once the state's ``residual`` (the
    relative residual of its served components, which a start or a
    Rayleigh-Ritz pass measures) is below it, and marks the state
    ``converged``; ``passes`` is then a ceiling. None: every pass runs.

    The divergence guard: after every block, if the solver's ``diverged``
    says so, the state at the start of the pass is restored with smaller
    gains (the solver's ``damped``, which raises `Diverged` when it gives
    up) and the pass restarted.

    Returns ``(state, stopped)``; ``stopped`` is True when ``should_stop()``
    returned True after some block (the state is then resumable). A saved
    state first gets what its solver needs to continue (``restore``: e.g. B
    K' for KHA-SMD checkpoints older than 2026-11-26). ``state`` may be a checkpoint's entries
    (`kpca.solvers.as_state`). Cost: ``passes - state.pass_`` passes of kernel rows plus the solver's
    work per block.
    """
    if not is_row_source(rows):
        raise TypeError("rows: expected a row source (n_rows, square, left_product), e.g. kpca.rows.KernelRows")
    hooks = hooks or PassHooks()
    state = as_state(state, IterativeState)
    solver = get_solver(state.solver)
    l = rows.n_rows
    if state.pass_ < passes:
        state = solver.restore(state, rows, block_size)
    # the large products run in the tile threads, each on one BLAS thread; the caller's small ones
    # gain nothing from more, and idle BLAS threads would spin next to the tiles
    with blas_limit(1):
        refine, step = solver.refine, solver.step
        if step is None:
            raise ValueError(f"solver {solver.name!r} is one-shot: it has no passes to run")
        if state.refines and refine is not None:
            return refine_passes(state, passes, hooks, tol, lambda state: refine(state, rows, block_size, tol=tol))
        if converged(state, tol):
            return state.replace(converged=True), False
        return drive_passes(state, l, passes, block_size, hooks, begin_pass=solver.begin_pass,
                            step=lambda state, indices: step(state, rows, indices),
                            diverged=solver.diverged, damped=solver.damped)


def converged(state: IterativeState, tol: float | None) -> bool:
    """Whether ``state``'s ``residual`` (if it has one) is below ``tol`` (never when ``tol`` is None or 0). O(1)."""
    residual = as_state(state).residual
    return tol is not None and bool(tol) and residual is not None and float(residual) <= tol  # tol 0: every pass runs


def refine_passes(state: IterativeState, passes: int, hooks: PassHooks, tol: float | None,
                  refine) -> tuple[IterativeState, bool]:
    """Whole deterministic passes (``refine(state) -> state``) up to ``passes``, stopping once the
    state has `converged` (marked ``converged``), with the hooks after each pass and stop requests
    between passes. ``state`` (and what ``refine`` returns) may be the entries of one, as the sharded
    passes hand them (`kpca.solvers.as_state`). Returns ``(state, stopped)``."""
    state = as_state(state, IterativeState)
    if converged(state, tol):
        return state.replace(converged=True), False
    while state.pass_ < passes:
        state = as_state(refine(state), IterativeState).replace()  # a new record: the counters below change it alone
        state.pass_ += 1
        if converged(state, tol):
            state.converged = True
        if hooks.on_pass is not None:
            hooks.on_pass(state)
        if state.converged:
            break
        if hooks.should_stop is not None and state.pass_ < passes and hooks.should_stop():
            return state, True
    return state, False


def drive_passes(state: IterativeState, n_rows: int, passes: int, block_size: int, hooks: PassHooks, *,
                 begin_pass, step, diverged, damped, keep=None,
                 rollback=None) -> tuple[IterativeState, bool]:
    """The pass loop `run_passes` and the sharded passes (`kpca.sharded.passes.run_sharded_passes`) share:
    ``begin_pass(state)`` where a pass starts, ``step(state, indices)`` per block of the pass's
    permutation, the divergence guard (``diverged(state)`` -> ``damped(pass_start)``, and ``rollback()``
    of what ``keep()`` kept at the pass's start, for state held elsewhere), the hooks and stop requests.
    ``state`` may be the entries of one (`kpca.solvers.as_state`). Returns ``(state, stopped)``."""
    state = as_state(state, IterativeState)
    while state.pass_ < passes:
        if state.position == 0:
            state = begin_pass(state)
        pass_start = state
        if keep is not None:
            keep()
        order = permutation(state.seed, state.pass_, n_rows)
        while state.position < n_rows:
            a = state.position
            state = step(state, order[a : min(a + block_size, n_rows)])
            if diverged(state):
                state = pass_start = damped(pass_start)
                if rollback is not None:
                    rollback()
                continue
            if hooks.on_block is not None:
                hooks.on_block(state)
            if hooks.should_stop is not None and state.position < n_rows and hooks.should_stop():
                return state, True
        state = state.replace(position=0)
        state.pass_ += 1
        if hooks.on_pass is not None:
            hooks.on_pass(state)
        if hooks.should_stop is not None and state.pass_ < passes and hooks.should_stop():
            return state, True
    return state, False
