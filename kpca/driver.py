"""The pass loop: owns permutations, blocks, progress callbacks, stop requests
and the divergence guard; the jitted kernels own the arithmetic.

``rows`` is anything with ``block(indices) -> K'[indices, :]``. If it is
also a *row source* (`kpca.solvers.is_row_source`: ``square`` and
``left_product``, as `kpca.rows.KernelRows` and `DenseRows` over an
in-memory K' are), the update multiplies the kernel tiles as they are
computed and the blocks of rows are never formed; otherwise the next
block's rows are computed while the current block updates.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable

import numpy as np

from kpca._threads import blas_limit, map_threads, tile_threads
from kpca.solvers import begin_pass, complete_state, is_row_source, permutation, step_block

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

    def square(self, indices: np.ndarray) -> np.ndarray:
        """``K'[indices][:, indices]``."""
        return self.Kc[np.ix_(indices, indices)]

    def left_product(self, indices: np.ndarray, C: np.ndarray, out: np.ndarray, T: np.ndarray | None = None,
                     start: np.ndarray | None = None) -> np.ndarray:
        """``out = T start + C K'[indices, :]`` (T the identity and start ``out`` by default)."""
        start = out if start is None else start
        out[:] = (start if T is None else T @ start) + C @ self.Kc[indices]
        return out


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
    overlap: bool = True,
    fused: bool = True,
) -> tuple[dict, bool]:
    """Run passes ``state["pass"] .. passes-1`` (resuming mid-pass if needed).

    Each pass visits the rows in the order `permutation(seed, pass)`, in blocks
    of ``block_size``: the block's kernel rows (the expensive part) and
    ``block_size`` sequential updates, one call to ``step``.

    The divergence guard: after every block, if `is_diverged`, the state at
    the start of the pass is restored, eta0 (and mu) multiplied by GAIN_REDUCTION, and the pass
    restarted; ``state["gain_reductions"]`` counts this. After
    MAX_GAIN_REDUCTIONS failures `Diverged` is raised.

    Returns ``(state, stopped)``; ``stopped`` is True when ``should_stop()``
    returned True after some block (the state is then mid-pass and resumable).
    ``on_pass(state)`` is called after every completed pass. ``step`` is the
    block update (default the blocked `step_block`; `step_block_reference`
    runs the step-by-step form).

    With ``fused`` (the default) and a row source (`is_row_source`), ``step``
    is given the source itself, ``step(state, rows, indices)``, and forms
    what it needs: `step_block` multiplies each kernel tile while it is in
    cache, so the rows of a block never reach memory (measured at l =
    20,000, n = 64, r = 16: a kha-smd pass took 1.22-1.41x the time of its
    kernel rows formed alone, median 1.33, against 1.45-1.95x, median 1.73,
    with the rows formed and overlapped; bench/kha_speed.py).

    Otherwise ``step`` is given the block's rows ``rows.block(indices)``,
    and with ``overlap`` (the default) the next block's rows are computed
    in a background thread while the current block's update runs
    (`_RowsAhead`); the results are the same, bit for bit where BLAS's
    results do not depend on its thread count. ``rows`` is then used by that
    thread while ``on_block`` and ``should_stop`` run, so these must not use
    it; nothing is in flight during ``on_pass`` or after the return.

    A KHA-SMD state saved without ``BK`` (before 2026-11-26) first gets it
    from one sweep of the rows (`kpca.solvers.complete_state`).
    """
    l = rows.n_rows
    source = fused and is_row_source(rows)
    if state["pass"] < passes:  # a state saved before B K' was kept
        state = complete_state(state, rows if source else rows.block, block_size)
    # fused, the large products run in the tile threads, each on one BLAS thread; the caller's small
    # ones gain nothing from more, and idle BLAS threads would spin next to the tiles (measured: a
    # kha-smd pass took 7 s of CPU instead of 4 at l = 20,000 without this cap)
    one_blas_thread = blas_limit(1) if source else contextlib.nullcontext()
    with _RowsAhead(rows, overlap and not source) as ahead, one_blas_thread:
        while state["pass"] < passes:
            if state["position"] == 0:
                state = begin_pass(state)
            pass_start = state
            order = permutation(state["seed"], state["pass"], l)
            while state["position"] < l:
                a = state["position"]
                b = min(a + block_size, l)
                if source:
                    K = rows
                else:
                    K = ahead.block(order, a, b)
                    if b < l:
                        ahead.start(order, b, min(b + block_size, l))
                state = step(state, K, order[a:b])
                if is_diverged(state):
                    ahead.drop()
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


class _RowsAhead:
    """Kernel rows of the next block, computed in a background thread while the caller updates.

    On ``c`` = `map_threads` cores, BLAS, which the update's GEMMs use, is
    capped at ``max(1, c // 2)`` threads (`blas_limit`) and the background
    thread's kernel tiles use all ``c`` (`tile_threads`; tiles are handed
    out one at a time, so tile threads sharing a core with the update just
    take fewer). The update's single-threaded loop then no longer leaves a
    core idle, and no BLAS threads spin idle next to the tiles (measured at
    l 20,000, n 64 on 2 cores: tiles on 2 threads 3.95 s per pass, on 1
    thread 4.26 s, not overlapped 4.74 s; bench/kha_speed.py). At most one
    block is in flight (one extra block of memory); a pending block that is
    not asked for next is waited for and dropped, so ``rows`` is never used
    by two threads at once. Without ``overlap`` every block is computed on
    demand in the caller's thread.
    """

    def __init__(self, rows, overlap: bool):
        self.rows, self.overlap = rows, overlap
        self.pending: tuple[int, int, Future] | None = None
        self.pool: ThreadPoolExecutor | None = None
        self.limits = contextlib.ExitStack()

    def __enter__(self) -> "_RowsAhead":
        if self.overlap:
            cores = map_threads()
            self.tiles = cores
            self.limits.enter_context(blas_limit(max(1, cores // 2)))
            self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kpca-rows-ahead")
        return self

    def __exit__(self, *exc) -> None:
        self.drop()
        if self.pool is not None:
            self.pool.shutdown(wait=True)
        self.limits.close()

    def _compute(self, indices: np.ndarray) -> np.ndarray:
        with tile_threads(self.tiles):
            return self.rows.block(indices)

    def start(self, order: np.ndarray, a: int, b: int) -> None:
        """Begin computing ``K'[order[a:b], :]`` in the background (if overlapping)."""
        if self.pool is not None:
            self.drop()
            self.pending = (a, b, self.pool.submit(self._compute, order[a:b]))

    def block(self, order: np.ndarray, a: int, b: int) -> np.ndarray:
        """``K'[order[a:b], :]``: the pending block if it is this one, else computed now."""
        if self.pending is not None and self.pending[:2] == (a, b):
            rows, self.pending = self.pending[2].result(), None
            return rows
        self.drop()
        return self.rows.block(order[a:b])

    def drop(self) -> None:
        """Wait for the pending block, if any, and forget it."""
        if self.pending is not None:
            pending, self.pending = self.pending[2], None
            pending.exception()  # wait; its error, if any, is the caller's to meet on recomputing


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
