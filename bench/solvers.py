"""Every solver on the same data at several sizes: the table a user reads to choose one.

Data: the 1797 digits (pixels / 16) repeated to l rows with a fixed-seed jitter of 0.05 (n = 64), a
Gaussian kernel of width 3 (the median distance of the digits), r = 16 components. For each size l
(``--sizes``) and each solver (``--solvers``; every solver's defaults, the KHA family's ``--passes``
passes from its default start), in a fresh process:

* ``fit_s``: wall seconds of the fit (the centring pass and the start included), after a fit of 300
  rows in the same process has compiled (or loaded) its jitted code;
* ``peak_rss_mib``: that process's peak resident memory (the data, about 1 MiB per 2000 rows, and the
  libraries, about 290 MiB, included), and ``fit_mib``, how far the fit and the projections raised it
  above what the process held before the fit;
* ``project_us_per_row``: microseconds per row to project 2000 new rows through the served model;
* ``excess_error``: seed 000 eq. 22 of the served components, ``E/E_min - 1``, with
  ``E^2 = ||K' - Z^T Z||_F^2`` for the training rows' projections Z (r x l, centred), and
  ``E_min^2 = ||K'||_F^2 - sum_{i <= r} lambda_i^2`` from the exact eigenvalues: the dense
  eigendecomposition where l <= 3000, else the ``lanczos`` solver's (run first, as the reference).
  ``||K'||_F^2`` and every solver's ``tr(Z K' Z^T)`` come from one shared pass of kernel rows.

``akpca`` and ``ds-akpca`` are defined for the degree-2 polynomial kernel only (seed 003 §4): they fit
it, ``excess_error`` does not apply, and their figure is the relative reconstruction error of 2000
new rows through their decoder (``reconstruction_error``). ``ds-akpca`` forms l x l products: limited
to 3000 rows like ``exact``.

A solver is left out at a size where it does not fit (``exact``, ``ds-akpca`` above 3000 rows) or where
it would take longer than this 2-core machine can give (``--budget-passes``: the KHA family costs one
pass of kernel rows per pass and lanczos about 8; a pass at l costs about ``(l / 20000)^2`` of one at
20,000); a skipped iterative solver gets ``estimated_fit_s``, its fit time at the largest size run
scaled by ``(l / l_run)^2``. Prints JSON and writes bench/results/solvers.json (``--quick``:
solvers_quick.json).

    python bench/solvers.py [--sizes 2000,20000,100000] [--solvers ...] [--passes 10] [--quick]
    python bench/solvers.py --markdown bench/results/solvers.json   # the table of docs/choosing-a-solver.md
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402

from bench._common import excess_errors as common_excess_errors, jittered_digits as data, save  # noqa: E402

SOLVERS = ("exact", "lanczos", "kha-smd", "kha-et", "subsampled", "nystrom", "nystrom-weighted", "rskpca", "akpca",
           "ds-akpca")
ITERATIVE = ("kha-smd", "kha-et")
AUTOENCODER = ("akpca", "ds-akpca")
POLY2 = {"kernel": "polynomial", "degree": 2, "offset": 0.0, "gamma": 1.0}
LANCZOS_PASSES = 8  # iterations to tol 1e-6 with the defaults, bench/results/lanczos.json: 4 to 8
R = 16
SIGMA = 3.0
DENSE_LIMIT = 3000
PROJECT_ROWS = 2000


def child(solver: str, l: int, passes: int, out: str) -> None:
    """In a fresh process: fit ``solver`` on l rows as the estimator does, time it, project new rows, and
    save the training rows' projections (r, l) and the figures to ``out`` (.npz)."""
    from kpca.estimator import KernelHebbianPCA
    from kpca.solvers import get_solver

    X = data(l)
    params = {"passes": passes, "init": "auto"} if solver in ITERATIVE else {}
    kernel = POLY2 if solver in AUTOENCODER else {"sigma": SIGMA}
    KernelHebbianPCA(R, solver=solver, **kernel, **{**params, "passes": 1} if params else {}).fit(data(300, seed=2))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # the libraries, compiled code, the data
    t0 = time.perf_counter()
    model = KernelHebbianPCA(R, solver=solver, **kernel, **params).fit(X)
    fit_s = time.perf_counter() - t0
    new = data(PROJECT_ROWS, seed=1)
    t0 = time.perf_counter()
    model.transform(new)
    project_s = time.perf_counter() - t0
    figures = {}
    if solver in AUTOENCODER:
        Z = np.zeros((0, l))
        figures["reconstruction_error"] = float(np.sum((model.model_.reconstruct(new) - new) ** 2) / np.sum(new**2))
    elif get_solver(solver).serves == "expansion":  # over the training rows: A K' holds their projections
        Z = np.asarray(model.model_.AK)
    else:
        Z = np.concatenate([model.transform(X[a : a + 4096]) for a in range(0, l, 4096)]).T
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    eigenvalues = np.zeros(0) if model.eigenvalues_ is None else np.asarray(model.eigenvalues_)
    np.savez(out, Z=Z, eigenvalues=eigenvalues, fit_s=fit_s, project_s=project_s, peak=peak, before=before,
             params=json.dumps({k: v for k, v in model.params_used_.items() if np.isscalar(v)}),
             figures=json.dumps(figures))


