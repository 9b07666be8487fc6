"""The lanczos solver: passes to a tolerance against scipy's eigensolvers, and a fit's time against a KHA pass.

1. ``passes``: on digits (1797 rows, pixels / 16), Gaussian (sigma the
   median distance), polynomial (degree 2) and Laplacian (sigma the median
   distance) kernels, r = 8 and 16, relative residual tolerances 1e-6 and
   1e-10: the block products (passes over the kernel rows, each
   `kpca.solvers._lanczos.block_product`) each method takes until every
   wanted pair has ``||K' v - lambda v|| <= tol lambda``:
   ``eigsh`` (ARPACK's implicitly restarted Lanczos, one single-vector
   product per pass; its own stopping test, ``tol`` relative),
   ``scipy_lobpcg+g`` (`scipy.sparse.linalg.lobpcg` with g guard vectors and
   the absolute tolerance ``tol * lambda_r``, lambda_r taken from the dense
   spectrum: the most favourable setting; it stops only when all r + g
   columns meet it) and ``lanczos+g/start`` (this solver, g guard vectors,
   the random or the subset start; the subset start's m kernel rows counted
   as m / l of a pass). Each entry also gives the largest relative
   eigenvalue error against the dense spectrum.
2. ``timing``: l = ``--l`` random points (n = 64; standard normal, and the
   Gaussian mixture of bench/kha_speed.py), r = 16, Gaussian kernel with
   sigma the median distance of 1000 rows, `kpca.rows.KernelRows` over the
   numpy array: one lanczos fit with its defaults (centring pass, subset
   start, iterations) against one kha-smd pass (`kpca.driver.run_passes`
   from ``bench._common.start_iterative``, the rows already centred), wall and CPU
   seconds, in ``--rounds`` alternating rounds; the ratio "lanczos fit / one
   kha pass" of the medians, and the fit's residual per iteration.

Prints JSON and writes bench/results/lanczos.json (`bench._common.save`).

    python bench/lanczos.py [--l 20000] [--rounds 2] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: bench._common

import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
import scipy.sparse.linalg as sla  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

from bench._common import save, start_iterative  # noqa: E402
from kpca._threads import blas_limit  # noqa: E402
from kpca.driver import run_passes  # noqa: E402
from kpca.kernels import KernelSpec, median_distance  # noqa: E402
from kpca.rows import KernelRows  # noqa: E402
from kpca.solvers import SOLVERS, FitContext  # noqa: E402
from kpca.solvers._lanczos import block_product  # noqa: E402


class Counted:
    """``K' V`` by block products, counting them (passes)."""

    def __init__(self, rows):
        self.rows, self.passes = rows, 0

    def __call__(self, V):
        self.passes += 1
        V = np.asarray(V, dtype=np.float64)
        return block_product(self.rows, V.reshape(V.shape[0], -1)).reshape(V.shape)

    def operator(self):
        l = self.rows.n_rows
        return sla.LinearOperator((l, l), matvec=self, matmat=self, dtype=np.float64)


def relative_error(lam, exact):
    lam = np.sort(np.asarray(lam))[::-1][: exact.size]
    return float(np.max(np.abs(lam - exact) / exact))


