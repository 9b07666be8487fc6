"""Throughput of kernel-row blocks as a ratio to numpy's GEMM of the same shape.

For each (n, dtype): a block of B rows against l points, Gaussian kernel.
``gemm`` times ``X @ Y.T`` alone (the floor: 2 B l n flops); ``kernel_block``
times the fused GEMM tiles plus their jitted maps (`kpca.kernels`);
``centred_rows`` times `KernelRows.block` (gather, kernel and centring in
one pass) over a chunked source. All with 2 threads (BLAS's, or the tiles'),
then ``one_thread_*`` with one thread each, the configuration of a service
worker. Same
process, same BLAS threads, best of ``--repeat`` rounds (see `best_times`). Prints JSON and writes
bench/results/kernel_rows.json (`bench._common.save`).

    python bench/kernel_rows.py [--l 20000] [--block 256] [--repeat 9]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from bench._common import blas, save  # noqa: E402
from kpca.kernels import KernelSpec, kernel_block, map_threads, squared_norms  # noqa: E402
from kpca.rows import KernelRows  # noqa: E402


def best_times(fns, repeat):
    """Best-of-``repeat`` time of each function in steady state, in rounds (gemm x3,
    kernel x3, rows x3, gemm x3, ...) so that a slow spell of this shared machine
    hits all alike. Each group starts 0.25 s after the previous one and its
    first call is not timed: after a multi-threaded BLAS call OpenBLAS's idle
    threads spin for ~0.1 s, which would charge the next function for the
    one before it."""
    for fn in fns:
        fn()  # warm-up (and numba compilation)
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, ts in zip(fns, times):
            time.sleep(0.25)
            fn()
            for _ in range(2):
                t0 = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t0)
    return [min(ts) for ts in times]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--l", type=int, default=20000)
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    spec = KernelSpec("gaussian", sigma=4.0)
    runs = []
    for n in (64, 256):
        for dtype in (np.float32, np.float64):
            Y = rng.random((args.l, n)).astype(dtype)
            X = Y[: args.block].copy()
            xn, yn = squared_norms(X), squared_norms(Y)
            flops = 2.0 * args.block * args.l * n
            rows = KernelRows(Y, spec, dtype=dtype, chunk_rows=4096)
            rows.fit_centering(block_size=1024)
            idx = rng.permutation(args.l)[: args.block]
            t_gemm, t_kernel, t_rows = best_times(
                [lambda: X @ Y.T, lambda: kernel_block(X, Y, spec, xn, yn), lambda: rows.block(idx)], args.repeat)
            with threadpool_limits(1, "blas"):  # as in a service worker: one BLAS thread, one tile thread
                t_gemm1, t_kernel1 = best_times([lambda: X @ Y.T, lambda: kernel_block(X, Y, spec, xn, yn, threads=1)],
                                                args.repeat)
            runs.append({
                "n": n, "dtype": np.dtype(dtype).name, "block": args.block, "l": args.l,
                "gemm_gflops": flops / t_gemm / 1e9,
                "kernel_block_gflops": flops / t_kernel / 1e9,
                "kernel_block_vs_gemm": t_gemm / t_kernel,
                "centred_rows_gflops": flops / t_rows / 1e9,
                "centred_rows_vs_gemm": t_gemm / t_rows,
                "one_thread_gemm_gflops": flops / t_gemm1 / 1e9,
                "one_thread_kernel_block_vs_gemm": t_gemm1 / t_kernel1,
            })
    doc = {"kernel": spec.to_dict(), "blas": blas(), "tile_threads": map_threads(), "runs": runs}
    save("kernel_rows", doc)


if __name__ == "__main__":
    main()
