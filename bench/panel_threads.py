"""Kernel-row passes on several threads of one process: a panel as one jitted call against numpy calls.

`kpca._tiles.run_panels` computes ``C K'`` panel by panel (a GEMM tile, the radial map, a GEMM with C's
columns). Each panel was a handful of numpy calls, each taking and releasing the interpreter lock; now
a panel of the Gaussian and Laplacian maps is one call of the jitted `kpca._tiles._panel`, which never
holds it. Both run here in one process, one after the other, on the same data:

* ``pass``: `kpca.rows.KernelRows.times` (one pass of kernel rows, ``C K'`` for d rows of C) on l rows of
  the jittered digits' first n pixels (`bench._common.jittered_digits`), Gaussian kernel sigma 3, with
  1, 2 and every core's worth of tile threads (`kpca._threads.tile_threads`); the best of ``--repeats``
  wall times and the process CPU seconds of that run;
* ``beside a busy thread``: the pass on 2 tile threads while one more Python thread of the process runs
  pure-Python work (as dask's event loop or a request thread of the service may): every numpy call of a
  panel waited for the interpreter lock it holds;
* ``default fit``: the estimator's default fit (`kpca.estimator.KernelHebbianPCA`, r = 16, the digits'
  64 pixels, ``device="cpu"``) at ``--fit-rows`` rows on every core, the best of ``--repeats``.

The numpy panel is the same arithmetic (`run_panels` runs it for maps not in `kpca._tiles._PANEL_MAPS`).
Prints JSON and writes bench/results/panel_threads.json.

    python bench/panel_threads.py [--l 20000] [--n 32] [--d 16] [--fit-rows 20000] [--repeats 2]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402

from bench._common import jittered_digits, save  # noqa: E402
from kpca import _tiles  # noqa: E402
from kpca._threads import tile_threads  # noqa: E402
from kpca.estimator import KernelHebbianPCA  # noqa: E402
from kpca.kernels import KernelSpec  # noqa: E402
from kpca.rows import KernelRows  # noqa: E402
from workers.placement import machine_cores  # noqa: E402

JITTED = dict(_tiles._PANEL_MAPS)


def panels(jitted: bool) -> None:
    """Run the radial maps' panels as jitted calls (True) or as numpy calls (False)."""
    _tiles._PANEL_MAPS.clear()
    if jitted:
        _tiles._PANEL_MAPS.update(JITTED)


def best(run, repeats: int) -> dict:
    """The fastest of ``repeats`` runs of ``run()``: its wall and process CPU seconds."""
    runs = []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        runs.append((time.perf_counter() - wall, time.process_time() - cpu))
    wall, cpu = min(runs)
    return {"wall_s": round(wall, 4), "cpu_s": round(cpu, 4), "cores_busy": round(cpu / wall, 2)}


def beside_busy_thread(run) -> float:
    """Wall seconds of ``run()`` while another Python thread of this process loops in pure Python."""
    stop = threading.Event()

    def busy():
        while not stop.is_set():
            sum(range(2000))

    thread = threading.Thread(target=busy, daemon=True)
    thread.start()
    try:
        started = time.perf_counter()
        run()
        return round(time.perf_counter() - started, 4)
    finally:
        stop.set()
        thread.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--l", type=int, default=20_000)
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--d", type=int, default=16)
    ap.add_argument("--fit-rows", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    cores = machine_cores()
    X = jittered_digits(args.l)[:, : args.n]
    rows = KernelRows(X, KernelSpec("gaussian", sigma=3.0))
    rows.fit_centering()
    C = np.random.default_rng(0).normal(size=(args.d, args.l))
    fit_X = jittered_digits(args.fit_rows)
    result = {"l": args.l, "n": args.n, "d": args.d, "cores": cores, "pass": {}, "default_fit": {}}
    for label, jitted in (("jitted panel", True), ("numpy panel", False)):
        panels(jitted)
        for threads in sorted({1, 2, cores}):
            with tile_threads(threads):
                rows.times(C)  # compiled, and the pool started
                result["pass"][f"{label}, {threads} threads"] = best(lambda: rows.times(C), args.repeats)
            print(label, threads, result["pass"][f"{label}, {threads} threads"], file=sys.stderr, flush=True)
        with tile_threads(2):
            result["pass"][f"{label}, 2 threads, beside a busy thread"] = {"wall_s": beside_busy_thread(lambda: rows.times(C))}
        print(label, "beside a busy thread", result["pass"][f"{label}, 2 threads, beside a busy thread"], file=sys.stderr,
              flush=True)
        KernelHebbianPCA(16, sigma=3.0, device="cpu").fit(fit_X[:2000])
        result["default_fit"][label] = best(lambda: KernelHebbianPCA(16, sigma=3.0, device="cpu").fit(fit_X),
                                            args.repeats)
        print(label, "default fit", result["default_fit"][label], file=sys.stderr, flush=True)
    panels(True)
    passes = result["pass"]
    result["speedup_2_threads"] = {label: round(passes[f"{label}, 1 threads"]["wall_s"] / passes[f"{label}, 2 threads"]["wall_s"], 2)
                                   for label in ("jitted panel", "numpy panel")}
    result["beside_a_busy_thread_numpy_over_jitted"] = round(
        passes["numpy panel, 2 threads, beside a busy thread"]["wall_s"]
        / passes["jitted panel, 2 threads, beside a busy thread"]["wall_s"], 2)
    result["default_fit_numpy_over_jitted"] = round(result["default_fit"]["numpy panel"]["wall_s"]
                                                    / result["default_fit"]["jitted panel"]["wall_s"], 2)
    save("panel_threads", result)


if __name__ == "__main__":
    main()
