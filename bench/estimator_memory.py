"""Memory against rows: both scikit-learn estimators fitted on an ``np.memmap`` out of core.

The data: l rows of a Gaussian mixture (n = ``--features``, float64) written to a memmap file, fitted by
``kpca.KernelPCA(8, kernel="rbf")`` (``eigen_solver="auto"``: the matrix-free ``ritz`` above 4,000 rows) and
``kpca.KernelHebbianPCA(8, kernel="rbf")`` (``ritz``), each at most ``--passes`` passes, each fit in a fresh child
process so that its peak resident memory (``ru_maxrss``) is its own. ``baseline`` is a child that imports the
same modules and opens the memmap without fitting: what the interpreter and libraries take. scikit-learn's
``KernelPCA`` forms the l x l kernel matrix, 8 l^2 bytes (320 GB at 200,000 rows): not run above
``--sklearn-max`` rows; below, it runs in a child too, for the comparison. Prints JSON and a table; writes
bench/results/estimator_memory.json and a plot (.png).

    python bench/estimator_memory.py [--rows 25000,50000,100000,200000] [--features 8] [--passes 6]
    python bench/estimator_memory.py --markdown bench/results/estimator_memory.json   # docs/scikit-learn.md's table
    python bench/estimator_memory.py --plot bench/results/estimator_memory.json       # its plot again
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bench._common import output_path, save  # noqa: E402

CHILD = """
import json, resource, sys, time, warnings
import numpy as np
from kpca import KernelHebbianPCA, KernelPCA
from sklearn.decomposition import KernelPCA as SklearnKernelPCA
path, rows, features, which, passes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
X = np.memmap(path, dtype=np.float64, mode="r", shape=(rows, features))
KernelPCA(8, kernel="rbf").fit(np.asarray(X[:300]))  # jitted code loaded before the measure, as in every child
started = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # a fit stopped at --passes says so; the memory is what is measured
    if which == "KernelPCA":
        est = KernelPCA(8, kernel="rbf", max_iter=passes).fit(X)
    elif which == "KernelHebbianPCA":
        est = KernelHebbianPCA(8, kernel="rbf", passes=passes).fit(X)
    elif which == "sklearn":
        est = SklearnKernelPCA(8, kernel="rbf").fit(np.asarray(X))
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def child(path: Path, rows: int, features: int, which: str, passes: int) -> dict:
    """One measure in a fresh process: ``{"seconds", "peak_rss_mib"}``."""
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), str(rows), str(features), which, str(passes)],
                          capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[1])
    return json.loads(done.stdout.strip().splitlines()[-1])


def mixture(rows: int, features: int, seed: int = 0) -> np.ndarray:
    """A Gaussian mixture of 10 clusters, a block of rows at a time is what the caller writes."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(10, features))
    return centres[rng.integers(0, 10, rows)] + rng.normal(size=(rows, features))


def plot(result: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    rows = [c["rows"] for c in result["cases"]]
    styles = {"KernelPCA": ("o", "-"), "KernelHebbianPCA": ("x", ":"), "baseline": ("o", "-"), "sklearn": ("s", "-")}
    for key, (marker, line) in styles.items():  # the two estimators overlap: a marker and a line style each
        points = [(c["rows"], c[key]["peak_rss_mib"]) for c in result["cases"] if key in c]
        if points:
            ax.plot(*zip(*points), marker=marker, linestyle=line, markersize=8,
                    label={"sklearn": "scikit-learn KernelPCA", "baseline": "interpreter and libraries"}.get(key, key))
    ax.plot(rows, [8 * r * r / 2**20 for r in rows], linestyle="--", color="grey", label="8 l^2 bytes (the dense K)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rows l (memmap, out of core)")
    ax.set_ylabel("peak resident memory (MiB)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(output_path("estimator_memory.png"), dpi=100)


def markdown(result: dict) -> str:
    """The table docs/scikit-learn.md prints: per size, each fit's peak memory and seconds."""
    lines = ["| rows | KernelPCA | KernelHebbianPCA | interpreter and libraries alone | scikit-learn KernelPCA | "
             "the dense K alone |", "|---:|---:|---:|---:|---:|---:|"]
    for c in result["cases"]:
        fits = [f"{c[k]['peak_rss_mib']:,.0f} MiB, {c[k]['seconds']:.1f} s" for k in ("KernelPCA", "KernelHebbianPCA")]
        theirs = f"{c['sklearn']['peak_rss_mib']:,.0f} MiB, {c['sklearn']['seconds']:.1f} s" if "sklearn" in c \
            else "not run"
        lines.append(f"| {c['rows']:,} | {fits[0]} | {fits[1]} | {c['baseline']['peak_rss_mib']:,.0f} MiB | {theirs} | "
                     f"{c['dense_K_mib']:,.0f} MiB |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="25000,50000,100000,200000")
    parser.add_argument("--features", type=int, default=8)
    parser.add_argument("--passes", type=int, default=6)
    parser.add_argument("--sklearn-max", type=int, default=25000)
    parser.add_argument("--markdown", help="print the table of a saved result (a JSON file) and exit")
    parser.add_argument("--plot", help="draw the plot of a saved result (a JSON file) and exit")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())))
        return
    if args.plot:
        plot(json.loads(Path(args.plot).read_text()))
        return
    cases = []
    with tempfile.TemporaryDirectory() as folder:
        for rows in (int(r) for r in args.rows.split(",")):
            path = Path(folder) / f"x{rows}.dat"
            X = np.memmap(path, dtype=np.float64, mode="w+", shape=(rows, args.features))
            X[:] = mixture(rows, args.features)
            X.flush()
            del X
            case: dict = {"rows": rows, "dense_K_mib": 8 * rows * rows / 2**20}
            for which in ("baseline", "KernelPCA", "KernelHebbianPCA") + (("sklearn",) if rows <= args.sklearn_max
                                                                           else ()):
                case[which] = child(path, rows, args.features, which, args.passes)
                print(f"{rows} rows, {which}: {case[which]}", file=sys.stderr, flush=True)
            cases.append(case)
            path.unlink()
    result = {"features": args.features, "n_components": 8, "passes_at_most": args.passes, "cases": cases}
    save("estimator_memory", result)
    plot(result)
    for c in cases:
        print(f"{c['rows']:>7} rows: KernelPCA {c['KernelPCA']['peak_rss_mib']:.0f} MiB, KernelHebbianPCA "
              f"{c['KernelHebbianPCA']['peak_rss_mib']:.0f} MiB, baseline {c['baseline']['peak_rss_mib']:.0f} MiB, "
              f"dense K {c['dense_K_mib']:.0f} MiB")


if __name__ == "__main__":
    main()
