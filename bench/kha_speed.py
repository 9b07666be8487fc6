"""Cost of a KHA pass against the cost of its kernel rows, and float32 against float64.

1. l = 20,000 random points (n = 64, a Gaussian mixture), r = 16, Gaussian
   kernel: the time to compute one pass's centred kernel rows alone, and
   the time of a full kha-smd / kha-et pass with the step-by-step reference
   updates (`kpca.solvers.step_block_reference`) and with the blocked ones
   (`kpca.solvers.step_block`) — ratios to the kernel rows, measured in one
   run over ``--blocks`` blocks of a pass (extrapolated to the pass). The
   kernel rows are timed dropping each block before computing the next, as
   a pass does: computing 20 blocks of 134 MB while holding them all took
   4x as long (each block's memory then comes fresh from the OS), which
   inflated the kernel-row times of this script's runs before 2026-11-26.
   Then one whole pass (kha-smd, kha-et) through `kpca.driver.run_passes`, in float64 and
   float32, against that pass's kernel rows alone (formed block by block,
   as `KernelRows.block` does), in five rounds (median and every round
   reported), three ways: ``fused`` (the default: the update multiplies
   each kernel tile while it is in cache and the rows are never formed),
   ``overlapped`` (rows formed, the next block's in a background thread
   while the current one updates; the default before 2026-11-26) and
   ``sequential`` (rows formed, then the update). Then the same with one
   kernel thread and one BLAS thread, a service worker's setting
   (``full_pass_one_thread_each``: the rows alone and the fused pass then
   use one core, the overlapped pass two). Beside the rows formed, each round
   also times the pass's kernel tiles computed and summed in cache but never
   stored (``kernel_tiles_unstored_s``, as `KernelRows.fit_centering` does):
   the least any pass over these rows can cost.
2. float32 against float64 kernel rows (the state stays float64; float32
   rows are multiplied in float32): speed of a fit and the excess error
   after 20 passes on 1797 digits (sigma 3, r 16).

Prints JSON and writes bench/results/kha_speed.json.

    python bench/kha_speed.py [--l 20000] [--blocks 20]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import scipy.linalg
from sklearn.datasets import load_digits

from kpca._threads import blas_limit, tile_threads
from kpca.defaults import default_block_size
from kpca.driver import run_passes
from kpca.kernels import KernelSpec
from kpca.metrics import excess_error, minimal_error
from kpca.rows import Centering, KernelRows
from kpca.solvers import begin_pass, init_state, permutation, resolve_params, step_block, step_block_reference

OUT = Path(__file__).parent / "results"


def pass_costs(l, n, blocks):
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
        params = resolve_params(solver, 1.0)
        state = begin_pass(init_state(solver, 16, lambda i: rng.normal(size=(len(i), l)), l, params, seed=0))
        for name, step in implementations.items():
            s = step(state, kernel_blocks[0], idx[1])  # warm-up / compile
            t0 = time.perf_counter()
            s = state
            for K, i in zip(kernel_blocks, idx[1:]):
                s = step(s, K, i)
            t_update = (time.perf_counter() - t0) / blocks * (l / b)
            out[f"{solver}/{name}/update_pass_s"] = t_update
            out[f"{solver}/{name}/pass_vs_kernel_rows"] = (t_update + out["kernel_rows_pass_s"]) / out["kernel_rows_pass_s"]
    out["full_pass"] = {f"{solver}/{np.dtype(dt).name}": full_pass(X, dt, solver)
                        for solver in ("kha-smd", "kha-et") for dt in (np.float64, np.float32)}
    with tile_threads(1), blas_limit(1):  # a service worker's fit: one kernel thread, one BLAS thread
        out["full_pass_one_thread_each"] = {f"{solver}/{np.dtype(dt).name}": full_pass(X, dt, solver)
                                            for solver in ("kha-smd", "kha-et") for dt in (np.float64, np.float32)}
    return out


def full_pass(X, dtype, solver, repeats=5):
    """One whole pass of ``solver`` through `run_passes` (fused, overlapped, sequential: see the
    module docstring), against the same pass's kernel rows alone; rows (and their GEMM) in ``dtype``.

    Each of ``repeats`` rounds times the rows alone, then the three passes, so every ratio is
    measured within one round (this shared machine's speed drifts by 20 % between rounds);
    the medians are reported beside every round's figures."""
    l = X.shape[0]
    rows = KernelRows(X.astype(dtype), KernelSpec("gaussian", sigma=1.5 * np.sqrt(X.shape[1])), dtype=dtype)
    rows.centering = Centering(np.zeros(l), 0.0, 1.0)
    b = default_block_size(l)
    order = permutation(0, 0, l)
    state = init_state(solver, 16, rows.block, l, resolve_params(solver, 1.0), seed=0)
    ways = {"fused": {}, "overlapped": {"fused": False}, "sequential": {"fused": False, "overlap": False}}
    for how in ways.values():
        run_passes(rows, state, 1, b, **how)  # warm-up: compilation, memory
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
        for key, how in ways.items():
            time.sleep(0.25)
            t0 = time.perf_counter()
            run_passes(rows, state, 1, b, **how)
            one[f"pass_{key}_s"] = time.perf_counter() - t0
            one[f"pass_{key}_vs_kernel_rows"] = one[f"pass_{key}_s"] / one["kernel_rows_s"]
        one["pass_fused_vs_kernel_tiles_unstored"] = one["pass_fused_s"] / one["kernel_tiles_unstored_s"]
        rounds.append(one)
    out = {f"median_{k}": float(np.median([one[k] for one in rounds])) for k in rounds[0]}
    out["rounds"] = rounds
    return out


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
        state = init_state("kha-smd", 16, lambda i: rows.block(i).astype(np.float64), rows.n_rows,
                           resolve_params("kha-smd", c.mean_diagonal), seed=0)
        t0 = time.perf_counter()
        kernel_time = 0.0

        class Timed:
            n_rows = rows.n_rows

            def block(self, i):
                nonlocal kernel_time
                t = time.perf_counter()
                K = rows.block(i)
                kernel_time += time.perf_counter() - t
                return K

        state, _ = run_passes(Timed(), state, passes, default_block_size(rows.n_rows))
        out[np.dtype(dtype).name] = {"excess_error": excess_error(Kc, state["AK"], e_min),
                                     "fit_s": time.perf_counter() - t0, "kernel_rows_s": kernel_time}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--l", type=int, default=20000)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--blocks", type=int, default=20)
    args = ap.parse_args()
    doc = {"pass_costs": pass_costs(args.l, args.n, args.blocks), "float32_vs_float64": precision()}
    OUT.mkdir(exist_ok=True)
    (OUT / "kha_speed.json").write_text(json.dumps(doc, indent=1))
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
