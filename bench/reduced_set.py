"""Reduced-set KPCA against Nyström and subsampled KPCA on digits as ell varies (seed 004 Fig. 2-8, Table 2).

Data: scikit-learn's digits (1797 x 64, pixels / 16), Gaussian kernel, r = 5
components (as in seed 004 §6). Each split trains on a random 80% (1437
rows) and holds out the other 20%. For every ell (3 to 5 in steps of 0.25;
``--quick``: 3, 4, 5), ``rskpca`` (shadow estimate, m unbounded: ``max_centres``
the rows) fixes m, and the others use the same m, as the paper does:
``nystrom`` (Rayleigh-Ritz form),
``nystrom-weighted`` (k-means), ``subsampled`` (uniform rows, eq. 13-14) and
``rskpca-herding`` (the RSDE comparison of Fig. 7-8; ``rskpca`` with density
``kmeans`` is ``nystrom-weighted`` and with ``paring`` is ``subsampled``, see
`kpca.solvers._reduced`). Then ``defaults``: ``rskpca`` with every parameter
at its default (ell 4, at most a tenth of the rows as centres,
`kpca.solvers._reduced.default_max_centres`; the ell in effect and the
bound of seed 004 eq. 21 it guarantees are recorded), the others at its m.
Measured against exact KPCA on the same 80%:

* ``eigenvalue_deviation``: ``||lambda_hat - lambda||_2 / ||lambda||_2`` over the r
  leading eigenvalues of the training rows' K' (Fig. 2a/3a);
* ``embedding_error``: ``||O - O_hat A||_F / ||O||_F`` on the held-out 20%, A the
  r x r least-squares alignment ``argmin_A ||O - O_hat A||_F`` of §6 (Fig. 2b/3b).
  The paper's baseline is trained on all rows; here on the same 80%, so the
  figure measures the approximation alone;
* ``train_speedup`` and ``test_speedup``: exact KPCA's time over the method's, to
  fit (from the rows to a served model) and to project the held-out rows
  (best of ``--repeats``); ``retained``: m / l (Fig. 6);
* ``knn_accuracy``: 3-NN accuracy, 10-fold cross-validation (scikit-learn's
  ``cross_val_score``, ``KNeighborsClassifier(3)``), of the embeddings of all
  1797 digits by the model trained on the split (Fig. 4-5a); exact KPCA's beside it.

Width. The paper picks it by cross-validation; the 3-NN accuracy of exact KPCA
embeddings is flat in sigma from the median distance up (about 0.886 at the
median, 0.890 at twice it, 0.891 at three times; 0.856 at half), so the bench
runs two widths (``--widths``): the median distance (the service's ``"auto"``),
where the digits are sparse at the shadow's scale (it keeps 30-90% of the rows),
and twice the median, as good for 3-NN, where it keeps 1-15% (seed 004 Fig. 6
reports under 10% on usps and yale). BLAS runs on one thread: on this shared
2-core machine two OpenBLAS threads made one eigendecomposition 100x slower
under load. Figures are means over ``--splits`` random splits (the paper uses 50).

    python bench/reduced_set.py [--splits 5] [--widths 1,2] [--ells 3:5:0.25] [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import cross_val_score  # noqa: E402
from sklearn.neighbors import KNeighborsClassifier  # noqa: E402

from bench._common import output_path, save  # noqa: E402
from kpca._threads import blas_limit  # noqa: E402
from kpca.kernels import KernelSpec, median_distance  # noqa: E402
from kpca.solvers import served_model  # noqa: E402
from kpca.rows import KernelRows  # noqa: E402
from kpca.solvers import SOLVERS, FitContext  # noqa: E402

R = 5
METHODS = {  # bench name: (solver, the parameter that takes m, fixed parameters)
    "rskpca": ("rskpca", None, {}),
    "nystrom": ("nystrom", "landmarks", {}),
    "nystrom-weighted": ("nystrom-weighted", "landmarks", {}),
    "subsampled": ("subsampled", "size", {}),
    "rskpca-herding": ("rskpca", "centres", {"density": "herding"}),
}
METRICS = ("eigenvalue_deviation", "embedding_error", "train_speedup", "test_speedup", "retained", "knn_accuracy")


def fit(solver: str, X: np.ndarray, spec: KernelSpec, given: dict):
    """``(state, served model, seconds)``: the solver run as the worker runs it, timed from the rows to
    the served model."""
    started = time.perf_counter()
    rows = KernelRows(X, spec)
    context = FitContext(n_rows=X.shape[0], n_components=R, exact_limit=X.shape[0], kernel=spec)
    declared = SOLVERS[solver]
    params = declared.resolved(given, context)
    state = declared.fit(rows, R, params, context)
    model = served_model(state, rows, spec)
    return state, model, time.perf_counter() - started


def projection_seconds(model, X: np.ndarray, repeats: int) -> float:
    """Best of ``repeats`` timings of projecting X."""
    best = np.inf
    for _ in range(repeats):
        started = time.perf_counter()
        model.project(X)
        best = min(best, time.perf_counter() - started)
    return best


def knn_accuracy(model, X: np.ndarray, y: np.ndarray) -> float:
    """Mean 10-fold cross-validated 3-NN accuracy of the embeddings of X."""
    return float(cross_val_score(KNeighborsClassifier(3), model.project(X), y, cv=10).mean())


def measure(solver: str, given: dict, split: dict, repeats: int, fitter=None) -> tuple[dict, dict]:
    """``(figures, state)`` of one method on one split (module docstring's metrics; ``m``, ``fit_s``). ``fitter``
    (a method that is no library solver): ``fitter(train, spec, given) -> model`` with ``project``,
    ``eigenvalues`` and ``retained_rows``, timed from the rows to the model like a solver's fit (state: {})."""
    train, test, O, lam = split["train"], split["test"], split["O"], split["lam"]
    if fitter is None:
        state, model, seconds = fit(solver, train, split["spec"], given)
        eigenvalues, size = state["eigenvalues"], model.rows.n_rows
    else:
        started = time.perf_counter()
        model = fitter(train, split["spec"], given)
        seconds = time.perf_counter() - started
        state, eigenvalues, size = {}, model.eigenvalues, model.retained_rows
    T, *_ = np.linalg.lstsq(model.project(test), O, rcond=None)
    figures = {
        "eigenvalue_deviation": float(np.linalg.norm(eigenvalues - lam) / np.linalg.norm(lam)),
        "embedding_error": float(np.linalg.norm(O - model.project(test) @ T) / np.linalg.norm(O)),
        "train_speedup": split["exact_fit"] / seconds,
        "test_speedup": split["exact_test"] / projection_seconds(model, test, repeats),
        "retained": size / train.shape[0],
        "knn_accuracy": knn_accuracy(model, split["X"], split["y"]),
        "m": size,
        "fit_s": seconds,
    }
    return figures, state


def one_split(X, y, spec, ells, seed, repeats, extra=None) -> dict:
    """Every method at every ell on one 80/20 split, then at rskpca's defaults: ``{method: {metric: [value
    per ell]}}``, ``{"defaults": {method: {metric: value}}}`` and the exact model's figures. ``extra``: methods
    that are no library solver, ``{name: fitter}`` (`measure`), each given ``{"m": rskpca's m, "seed": seed}``."""
    extra = extra or {}
    order = np.random.default_rng([seed, 80]).permutation(X.shape[0])
    cut = int(round(0.8 * X.shape[0]))
    train, test = X[np.sort(order[:cut])], X[np.sort(order[cut:])]
    exact_state, exact_model, exact_fit = fit("exact", train, spec, {})
    exact_test = projection_seconds(exact_model, test, repeats)
    split = {"train": train, "test": test, "O": exact_model.project(test), "lam": exact_state["eigenvalues"],
             "spec": spec, "exact_fit": exact_fit, "exact_test": exact_test, "X": X, "y": y}
    out = {"exact": {"fit_s": exact_fit, "project_s": exact_test, "knn_accuracy": knn_accuracy(exact_model, X, y)},
           **{name: {metric: [] for metric in (*METRICS, "m", "fit_s")} for name in [*METHODS, *extra]}, "defaults": {}}
    for ell in [*ells, None]:  # None: rskpca's defaults
        m = None
        for name, (solver, m_param, fixed) in METHODS.items():
            given = {**fixed, "seed": seed}
            if solver == "rskpca" and ell is not None:
                given.update(ell=ell, max_centres=train.shape[0])  # the paper's sweep: m follows from ell alone
            if m_param is not None:
                given[m_param] = m
            figures, state = measure(solver, given, split, repeats)
            if name == "rskpca":
                m = figures["m"]
                if ell is None:
                    figures.update(ell=float(state["used_ell"]), mmd_bound=float(state["used_mmd_bound"]))
            record(out, name, ell, figures)
        for name, fitter in extra.items():
            record(out, name, ell, measure(name, {"m": m, "seed": seed}, split, repeats, fitter)[0])
    return out


def record(out: dict, name: str, ell, figures: dict) -> None:
    """One method's figures into `one_split`'s ``out``: appended per ell, or its defaults' (``ell`` None)."""
    if ell is None:
        out["defaults"][name] = figures
        return
    for metric, value in figures.items():
        out[name][metric].append(value)


def run(widths, ells, splits, repeats, extra=None) -> dict:
    """Every method (and ``extra``'s, `one_split`) at every width and ell, means and deviations over
    ``splits`` splits; ``methods`` names them in order."""
    extra = extra or {}
    digits = load_digits()
    X, y = np.ascontiguousarray(digits.data / 16.0), digits.target
    median = median_distance(X)
    warm = KernelSpec("gaussian", sigma=median)
    for solver, m_param, fixed in METHODS.values():  # compile the jitted kernels before anything is timed
        fit(solver, X[:200], warm, {**fixed, **({m_param: 20} if m_param else {})})
    fit("exact", X[:200], warm, {})
    for fitter in extra.values():
        fitter(X[:200], warm, {"m": 20, "seed": 0})
    names = [*METHODS, *extra]
    results = {}
    for factor in widths:
        spec = KernelSpec("gaussian", sigma=factor * median)
        runs = [one_split(X, y, spec, ells, seed, repeats, extra) for seed in range(splits)]
        summary = {"sigma": spec.sigma, "sigma_over_median": factor,
                   "exact": {k: float(np.mean([r["exact"][k] for r in runs])) for k in runs[0]["exact"]}}
        for name in names:
            summary[name] = {metric: {"mean": np.mean([r[name][metric] for r in runs], axis=0).tolist(),
                                      "std": np.std([r[name][metric] for r in runs], axis=0).tolist()}
                             for metric in runs[0][name]}
        summary["defaults"] = {name: {metric: {"mean": float(np.mean([r["defaults"][name][metric] for r in runs])),
                                               "std": float(np.std([r["defaults"][name][metric] for r in runs]))}
                                      for metric in runs[0]["defaults"][name]} for name in names}
        results[f"{factor:g}x median"] = summary
        print(f"sigma = {factor:g} x median done", file=sys.stderr)
    return {"ells": list(ells), "median_distance": median, "widths": results, "methods": names}


def plot(payload: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    widths = payload["widths"]
    fig, axes = plt.subplots(len(widths), len(METRICS), figsize=(4 * len(METRICS), 3.4 * len(widths)),
                             squeeze=False)
    ells = payload["ells"]
    for row, (label, summary) in zip(axes, widths.items()):
        for ax, metric in zip(row, METRICS):
            for name in payload.get("methods", METHODS):
                mean, std = np.asarray(summary[name][metric]["mean"]), np.asarray(summary[name][metric]["std"])
                ax.errorbar(ells, mean, yerr=std, label=name, marker="o", ms=3, capsize=2)
            if metric == "knn_accuracy":
                ax.axhline(summary["exact"]["knn_accuracy"], color="k", ls="--", label="exact")
            if metric in ("eigenvalue_deviation", "embedding_error"):
                ax.set_yscale("log")
            ax.set_title(f"{metric.replace('_', ' ')} (sigma {label})", fontsize=9)
            ax.set_xlabel("ell")
    axes[0, -1].legend(fontsize=7)
    fig.suptitle("digits (80% train, r = 5): reduced-set KPCA vs Nystrom (seed 004 Fig. 2-8)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=5, help="random 80/20 splits averaged (default 5)")
    ap.add_argument("--widths", default="1,2", help="Gaussian widths, in multiples of the median distance")
    ap.add_argument("--ells", default="3:5:0.25", help="start:stop:step of ell (inclusive)")
    ap.add_argument("--repeats", type=int, default=3, help="projection timings, best of (default 3)")
    ap.add_argument("--quick", action="store_true", help="ell 3, 4, 5; one split; the median width")
    args = ap.parse_args()
    if args.quick:
        args.splits, args.widths, args.ells, args.repeats = 1, "1", "3:5:1", 2
    start, stop, step = (float(v) for v in args.ells.split(":"))
    ells = [float(v) for v in np.round(np.arange(start, stop + step / 2, step), 6)]
    widths = [float(v) for v in args.widths.split(",")]
    started = time.perf_counter()
    with blas_limit(1):
        payload = run(widths, ells, args.splits, args.repeats)
    payload.update(r=R, splits=args.splits, repeats=args.repeats, seconds=time.perf_counter() - started,
                   load_average=list(os.getloadavg()), blas_threads=1)
    name = "reduced_set_quick" if args.quick else "reduced_set"
    save(name, payload)
    plot(payload, output_path(f"{name}.png"))


if __name__ == "__main__":
    main()