def passes_to_tolerance(quick: bool) -> list[dict]:
    X = load_digits().data / 16.0
    sigma = median_distance(X)
    specs = {"gaussian": KernelSpec("gaussian", sigma=sigma), "polynomial": KernelSpec("polynomial", degree=2),
             "laplacian": KernelSpec("laplacian", sigma=sigma)}
    if quick:
        X, specs = X[:600], {"gaussian": specs["gaussian"]}
    l = X.shape[0]
    out = []
    for kernel, spec in specs.items():
        rows = KernelRows(X, spec)
        rows.fit_centering()
        spectrum = scipy.linalg.eigvalsh(rows.dense())[::-1]
        for r in (8, 16):
            for tol in (1e-6, 1e-10):
                exact = spectrum[:r]
                entry = {"kernel": kernel, "r": r, "tol": tol, "passes": {}, "eigenvalue_error": {}}
                with blas_limit(1):
                    counted = Counted(rows)
                    lam = sla.eigsh(counted.operator(), k=r, which="LA", tol=tol,
                                    v0=np.random.default_rng(0).normal(size=l), return_eigenvectors=False)
                    entry["passes"]["eigsh"], entry["eigenvalue_error"]["eigsh"] = counted.passes, relative_error(lam, exact)
                    for g in (0, 8, r):
                        counted = Counted(rows)
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            lam, _ = sla.lobpcg(counted.operator(), np.random.default_rng(0).normal(size=(l, r + g)),
                                                tol=tol * exact[-1], maxiter=500, largest=True)
                        name = f"scipy_lobpcg+{g}"
                        entry["passes"][name], entry["eigenvalue_error"][name] = counted.passes, relative_error(lam, exact)
                for g in (0, 8, 16, 32):
                    for init in ("random", "subset"):
                        solver = SOLVERS["lanczos"]
                        context = FitContext(n_rows=l, n_components=r)
                        params = solver.resolved({"tol": tol, "block": g, "init": init, "max_iter": 500}, context)
                        fresh = KernelRows(X, spec)
                        state = solver.fit(fresh, r, params, context)
                        start = params["init_size"] / l if init == "subset" else 0.0
                        name = f"lanczos+{g}/{init}"
                        entry["passes"][name] = round(state["iterations"] + start, 2)
                        entry["eigenvalue_error"][name] = relative_error(state["eigenvalues"], exact)
                print(entry, flush=True)
                out.append(entry)
    return out


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def timing(l: int, rounds: int, n: int = 64, r: int = 16) -> dict:
    rng = np.random.default_rng(0)
    data = {"normal": rng.normal(size=(l, n)),
            "mixture": rng.normal(scale=3.0, size=(10, n))[rng.integers(0, 10, l)] + rng.normal(size=(l, n))}
    out = {}
    for name, X in data.items():
        spec = KernelSpec("gaussian", sigma=median_distance(X[np.sort(rng.choice(l, 1000, replace=False))]))
        solver = SOLVERS["lanczos"]
        context = FitContext(n_rows=l, n_components=r)
        params = solver.resolved({}, context)
        rounds_out = []
        for _ in range(rounds):
            rows = KernelRows(X, spec)
            rows.fit_centering()
            _, state = start_iterative("kha-smd", rows, r, rows.centering.mean_diagonal, seed=0)
            _, kha_wall, kha_cpu = timed(lambda: run_passes(rows, state, 1, 1024))
            log, clock = [], time.perf_counter()

            def report(it):
                log.append({"iteration": it.iteration, "residual": it.value, "s": time.perf_counter() - clock})
                return False

            fit_rows = KernelRows(X, spec)
            fitted, fit_wall, fit_cpu = timed(lambda: solver.fit(fit_rows, r, params, context, report=report))
            rounds_out.append({"kha_pass_s": kha_wall, "kha_pass_cpu_s": kha_cpu, "lanczos_fit_s": fit_wall,
                               "lanczos_fit_cpu_s": fit_cpu, "iterations": fitted["iterations"],
                               "residual": fitted["residual"], "per_iteration": log,
                               "eigenvalues": fitted["eigenvalues"].tolist()})
            print(name, {k: v for k, v in rounds_out[-1].items() if k not in ("per_iteration", "eigenvalues")},
                  flush=True)
        median = {key: float(np.median([x[key] for x in rounds_out]))
                  for key in ("kha_pass_s", "kha_pass_cpu_s", "lanczos_fit_s", "lanczos_fit_cpu_s")}
        out[name] = {"sigma": spec.sigma, "params": params, "rounds": rounds_out, "median": median,
                     "ratio_fit_to_kha_pass": median["lanczos_fit_s"] / median["kha_pass_s"],
                     "ratio_fit_to_kha_pass_cpu": median["lanczos_fit_cpu_s"] / median["kha_pass_cpu_s"]}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--l", type=int, default=20_000, help="rows of the timed fit")
    parser.add_argument("--rounds", type=int, default=2, help="alternating timing rounds")
    parser.add_argument("--quick", action="store_true", help="600 digits, the Gaussian kernel only")
    args = parser.parse_args()
    save("lanczos", {"l": args.l, "passes": passes_to_tolerance(args.quick), "timing": timing(args.l, args.rounds)})


if __name__ == "__main__":
    main()
