"""kpca.KernelPCA against the class it replaces, scikit-learn's KernelPCA, on the same data in one run.

The data: the digits repeated to l rows with a jitter of 0.05 (`bench._common.jittered_digits`, n = 64), an
rbf kernel with scikit-learn's default width (gamma = 1 / n_features), r = 8 components: what a user who
changes the import gets with the defaults. At each l (``--sizes``, default 1000, 5000, 20000), one after
the other in this process (each class run once on 300 rows first, so that jitted code and imports are not
timed):

* scikit-learn ``eigen_solver="auto"`` (ARPACK on its dense l x l matrix for r < 10 and l > 200) and
  ``"dense"`` (LAPACK; up to ``--dense-max`` rows, its O(l^3) is minutes beyond);
* ours with ``eigen_solver="auto"`` (the dense eigenpairs up to kpca.kernel_pca.DENSE_ROWS rows, the
  matrix-free ``ritz`` above) and ``"arpack"`` (the matrix-free ``lanczos``).

Each fit is timed once (l = 1000: the best of three). Accuracy against scikit-learn's ``auto`` (ARPACK to
machine precision): the largest relative difference of the eigenvalues, the largest principal angle between
the eigenvectors (degrees), and seed 000 eq. 22's excess error ``E / E_min - 1`` of the training projections
(`bench._common.excess_errors`, not timed). Peak memory is not compared here (bench/out_of_core.py).
Prints JSON and a table; writes bench/results/vs_sklearn.json.

    python bench/vs_sklearn.py [--sizes 1000,5000,20000] [--dense-max 5000]
    python bench/vs_sklearn.py --markdown bench/results/vs_sklearn.json   # docs/scikit-learn.md's table
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
from sklearn.decomposition import KernelPCA as SklearnKernelPCA  # noqa: E402

from bench._common import best_of, excess_errors, jittered_digits, save  # noqa: E402
from kpca import KernelPCA, KernelSpec  # noqa: E402

R = 8


def timed(make, X, repeat: int):
    """(seconds, fitted estimator): the best of ``repeat`` fits of a fresh estimator."""
    return best_of(repeat, lambda: make().fit(X))


def accuracy(est, reference, X) -> dict:
    """How far ``est``'s eigenpairs are from ``reference``'s (scikit-learn's ARPACK)."""
    w, w_ref = est.eigenvalues_, reference.eigenvalues_
    angle = scipy.linalg.subspace_angles(est.eigenvectors_, reference.eigenvectors_).max()
    Z = (est.eigenvectors_ * np.sqrt(w)).T
    excess = excess_errors(X, KernelSpec("gaussian", sigma=float(np.sqrt(X.shape[1] / 2.0))), {"fit": Z}, w_ref)
    return {"eigenvalue_rel_diff": float(np.max(np.abs(w / w_ref - 1.0))), "max_angle_deg": float(np.degrees(angle)),
            "excess_error": float(excess["fit"])}


def run(sizes, dense_max: int) -> dict:
    warm = jittered_digits(300)
    SklearnKernelPCA(R, kernel="rbf").fit(warm)
    for solver in ("auto", "arpack", "randomized"):
        KernelPCA(R, kernel="rbf", eigen_solver=solver).fit(warm)
    cases = []
    for l in sizes:
        X = jittered_digits(l)
        repeat = 3 if l <= 1000 else 1
        row: dict = {"rows": l, "seconds": {}, "solver": {}}
        t, reference = timed(lambda: SklearnKernelPCA(R, kernel="rbf", eigen_solver="auto"), X, repeat)
        row["seconds"]["sklearn auto"] = t
        if l <= dense_max:
            row["seconds"]["sklearn dense"], _ = timed(lambda: SklearnKernelPCA(R, kernel="rbf", eigen_solver="dense"),
                                                       X, repeat)
        row["accuracy"] = {}
        for solver in ("auto", "arpack"):
            t, est = timed(lambda s=solver: KernelPCA(R, kernel="rbf", eigen_solver=s), X, repeat)
            row["seconds"][f"ours {solver}"] = t
            row["solver"][f"ours {solver}"] = est.solver_
            row["accuracy"][f"ours {solver}"] = accuracy(est, reference, X)
        seconds = row["seconds"]
        ours = [k for k in seconds if k.startswith("ours")]
        row["ratio_to_sklearn_auto"] = {k: seconds[k] / seconds["sklearn auto"] for k in ours}
        if "sklearn dense" in seconds:
            row["ratio_to_sklearn_dense"] = {k: seconds[k] / seconds["sklearn dense"] for k in ours}
        cases.append(row)
        print(f"l={l}: " + ", ".join(f"{k} {v:.2f} s" for k, v in seconds.items()), file=sys.stderr, flush=True)
    return {"data": "jittered digits (n = 64), rbf, gamma = 1 / 64", "n_components": R, "cases": cases}


def markdown(result: dict) -> str:
    """The table docs/scikit-learn.md prints: per size, seconds of each fit and ours over scikit-learn's auto,
    and the accuracy of ours against it."""
    lines = ["| rows | scikit-learn auto | scikit-learn dense | ours auto | ours arpack | ours auto / theirs | "
             "ours arpack / theirs | ours auto: eigenvalues, angle | ours arpack: eigenvalues, angle |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in result["cases"]:
        s, ratio, acc = c["seconds"], c["ratio_to_sklearn_auto"], c["accuracy"]
        dense = f"{s['sklearn dense']:.2f} s" if "sklearn dense" in s else "not run"
        auto = f"{s['ours auto']:.2f} s ({c['solver']['ours auto']})"
        lines.append(
            f"| {c['rows']:,} | {s['sklearn auto']:.2f} s | {dense} | {auto} "
            f"| {s['ours arpack']:.2f} s ({c['solver']['ours arpack']}) | {ratio['ours auto']:.2f}x | "
            f"{ratio['ours arpack']:.2f}x | {acc['ours auto']['eigenvalue_rel_diff']:.0e}, "
            f"{acc['ours auto']['max_angle_deg']:.2g} deg | {acc['ours arpack']['eigenvalue_rel_diff']:.0e}, "
            f"{acc['ours arpack']['max_angle_deg']:.2g} deg |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,5000,20000")
    parser.add_argument("--dense-max", type=int, default=5000)
    parser.add_argument("--markdown", help="print the table of a saved result (a JSON file) and exit")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())))
        return
    started = time.perf_counter()
    result = run([int(s) for s in args.sizes.split(",")], args.dense_max)
    result["wall_seconds"] = time.perf_counter() - started
    save("vs_sklearn", result)
    for row in result["cases"]:
        print(f"{row['rows']:>6} rows  " + "  ".join(f"{k}: {v:.3g}" for k, v in row["ratio_to_sklearn_auto"].items()))


if __name__ == "__main__":
    main()
