"""Per-pass excess reconstruction error of kha, kha-t, kha-et, kha-smd (seed 000 Fig. 1).

Data: the first 1000 of scikit-learn's digits (stand-in for USPS), pixels in
[0, 1]; r = 16; 20 passes; dot-product kernel (left panel) and Gaussian kernel
sigma = 3 (right panel). Gains are the library defaults (`kpca.defaults`),
reported per solver. Writes bench/results/convergence.json and .png and prints
the JSON (`bench._common.save`).

    python bench/convergence.py [--passes 20] [--n 1000] [--r 16]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

from bench._common import output_path, save, start_iterative  # noqa: E402
from bench._stepwise import DenseRows  # noqa: E402
from kpca.driver import PassHooks, run_passes  # noqa: E402
from kpca.kernels import KernelSpec  # noqa: E402
from kpca.metrics import excess_error, minimal_error  # noqa: E402
from kpca.rows import KernelRows  # noqa: E402
from kpca.solvers import SOLVERS  # noqa: E402


def curves(X, spec, r, passes, seed=0):
    rows = KernelRows(X, spec)
    c = rows.fit_centering()
    Kc = rows.dense()
    e_min = minimal_error(scipy.linalg.eigvalsh(Kc), r)
    result = {"kernel": spec.to_dict(), "mean_diagonal": c.mean_diagonal, "solvers": {}}
    dense = DenseRows(Kc)
    for solver in (name for name, declared in SOLVERS.items() if declared.iterative and declared.model is None):
        _, state = start_iterative(solver, dense, r, c.mean_diagonal, seed=seed)
        errors = []
        t0 = time.perf_counter()
        state, _ = run_passes(dense, state, passes, 256,
                              hooks=PassHooks(on_pass=lambda s: errors.append(excess_error(Kc, s["AK"], e_min))))
        result["solvers"][solver] = {
            "params": {k: state[k] for k in ("eta0", "mu", "xi") if k in state},
            "gain_reductions": int(state.get("gain_reductions", 0)),
            "excess_error": errors,
            "seconds": time.perf_counter() - t0,
        }
    return result


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5.5 * len(results), 4.2))
    for ax, (title, res) in zip(np.atleast_1d(axes), results.items()):
        for solver, data in res["solvers"].items():
            ax.semilogy(np.arange(1, len(data["excess_error"]) + 1), data["excess_error"], marker="o", ms=3,
                        label=solver)
        ax.set_title(title)
        ax.set_xlabel("passes through the data")
        ax.set_ylabel("excess relative reconstruction error")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=20)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--r", type=int, default=16)
    args = ap.parse_args()
    X = load_digits().data[: args.n] / 16.0
    results = {
        "dot-product kernel": curves(X, KernelSpec("linear"), args.r, args.passes),
        "Gaussian kernel, sigma 3": curves(X, KernelSpec("gaussian", sigma=3.0), args.r, args.passes),
    }
    doc = {"data": f"digits[:{args.n}] / 16", "n_components": args.r, "passes": args.passes, "results": results}
    plot(results, output_path("convergence.png"))
    save("convergence", doc)


if __name__ == "__main__":
    main()
