"""Passes and seconds for kha-smd to reach an excess error from each start: random, subset, nystrom, rskpca.

Data: the 1797 digits (pixels / 16) repeated to ``--l`` rows with a fixed-seed jitter (0.05), a
Gaussian kernel of the median-distance width (``sigma: "auto"``), r = ``--r``. The exact spectrum
of K' gives E_min (seed 000 eq. 22), so each pass's excess error is exact. For each start (``init``:
the paper's random start; ``subset``, the Rayleigh-Ritz components of a random subset's span;
``nystrom`` and ``rskpca``, those solvers' components extended to every row, `kpca.solvers._extend`;
each at its default size, and ``subset`` and ``nystrom`` again with 200 rows or landmarks)
kha-smd runs ``--passes`` passes with its default gains for that start; recorded: the seconds the
start took (after a warm-up on 1100 rows, so no start is charged for compiling), the excess error
of the served (Rayleigh-Ritz) components and of the raw iterate after the start and after each pass,
and, per target (1e-2, 1e-3, 1e-4), the first pass (0: the start itself) and the seconds at which
the served figure was at or below it.

    python bench/warm_start.py [--l 3000] [--r 16] [--passes 10] [--quick]

Prints JSON and writes bench/results/warm_start.json (``--quick``: warm_start_quick.json) and a PNG.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402

from bench._common import jittered_digits as data, output_path, save, start_iterative  # noqa: E402
from kpca.driver import PassHooks, run_passes  # noqa: E402
from kpca.kernels import KernelSpec  # noqa: E402
from kpca.metrics import excess_error, minimal_error  # noqa: E402
from kpca.rows import KernelRows  # noqa: E402
from kpca.solvers import ritz_components  # noqa: E402

STARTS = {"random": {"init": "random"}, "subset": {"init": "subset"}, "nystrom": {"init": "nystrom"},
          "rskpca": {"init": "rskpca"},  # the defaults' sizes: m = 1000 rows or landmarks, rskpca's shadow m
          "subset-200": {"init": "subset", "init_size": 200}, "nystrom-200": {"init": "nystrom", "init_size": 200}}
TARGETS = (1e-2, 1e-3, 1e-4)


def figures(Kc: np.ndarray, state: dict, e_min: float) -> dict:
    """Excess errors of the served (Rayleigh-Ritz) components and of the raw iterate."""
    return {"served": excess_error(Kc, ritz_components(state["A"], state["AK"])[1], e_min),
            "iterate": excess_error(Kc, state["AK"], e_min)}


def run(start: dict, rows: KernelRows, Kc: np.ndarray, e_min: float, r: int, passes: int) -> dict:
    """One kha-smd fit from ``start`` (its init parameters): seconds and both figures after the start
    and each pass."""
    t0 = time.perf_counter()
    params, state = start_iterative("kha-smd", rows, r, rows.centering.mean_diagonal, seed=0, **start)
    start_s = time.perf_counter() - t0
    curve = [{"pass": 0, "seconds": start_s, **figures(Kc, state, e_min)}]
    clock = {"fit": 0.0, "last": time.perf_counter()}

    def on_pass(s):
        now = time.perf_counter()
        clock["fit"] += now - clock["last"]
        curve.append({"pass": s["pass"], "seconds": start_s + clock["fit"], **figures(Kc, s, e_min)})
        clock["last"] = time.perf_counter()  # the figures' dense products are not the fit's time

    clock["last"] = time.perf_counter()
    run_passes(rows, state, passes, params["block_size"], PassHooks(on_pass=on_pass))
    reached = {}
    for target in TARGETS:
        hit = next((c for c in curve if c["served"] <= target), None)
        reached[f"{target:g}"] = None if hit is None else {"pass": hit["pass"], "seconds": hit["seconds"]}
    used = {k: params[k] for k in ("init", "init_size", "eta0", "mu") if params.get(k) is not None}
    return {"start_seconds": start_s, "params_used": used, "curve": curve, "reached": reached}


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for start, result in results.items():
        curve = result["curve"]
        ax.semilogy([c["seconds"] for c in curve], [max(c["served"], 1e-12) for c in curve], "o-", label=start)
    for target in TARGETS:
        ax.axhline(target, color="grey", lw=0.5)
    ax.set_xlabel("seconds (the start included)")
    ax.set_ylabel("excess error of the served components (eq. 22)")
    ax.set_title("kha-smd from each start")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--l", type=int, default=3000)
    ap.add_argument("--r", type=int, default=16)
    ap.add_argument("--passes", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="l 1200, 3 passes; writes warm_start_quick")
    args = ap.parse_args()
    l, passes, name = (1200, 3, "warm_start_quick") if args.quick else (args.l, args.passes, "warm_start")
    rows = KernelRows(data(l), KernelSpec("gaussian"))
    spec = rows.resolve_kernel()
    rows.fit_centering()
    Kc = rows.dense()
    e_min = minimal_error(scipy.linalg.eigvalsh(Kc), args.r)
    warm = KernelRows(data(1100), spec)  # compile (or load) every start's jitted code before timing
    warm.fit_centering()
    for start in STARTS.values():
        start_iterative("kha-smd", warm, args.r, warm.centering.mean_diagonal, seed=0, **start)
    results = {name: run(start, rows, Kc, e_min, args.r, passes) for name, start in STARTS.items()}
    for start, result in results.items():
        print(f"{start:11s} start {result['start_seconds']:6.1f} s  served after the start "
              f"{result['curve'][0]['served']:.2e}, after {passes} passes {result['curve'][-1]['served']:.2e}; "
              f"reached {result['reached']}", file=sys.stderr)
    plot(results, output_path(f"{name}.png"))
    save(name, {"l": l, "r": args.r, "passes": passes, "kernel": spec.to_dict(), "e_min": e_min,
                "targets": list(TARGETS), "starts": results})


if __name__ == "__main__":
    main()
