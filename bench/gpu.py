"""A pass of kernel rows on a GPU against the CPU path, in the same run: the default fit's pass
(``C K'`` for r = 16 rows of coefficients, `kpca.rows.KernelRows.times`) at l = 100,000 and 400,000
rows of n = 256 features, Gaussian kernel.

* ``gpu``: `kpca.array_rows.ArrayRows` on CuPy (float64 and float32): the data on the device, each
  block of rows one GEMM, the exp and the centring on the device;
* ``cpu``: `kpca.rows.KernelRows`, the numba tiles on every core of this machine (float64). Where a
  whole pass would take longer than ``--cpu-budget`` seconds, a fraction of its blocks is timed and
  the pass's time is that, scaled by the rows (``"scaled_from"`` says how many rows were timed);
* ``default fit``: the estimator's default fit (``device="gpu"`` and ``"cpu"``) at the smaller size,
  with its passes and the residual it stopped on.

Needs CuPy and a CUDA device (the ``[gpu]`` extra); without one it says so and measures the CPU only.
Prints JSON and writes bench/results/gpu.json.

    python bench/gpu.py [--sizes 100000,400000] [--features 256] [--cpu-budget 60] [--fit-devices gpu,cpu]

The passes are saved before the default fits start (a CPU default fit at 100,000 rows of 256 features ran
past a 120 s limit on a 16-core machine; ``--fit-devices gpu`` leaves it out).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402

from bench._common import save  # noqa: E402
from kpca.array_rows import ArrayRows, namespace  # noqa: E402
from kpca.kernels import KernelSpec  # noqa: E402
from kpca.rows import KernelRows  # noqa: E402

R = 16


def data(l: int, n: int) -> np.ndarray:
    """l rows of n features: a few hundred Gaussian clusters, so the kernel has structure. O(l n)."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(256, n))
    return centres[rng.integers(0, 256, size=l)] + 0.5 * rng.normal(size=(l, n))


def timed_pass(rows, C: np.ndarray, xp=None) -> float:
    """Wall seconds of ``rows.times(C)`` (the device synchronised before the clock stops)."""
    t0 = time.perf_counter()
    rows.times(C)
    if xp is not None:
        import cupy

        cupy.cuda.Device().synchronize()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,400000")
    ap.add_argument("--features", type=int, default=256)
    ap.add_argument("--cpu-budget", type=float, default=60.0, help="seconds a whole CPU pass may take")
    ap.add_argument("--fit-devices", default="gpu,cpu", help="devices of the default fits at the first size "
                                                             "(gpu: where there is one)")
    args = ap.parse_args()
    n, cores = args.features, len(os.sched_getaffinity(0))
    xp = namespace("auto")
    out = {"n": n, "r": R, "cores": cores, "gpu": None if xp is None else _gpu_name(), "sizes": {}}
    if xp is None:
        print("no CUDA device visible to CuPy: measuring the CPU path only", file=sys.stderr)
    for l in (int(s) for s in args.sizes.split(",")):
        X = data(l, n)
        sigma = float(np.sqrt(n))  # about the median distance of the clusters' rows
        spec = KernelSpec("gaussian", sigma=sigma)
        C = np.random.default_rng(1).normal(size=(R, l))
        entry = {}
        cpu = KernelRows(X, spec)
        cpu.centering = _centering_of(X, spec, xp)
        probe = min(l, 8192)
        small = KernelRows(X[:probe], spec)
        small.centering = cpu.centering.__class__(cpu.centering.column_means[:probe], cpu.centering.grand_mean,
                                                  cpu.centering.mean_diagonal)
        timed_pass(small, C[:, :probe])  # compile
        estimate = timed_pass(small, C[:, :probe]) * (l / probe) ** 2
        if estimate <= args.cpu_budget:
            entry["cpu_s"], entry["scaled_from"] = timed_pass(cpu, C), l
        else:  # the first blocks of the pass: a fraction of its rows against all l columns
            rows_timed = max(1024, int(l * args.cpu_budget / estimate)) // 1024 * 1024
            t0 = time.perf_counter()
            part = np.zeros((R, l))
            for a in range(0, rows_timed, 1024):
                idx = np.arange(a, min(a + 1024, l))
                cpu.left_product(idx, C[:, idx], part)
            entry["cpu_s"], entry["scaled_from"] = (time.perf_counter() - t0) * l / rows_timed, rows_timed
        print(f"l {l}: cpu pass {entry['cpu_s']:.2f} s (from {entry['scaled_from']} rows)", file=sys.stderr)
        if xp is not None:
            for precision in ("float64", "float32"):
                gpu = ArrayRows(X, spec, xp, block_rows=4096 if l > 200_000 else 8192, dtype=np.float64,
                                compute_dtype=precision)
                gpu.centering = cpu.centering
                timed_pass(gpu, C, xp)  # copy the data, warm the kernels
                entry[f"gpu_{precision}_s"] = min(timed_pass(gpu, C, xp) for _ in range(2))
                print(f"l {l}: gpu {precision} pass {entry[f'gpu_{precision}_s']:.3f} s", file=sys.stderr)
                del gpu
            entry["speedup_float64"] = entry["cpu_s"] / entry["gpu_float64_s"]
        out["sizes"][str(l)] = entry
    save("gpu", out)  # the passes are kept if the default fits run past a caller's time limit
    l = int(args.sizes.split(",")[0])
    out["default_fit"] = default_fits(data(l, n), float(np.sqrt(n)), xp, args.fit_devices.split(","))
    save("gpu", out)


def _centering_of(X: np.ndarray, spec: KernelSpec, xp):
    """The data's centring, from the device where there is one (one pass either way)."""
    rows = ArrayRows(X, spec, xp) if xp is not None else KernelRows(X, spec)
    return rows.fit_centering()


def default_fits(X: np.ndarray, sigma: float, xp, devices=("gpu", "cpu")) -> dict:
    """The estimator's default fit of X on each of ``devices`` (the GPU only where there is one): seconds,
    passes, residual."""
    from kpca.estimator import KernelHebbianPCA

    fits = {}
    for device in [d for d in devices if d == "cpu" or (d == "gpu" and xp is not None)]:
        KernelHebbianPCA(R, sigma=sigma, device=device).fit(X[:2000])  # compile
        t0 = time.perf_counter()
        model = KernelHebbianPCA(R, sigma=sigma, device=device).fit(X)
        fits[device] = {"seconds": time.perf_counter() - t0, "passes": int(model.state_["pass"]),
                        "residual": model.state_.get("residual"), "l": X.shape[0]}
        print(f"default fit on {device}: {fits[device]}", file=sys.stderr)
    return fits


def _gpu_name() -> str:
    import cupy

    return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()


if __name__ == "__main__":
    main()
