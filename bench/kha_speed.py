"""Cost of a KHA pass against the cost of its kernel rows, and float32 against float64.

1. l = 20,000 random points (n = 64, a Gaussian mixture), r = 16, Gaussian
   kernel: the time to compute one pass's centred kernel rows alone, and
   the time of a full kha-smd / kha-et pass with the step-by-step reference
   updates (``bench._stepwise.step_block_reference``) and with the blocked ones
   (`kpca.solvers._kha.step_block`) on the formed rows — ratios to the
   kernel rows, measured in one run over ``--blocks`` blocks of a pass
   (extrapolated to the pass). The kernel rows are timed dropping each
   block before computing the next, as a pass does: holding them all is
   slower (each block's memory then comes fresh from the OS).
   Then one whole pass (kha-smd, kha-et), in float64 and float32, against
   that pass's kernel rows alone (formed block by block, as
   `KernelRows.block` does), in ``--rounds`` rounds (median and every round
   reported), two ways: ``fused`` (`kpca.driver.run_passes`, the only path:
   the update multiplies each kernel tile while it is in cache and the rows
   are never formed) and ``sequential`` (rows formed, then the blocked
   update: ``bench._stepwise.run_passes_reference`` with `step_block`). Then the
   same with one kernel thread and one BLAS thread, a service worker's
   setting (``full_pass_one_thread_each``). Beside the rows formed, each
   round also times the pass's kernel tiles computed and summed in cache
   but never stored (``kernel_tiles_unstored_s``, as
   `KernelRows.fit_centering` does): the least any pass over these rows can
   cost.
2. float32 against float64 kernel rows (the state stays float64; float32
   rows are multiplied in float32): speed of a fit and the excess error
   after ``--passes`` passes on 1797 digits (sigma 3, r 16);
   ``row_source_s`` is the part of the fit spent in the row source (kernel
   tiles and the update's products with them, fused).

Prints JSON and writes bench/results/kha_speed.json (`bench._common.save`).

    python bench/kha_speed.py [--l 20000] [--blocks 20] [--rounds 5] [--passes 20]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: bench._common, bench._stepwise

import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

from bench._common import save, start_iterative  # noqa: E402
from bench._stepwise import run_passes_reference, step_block_reference  # noqa: E402
from kpca._threads import blas_limit, tile_threads  # noqa: E402
from kpca.defaults import default_block_size  # noqa: E402
from kpca.driver import permutation, run_passes  # noqa: E402
from kpca.kernels import KernelSpec  # noqa: E402
from kpca.metrics import excess_error, minimal_error  # noqa: E402
from kpca.rows import Centering, KernelRows  # noqa: E402
from kpca.solvers._kha import begin_pass, step_block  # noqa: E402


def pass_costs(l, n, blocks, rounds):
    rng = np.random.default_rng(0)
    X = rng.normal(scale=3.0, size=(10, n))[rng.integers(0, 10, l)] + rng.normal(size=(l, n))
    rows = KernelRows(X, KernelSpec("gaussian", sigma=1.5 * np.sqrt(n)))
    rows.centering = Centering(np.zeros(l), 0.0, 1.0)  # the work is the same for any centring
    b = default_block_size(l)
    order = permutation(0, 0, l)
    blocks = min(blocks, l // b - 1)  # whole blocks only, one more for the warm-up
    idx = [order[k * b : (k + 1) * b] for k in range(blocks + 1)]
    rows.block(idx[0])
    time.sleep(0.25)  # let BLAS's idle threads go to sleep (see bench/kernel_rows.py)
    t0 = time.perf_counter()
    for i in idx[1:]:  # each block dropped before the next, as in a pass (see the module docstring)
        rows.block(i)
    t_rows = time.perf_counter() - t0
    kernel_blocks = [rows.block(i) for i in idx[1:]]  # kept for timing the updates alone
    out = {"l": l, "n": n, "r": 16, "block_size": b, "blocks_timed": blocks,
           "kernel_rows_pass_s": t_rows / blocks * (l / b)}
    implementations = {"step_by_step": step_block_reference, "blocked": step_block}
    for solver in ("kha-et", "kha-smd"):
        state = begin_pass(start_iterative(solver, rows, 16, 1.0)[1])
        for name, step in implementations.items():
            s = step(state, kernel_blocks[0], idx[1])  # warm-up / compile
            t0 = time.perf_counter()
            s = state
            for K, i in zip(kernel_blocks, idx[1:]):
                s = step(s, K, i)
            t_update = (time.perf_counter() - t0) / blocks * (l / b)
            out[f"{solver}/{name}/update_pass_s"] = t_update
            out[f"{solver}/{name}/pass_vs_kernel_rows"] = (t_update + out["kernel_rows_pass_s"]) / out["kernel_rows_pass_s"]
    del kernel_blocks
    out["full_pass"] = {f"{solver}/{np.dtype(dt).name}": full_pass(X, dt, solver, rounds)
                        for solver in ("kha-smd", "kha-et") for dt in (np.float64, np.float32)}
    with tile_threads(1), blas_limit(1):  # a service worker's fit: one kernel thread, one BLAS thread
        out["full_pass_one_thread_each"] = {f"{solver}/{np.dtype(dt).name}": full_pass(X, dt, solver, rounds)
                                            for solver in ("kha-smd", "kha-et") for dt in (np.float64, np.float32)}
    return out


def full_pass(X, dtype, solver, repeats=5):
    """One whole pass of ``solver``, fused and sequential (see the module docstring), against the
    same pass's kernel rows alone; rows (and their GEMM) in ``dtype``.

    Each of ``repeats`` rounds times the rows alone, then the two passes, so every ratio is
    measured within one round (this shared machine's speed drifts between rounds);
    the medians are reported beside every round's figures."""
    l = X.shape[0]
    rows = KernelRows(X.astype(dtype), KernelSpec("gaussian", sigma=1.5 * np.sqrt(X.shape[1])), dtype=dtype)
    rows.centering = Centering(np.zeros(l), 0.0, 1.0)
    b = default_block_size(l)
    order = permutation(0, 0, l)
    _, state = start_iterative(solver, rows, 16, 1.0)
    ways = {"fused": lambda: run_passes(rows, state, 1, b),
            "sequential": lambda: run_passes_reference(rows, state, 1, b, step=step_block)}
    for run in ways.values():
        run()  # warm-up: compilation, memory
    rounds = []
    for _ in range(repeats):
        time.sleep(0.25)  # let BLAS's idle threads go to sleep (see bench/kernel_rows.py)
        t0 = time.perf_counter()
        for a in range(0, l, b):
            rows.block(order[a : a + b])
        one = {"kernel_rows_s": time.perf_counter() - t0}
        time.sleep(0.25)
        t0 = time.perf_counter()
        for a in range(0, l, b):  # the kernel tiles of the pass, formed and summed in cache, never stored
            rows.left_product(order[a : a + b], np.ones((1, min(b, l - a))), np.zeros((1, l)))
        one["kernel_tiles_unstored_s"] = time.perf_counter() - t0
        for key, run in ways.items():
            time.sleep(0.25)
            t0 = time.perf_counter()
            run()
            one[f"pass_{key}_s"] = time.perf_counter() - t0
            one[f"pass_{key}_vs_kernel_rows"] = one[f"pass_{key}_s"] / one["kernel_rows_s"]
        one["pass_fused_vs_kernel_tiles_unstored"] = one["pass_fused_s"] / one["kernel_tiles_unstored_s"]
        rounds.append(one)
    out = {f"median_{k}": float(np.median([one[k] for one in rounds])) for k in rounds[0]}
    out["rounds"] = rounds
    return out


class TimedRows:
    """A row source (`kpca.driver.run_passes`) that adds the time spent in ``rows`` to ``seconds``."""

    def __init__(self, rows):
        self.rows, self.n_rows, self.centering, self.seconds = rows, rows.n_rows, rows.centering, 0.0

    def _timed(self, method, *args, **kwargs):
        t = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - t

    def block(self, indices):
        return self._timed(self.rows.block, indices)

    def square(self, indices):
        return self._timed(self.rows.square, indices)

    def left_product(self, indices, C, out, T=None, start=None):
        return self._timed(self.rows.left_product, indices, C, out, T=T, start=start)


def precision(passes=20):
    X = load_digits().data / 16.0
    out = {"data": "digits (1797) / 16", "kernel": {"type": "gaussian", "sigma": 3.0}, "r": 16, "passes": passes}
    reference = KernelRows(X, KernelSpec("gaussian", sigma=3.0))
    reference.fit_centering()
    Kc = reference.dense()
    e_min = minimal_error(scipy.linalg.eigvalsh(Kc), 16)
    for dtype in (np.float64, np.float32):
        rows = KernelRows(X, KernelSpec("gaussian", sigma=3.0), dtype=dtype)  # float32: tiles, rows, row GEMMs
        c = rows.fit_centering()
        _, state = start_iterative("kha-smd", rows, 16, c.mean_diagonal)
        timed = TimedRows(rows)
        t0 = time.perf_counter()
        state, _ = run_passes(timed, state, passes, default_block_size(rows.n_rows))
        out[np.dtype(dtype).name] = {"excess_error": excess_error(Kc, state["AK"], e_min),
                                     "fit_s": time.perf_counter() - t0, "row_source_s": timed.seconds}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--l", type=int, default=20000)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--blocks", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5, help="rounds of each whole-pass measurement")
    ap.add_argument("--passes", type=int, default=20, help="passes of the float32 / float64 fits")
    args = ap.parse_args()
    doc = {"pass_costs": pass_costs(args.l, args.n, args.blocks, args.rounds),
           "float32_vs_float64": precision(args.passes)}
    save("kha_speed", doc)


if __name__ == "__main__":
    main()