def run_child(solver: str, l: int, passes: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.npz"
        done = subprocess.run([sys.executable, __file__, "--child", solver, "--l", str(l), "--passes", str(passes),
                               "--out", str(out)], capture_output=True, text=True)
        if done.returncode != 0:
            return {"failed": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
        with np.load(out) as f:
            return {"Z": f["Z"], "eigenvalues": f["eigenvalues"], "fit_s": float(f["fit_s"]),
                    "project_us_per_row": 1e6 * float(f["project_s"]) / PROJECT_ROWS, "peak_rss_mib": float(f["peak"]),
                    "fit_mib": float(f["peak"]) - float(f["before"]),
                    "params_used": json.loads(str(f["params"])), **json.loads(str(f["figures"]))}


def excess_errors(l: int, projections: dict, eigenvalues: np.ndarray) -> dict:
    """Eq. 22's excess error of each solver's training projections (``{solver: Z (r, l)}``) on the data
    of l rows with the exact leading eigenvalues of K' (`bench._common.excess_errors`: one pass of
    centred kernel rows). O(l^2 n) for the pass, O(l^2 r s) for s solvers."""
    from kpca.kernels import KernelSpec

    return common_excess_errors(data(l), KernelSpec("gaussian", sigma=SIGMA), projections, eigenvalues)


def markdown(result: dict) -> str:
    """The table of docs/choosing-a-solver.md from a saved result: one row per solver and size."""
    lines = ["| l | solver | fit (s) | peak memory (MiB) | projection (us/row) | excess error (eq. 22) | m / passes |",
             "|---|---|---|---|---|---|---|"]
    for l, entry in result["table"].items():
        for solver, r in entry["solvers"].items():
            if "skipped" in r:
                if "estimated_fit_s" in r:
                    lines.append(f"| {int(l):,} | {solver} | about {r['estimated_fit_s']:.0f} (not run: the largest run "
                                 f"scaled by l^2) | - | - | - | |")
                else:
                    lines.append(f"| {int(l):,} | {solver} | - | - | - | not run: {r['skipped'].split(':')[0]} | |")
                continue
            if "failed" in r:
                lines.append(f"| {int(l):,} | {solver} | failed: {r['failed']} | | | | |")
                continue
            used = r["params_used"]
            size = (f"m {used['centres']}" if "centres" in used else f"m {used['landmarks']}" if "landmarks" in used
                    else f"{used['passes']} passes" if "passes" in used else "")
            figure = (("< 1e-12" if r["excess_error"] < 1e-12 else f"{r['excess_error']:.1e}") if "excess_error" in r else
                      f"({r['reconstruction_error']:.3f} rel. reconstruction, poly2)" if "reconstruction_error" in r
                      else "-")
            lines.append(f"| {int(l):,} | {solver} | {r['fit_s']:.1f} | {r['peak_rss_mib']:.0f} | "
                         f"{r['project_us_per_row']:.0f} | {figure} | {size} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000,20000,100000")
    ap.add_argument("--solvers", default=",".join(SOLVERS))
    ap.add_argument("--passes", type=int, default=10, help="passes of the KHA family")
    ap.add_argument("--budget-passes", type=float, default=200.0,
                    help="largest (passes or iterations) x (l / 20000)^2 a KHA fit or lanczos may cost")
    ap.add_argument("--quick", action="store_true", help="l 1000 and 4000, 3 passes; writes solvers_quick")
    ap.add_argument("--markdown", metavar="JSON", help="print the table of a saved result as markdown, and stop")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--l", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())))
        return
    if args.child:
        child(args.child, args.l, args.passes, args.out)
        return
    sizes = [1000, 4000] if args.quick else [int(s) for s in args.sizes.split(",")]
    passes = 3 if args.quick else args.passes
    solvers = args.solvers.split(",")
    table, t_start, timed = {}, time.perf_counter(), {}  # timed: solver -> (l, fit_s) at the largest l run
    for l in sizes:
        exact_eigenvalues, results, projections = None, {}, {}
        if l <= DENSE_LIMIT:
            import scipy.linalg

            from kpca.kernels import KernelSpec
            from kpca.rows import KernelRows

            rows = KernelRows(data(l), KernelSpec("gaussian", sigma=SIGMA))
            rows.fit_centering()
            exact_eigenvalues = scipy.linalg.eigvalsh(rows.dense())[::-1]
        cost = (l / 20000) ** 2
        for solver in sorted(solvers, key=lambda s: s != "lanczos"):  # lanczos first: the reference
            if solver in ("exact", "ds-akpca") and l > DENSE_LIMIT:
                results[solver] = {"skipped": f"forms l x l matrices: limited to {DENSE_LIMIT} rows"}
                continue
            work = passes if solver in ITERATIVE else LANCZOS_PASSES if solver == "lanczos" else 0
            if work * cost > args.budget_passes:
                results[solver] = {"skipped": f"about {work * cost:.0f} passes' worth of kernel rows at l = 20,000: "
                                              f"over the budget of this machine (--budget-passes)"}
                if solver in timed:
                    l_run, fit_s = timed[solver]
                    results[solver]["estimated_fit_s"] = fit_s * (l / l_run) ** 2
                continue
            t0 = time.perf_counter()
            result = run_child(solver, l, passes)
            print(f"l {l:6d} {solver:17s} {time.perf_counter() - t0:7.1f} s", file=sys.stderr)
            if "failed" not in result:
                timed[solver] = (l, result["fit_s"])
                if solver == "lanczos" and exact_eigenvalues is None:
                    exact_eigenvalues = result["eigenvalues"]
                Z = result.pop("Z")
                if Z.shape[0]:
                    projections[solver] = Z
                result["eigenvalues"] = np.asarray(result["eigenvalues"]).tolist()
            results[solver] = result
        if projections and exact_eigenvalues is not None:
            t0 = time.perf_counter()
            for solver, excess in excess_errors(l, projections, exact_eigenvalues).items():
                results[solver]["excess_error"] = excess
            print(f"l {l:6d} excess errors {time.perf_counter() - t0:7.1f} s", file=sys.stderr)
        for solver, result in results.items():
            print(f"l {l:6d} {solver:17s} {json.dumps({k: v for k, v in result.items() if k != 'eigenvalues'})}",
                  file=sys.stderr)
        table[str(l)] = {"reference": "dense eigendecomposition" if l <= DENSE_LIMIT else
                         "lanczos" if exact_eigenvalues is not None else None, "solvers": results}
    save("solvers_quick" if args.quick else "solvers",
         {"r": R, "sigma": SIGMA, "passes": passes, "sizes": sizes, "seconds_total": time.perf_counter() - t_start,
          "table": table})


if __name__ == "__main__":
    main()
