"""How fast small dense LAPACK runs on one BLAS thread and on all of them, idle and beside a busy process.

For each matrix order (``--sizes``) a symmetric positive definite matrix is decomposed by
`scipy.linalg.eigh` with the BLAS threads capped at 1 and at every core (``kpca._threads``), first on
an idle machine, then while another process keeps one core busy with GEMMs (what a service's second
fit, or serving, does). `kpca._dense.SERIAL_MAX` is the largest order run on one thread: this
script is the evidence for it on the machine at hand. Prints JSON and writes
bench/results/dense_threads.json.

    python bench/dense_threads.py [--sizes 500,1000,2000,3000,4000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402

from bench._common import save  # noqa: E402
from kpca._dense import SERIAL_MAX  # noqa: E402
from kpca._threads import _controller_, _set_threads  # noqa: E402


def busy(stop) -> None:
    """Keep one core busy with GEMMs until ``stop`` is set (a neighbour process)."""
    from threadpoolctl import threadpool_limits

    a = np.random.default_rng(0).normal(size=(600, 600))
    with threadpool_limits(1):
        while not stop.is_set():
            a @ a


def timed_eigh(M: np.ndarray, threads: int, repeat: int) -> float:
    """Best of ``repeat`` wall times of eigh(M) with BLAS at ``threads``."""
    libraries = _controller_().select(user_api="blas").lib_controllers
    before = [library.num_threads for library in libraries]
    for library in libraries:
        _set_threads(library, threads)
    try:
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            scipy.linalg.eigh(M)
            best = min(best, time.perf_counter() - t0)
        return best
    finally:
        for library, n in zip(libraries, before):
            _set_threads(library, n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="500,1000,2000,3000,4000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    rng = np.random.default_rng(0)
    runs = []
    for load in ("idle", "beside a busy process"):
        stop, neighbour = None, None
        if load != "idle":
            stop = multiprocessing.Event()
            neighbour = multiprocessing.Process(target=busy, args=(stop,))
            neighbour.start()
            time.sleep(1.0)
        try:
            for n in (int(s) for s in args.sizes.split(",")):
                G = rng.normal(size=(n, n))
                M = G @ G.T / n
                one, every = timed_eigh(M, 1, args.repeat), timed_eigh(M, cores, args.repeat)
                runs.append({"load": load, "n": n, "one_thread_s": one, f"{cores}_threads_s": every,
                             "ratio_all_over_one": every / one})
                print(f"{load:22s} n {n:5d}: 1 thread {one:.3f} s, {cores} threads {every:.3f} s", file=sys.stderr)
        finally:
            if neighbour is not None:
                stop.set()
                neighbour.join()
    save("dense_threads", {"cores": cores, "serial_max": SERIAL_MAX, "repeat": args.repeat, "runs": runs})


if __name__ == "__main__":
    main()
