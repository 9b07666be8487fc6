"""How well the default gains of kha-smd and kha-et hold on data they were not tuned on.

What it measures. For each case (a data set, a kernel, a number of components r) the excess
reconstruction error of seed 000 eq. 22, ``E(A)/E_min - 1`` with ``E(A) = ||K' - (A K')^T A K'||_F``
and ``E_min`` from the exact spectrum of K', as two figures: the *iterate* (the solver's raw ``A``,
what the paper's Fig. 1 plots) and the *served* components (`kpca.solvers.ritz_components` of
it, what a model serves). Each solver runs with its defaults (only ``seed`` given) and on a 3 x 3
grid of gains around the values those defaults resolve to, d and m (``params_used``):

* kha-smd: eta0 in {d/10, d, 10 d} x mu in {m/10, m, 10 m};
* kha-et: eta0 at 9 points log-spaced over [d/30, 30 d].

Both grids contain the defaults, so default/best >= 1; ratios are taken as ``(default + FLOOR) /
(best + FLOOR)`` (`FLOOR`: differences below it are rounding and noise). Every run starts as a
fit does by default (``init="auto"``: the warm start where affordable, exact kernel PCA on every
case up to 1000 rows); ``--init random`` runs the paper's random start instead (written to
robustness_random.json). The figures are recorded after passes 5,
10 and 20 (the last is ``--passes``). A run that raises `kpca.solvers.Diverged` or gives a
non-finite figure has failed: it is recorded and never the best. The best grid point is chosen
per figure (the served best and the iterate best can be different points), and the ratio
default/best is taken at the last pass, per figure.

By default every run uses fit seed 0 (the random start and the permutations of the passes).
The best of nine runs is then also the luckiest of nine draws of that seed's noise, so a ratio
measures the gains and the noise together; ``--seeds N`` runs seeds 0..N-1 at every point and
compares medians (N times the running time; written to robustness_seedsN.json so that it never
replaces the one-seed result).

How the cases were chosen. Only scikit-learn's offline loaders and generators (fixed
``random_state``, no downloads), subsampled with a fixed seed to at most `MAX_ROWS` rows so that
K' has an exact eigendecomposition; four cases ("digits_all", "..._large", 1797 and 2500 rows)
are larger than the warm start's default subset, so that its start is not exact there. Nothing is standardised: raw units are part of the test (wine
and breast cancer have features of very different scales). Together the cases cover every kernel
of `kpca.kernels.KERNELS`; Gaussian widths 0.1, 1 and 10 times the median pairwise distance (of a
fixed-seed sample of `WIDTH_SAMPLE` points; the Laplacian uses the 1x width); data scaled by 1e-3
and 1e3 (digits with the linear and the polynomial kernel); and r at and past the spectral gap:
``k`` is the largest relative gap ``lambda_k / lambda_{k+1}`` for ``k`` in 2..`GAP_SEARCH` among
eigenvalues above `RANK_FLOOR` times ``lambda_1`` (k >= 2 so that the ordering of components is
exercised; the floor keeps the numerical rank edge out), and ``r = k`` ("gap": the leading
subspace is well separated) or ``r = k + PAST_GAP`` ("past": the last components sit in the
bulk after the gap, the hard case). tanh uses ``gamma = 1 / median |<x_i, x_j>|`` (arguments of
order one) and offset 0.

Negligible E_min. Where ``E_min < NEGLIGIBLE * ||K'||_F`` (r at or past the rank of K', e.g. a
linear kernel on 4 features) the excess error divides by rounding noise; such cases are flagged
and left out of the goals (their figures are still recorded).

How to read the output. bench/results/robustness.json (``--quick``: robustness_quick.json): per
case the data, l, n, kernel, r, the gap, ``E_min``, ``lambda_1``, ``trace(K')`` and
``||K'||_F``; per solver the default run (both figures per recorded pass, the parameters resolved,
gains after any reduction, ``gain_reductions``, seconds), the grid (each point's figures), the
best point per figure, and ``ratio`` = default/best at the last pass. ``summary``: the worst
ratio per solver and figure and its case, how many cases are within `WITHIN` x of the grid's
best, how many have a served figure <= `SERVED_TARGET` at the last pass, and the negligible cases.
robustness.png: one panel per solver, per case the default's served and iterate figures at the
last pass against the grid's best, on a log scale, with a line at `SERVED_TARGET`. The script
also prints a one-line-per-case table and its running time.

    python bench/robustness.py [--cases all|name,...] [--passes 20] [--seeds 1] [--init auto|random] [--quick] [--list]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
import scipy.spatial.distance  # noqa: E402
from sklearn import datasets  # noqa: E402

from bench._common import output_path, save, start_iterative  # noqa: E402
from bench._stepwise import DenseRows  # noqa: E402
from kpca.defaults import default_block_size  # noqa: E402
from kpca.driver import PassHooks, run_passes  # noqa: E402
from kpca.kernels import KernelSpec  # noqa: E402
from kpca.metrics import excess_error, minimal_error  # noqa: E402
from kpca.rows import KernelRows  # noqa: E402
from kpca.solvers import SOLVERS, Diverged, FitContext, ritz_components  # noqa: E402

SOLVER_NAMES = ("kha-smd", "kha-et")
MAX_ROWS = 1000  # larger sets are subsampled (fixed seed) to this many rows (not the "-all", "-large" ones)
WIDTH_SAMPLE = 500  # points whose pairwise distances (inner products) set the kernel width (tanh gamma)
GAP_SEARCH = 30  # the gap is looked for among lambda_2 .. lambda_31
RANK_FLOOR = 1e-6  # eigenvalues below this times lambda_1 are not candidates for lambda_{k+1}
PAST_GAP = 2  # r = k + PAST_GAP for the "past the gap" cases
NEGLIGIBLE = 1e-6  # E_min below this times ||K'||_F: excess error ill-defined, case left out of the goals
WITHIN = 2.0  # goal: default within this factor of the grid's best
FLOOR = 1e-8  # ratios are (default + FLOOR) / (best + FLOOR): excess errors below this are rounding and noise
SERVED_TARGET = 1e-2  # goal: served figure at the last pass at most this
RECORD_AT = (5, 10, 20)  # passes whose figures are recorded (and the last pass)
SEED = 0


def load_subsampled(loader) -> np.ndarray:
    """A scikit-learn loader's data (float64), at most MAX_ROWS rows chosen with a fixed seed."""
    X = np.asarray(loader().data, dtype=np.float64)
    if X.shape[0] <= MAX_ROWS:
        return X
    return X[np.sort(np.random.default_rng(SEED).choice(X.shape[0], size=MAX_ROWS, replace=False))]


# Each loader returns the raw data (float64), at most MAX_ROWS rows, and says what it is.
DATA = {
    "digits": (lambda: load_subsampled(datasets.load_digits), "load_digits, pixels 0..16, 1000 of 1797 rows"),
    "wine": (lambda: load_subsampled(datasets.load_wine), "load_wine, raw units (proline ~1e3, hue ~1)"),
    "breast_cancer": (lambda: load_subsampled(datasets.load_breast_cancer),
                      "load_breast_cancer, raw units (areas ~1e3, smoothness ~1e-1)"),
    "iris": (lambda: load_subsampled(datasets.load_iris), "load_iris, cm"),
    "moons": (lambda: datasets.make_moons(500, noise=0.05, random_state=SEED)[0], "make_moons(500, noise 0.05)"),
    "circles": (lambda: datasets.make_circles(500, noise=0.05, factor=0.5, random_state=SEED)[0],
                "make_circles(500, noise 0.05, factor 0.5)"),
    "swiss_roll": (lambda: datasets.make_swiss_roll(1000, noise=0.05, random_state=SEED)[0],
                   "make_swiss_roll(1000, noise 0.05)"),
    "s_curve": (lambda: datasets.make_s_curve(800, noise=0.05, random_state=SEED)[0],
                "make_s_curve(800, noise 0.05)"),
    "blobs": (lambda: datasets.make_blobs(600, n_features=10, centers=5, random_state=SEED)[0],
              "make_blobs(600, 10 features, 5 centres)"),
    # larger than the warm start's default subset (1000 rows), so that its start is not exact kernel PCA
    "digits-all": (lambda: np.asarray(datasets.load_digits().data, dtype=np.float64), "load_digits, all 1797 rows"),
    "swiss_roll-large": (lambda: datasets.make_swiss_roll(2500, noise=0.05, random_state=SEED)[0],
                         "make_swiss_roll(2500, noise 0.05)"),
    "blobs-large": (lambda: datasets.make_blobs(2500, n_features=10, centers=5, random_state=SEED)[0],
                    "make_blobs(2500, 10 features, 5 centres)"),
}


@dataclass(frozen=True)
class Case:
    """One benchmark case: ``data`` a key of `DATA`, multiplied by ``scale``; ``kernel`` a kernel
    type, radial ones with ``sigma = width x`` the median distance, tanh with ``gamma = 1 / median
    |<x_i, x_j>|``, ``params`` further kernel parameters; ``r`` is ``"gap"`` (r = k) or ``"past"``
    (r = k + PAST_GAP), see the module docstring."""

    name: str
    data: str
    kernel: str
    r: str = "gap"
    width: float = 1.0
    scale: float = 1.0
    params: tuple = ()


CASES = (
    Case("iris-linear-gap", "iris", "linear"),
    Case("iris-linear-past", "iris", "linear", r="past"),  # past the rank of K' (4 features): E_min ~ 0
    Case("wine-gaussian-1x-gap", "wine", "gaussian"),
    Case("wine-laplacian-1x-past", "wine", "laplacian", r="past"),
    Case("breast_cancer-gaussian-1x-gap", "breast_cancer", "gaussian"),
    Case("breast_cancer-linear-gap", "breast_cancer", "linear"),
    Case("digits-linear-gap", "digits", "linear"),
    Case("digits-linear-x1e-3-gap", "digits", "linear", scale=1e-3),
    Case("digits-linear-x1e3-gap", "digits", "linear", scale=1e3),
    Case("digits-poly2-gap", "digits", "polynomial", params=(("degree", 2), ("offset", 1.0))),
    Case("digits-poly2-x1e-3-gap", "digits", "polynomial", scale=1e-3, params=(("degree", 2), ("offset", 1.0))),
    Case("digits-poly2-x1e3-past", "digits", "polynomial", r="past", scale=1e3,
         params=(("degree", 2), ("offset", 1.0))),
    Case("digits-gaussian-0.1x-gap", "digits", "gaussian", width=0.1),
    Case("digits-gaussian-1x-gap", "digits", "gaussian"),
    Case("digits-gaussian-1x-past", "digits", "gaussian", r="past"),
    Case("digits-gaussian-10x-gap", "digits", "gaussian", width=10.0),
    Case("digits-tanh-gap", "digits", "tanh"),
    Case("moons-gaussian-0.1x-past", "moons", "gaussian", r="past", width=0.1),
    Case("moons-tanh-past", "moons", "tanh", r="past"),
    Case("circles-laplacian-1x-gap", "circles", "laplacian"),
    Case("swiss_roll-gaussian-1x-past", "swiss_roll", "gaussian", r="past"),
    Case("s_curve-poly3-gap", "s_curve", "polynomial", params=(("degree", 3), ("offset", 1.0))),
    Case("blobs-gaussian-1x-gap", "blobs", "gaussian"),
    Case("blobs-gaussian-10x-past", "blobs", "gaussian", r="past", width=10.0),
    Case("digits_all-gaussian-1x-past", "digits-all", "gaussian", r="past"),
    Case("digits_all-poly2-gap", "digits-all", "polynomial", params=(("degree", 2), ("offset", 1.0))),
    Case("swiss_roll_large-gaussian-1x-gap", "swiss_roll-large", "gaussian"),
    Case("blobs_large-laplacian-1x-past", "blobs-large", "laplacian", r="past"),
)
QUICK_CASES = ("iris-linear-gap", "wine-gaussian-1x-gap", "blobs-gaussian-1x-gap")
QUICK_PASSES = 5


def kernel_spec(case: Case, X: np.ndarray) -> KernelSpec:
    """The case's kernel, its width (tanh: gamma) set from a fixed-seed sample of X."""
    rng = np.random.default_rng(SEED + 1)
    sample = X[np.sort(rng.choice(X.shape[0], size=min(WIDTH_SAMPLE, X.shape[0]), replace=False))]
    params = dict(case.params)
    if case.kernel in ("gaussian", "laplacian"):
        params["sigma"] = case.width * float(np.median(scipy.spatial.distance.pdist(sample)))
    elif case.kernel == "tanh":
        G = sample @ sample.T
        params.setdefault("gamma", 1.0 / float(np.median(np.abs(G[np.triu_indices_from(G, 1)]))))
    return KernelSpec(case.kernel, **params)


def spectral_gap(eigenvalues: np.ndarray) -> tuple[int, float]:
    """``(k, lambda_k / lambda_{k+1})``, the largest relative gap for k in 2..GAP_SEARCH with
    ``lambda_{k+1} > RANK_FLOOR * lambda_1``; ``eigenvalues`` descending."""
    lam = eigenvalues
    best_k, best_ratio = 2, -1.0
    for k in range(2, min(GAP_SEARCH, lam.size - 2) + 1):
        if lam[k] <= RANK_FLOOR * lam[0]:  # lam[k] is lambda_{k+1}
            break
        ratio = float(lam[k - 1] / lam[k])
        if ratio > best_ratio:
            best_k, best_ratio = k, ratio
    return best_k, best_ratio


def build(case: Case) -> dict:
    """The case's centred kernel matrix, its spectrum and r."""
    X = DATA[case.data][0]() * case.scale
    spec = kernel_spec(case, X)
    rows = KernelRows(X, spec)
    centering = rows.fit_centering()
    Kc = rows.dense()
    eigenvalues = scipy.linalg.eigvalsh(Kc)[::-1]
    k, ratio = spectral_gap(eigenvalues)
    r = k if case.r == "gap" else k + PAST_GAP
    e_min = minimal_error(eigenvalues, r)
    norm = float(np.linalg.norm(Kc))
    return {
        "Kc": Kc, "mean_diagonal": float(centering.mean_diagonal), "spec": spec, "X_shape": X.shape,
        "r": r, "gap_k": k, "gap_ratio": ratio, "e_min": e_min, "norm": norm,
        "eigenvalues": eigenvalues, "negligible": bool(e_min < NEGLIGIBLE * norm),
    }


def figures(Kc: np.ndarray, state: dict, e_min: float) -> dict:
    """Both excess errors of a state: ``served`` (Ritz components) and ``iterate`` (raw A K')."""
    _, AK_r, _ = ritz_components(state["A"], state["AK"])
    return {"served": excess_error(Kc, AK_r, e_min), "iterate": excess_error(Kc, state["AK"], e_min)}


def run_one(case_data: dict, solver: str, passes: int, record_at: tuple[int, ...], seed: int = SEED,
            init: str = "auto", **gains) -> dict:
    """One run of ``solver`` from ``seed`` and start ``init`` with ``gains`` (none: the defaults) for
    ``passes`` passes."""
    Kc, e_min = case_data["Kc"], case_data["e_min"]
    dense = DenseRows(Kc)
    params, state = start_iterative(solver, dense, case_data["r"], case_data["mean_diagonal"], seed=seed, init=init,
                                    **gains)
    recorded = {}

    def on_pass(s):
        if s["pass"] in record_at:
            recorded[str(s["pass"])] = figures(Kc, s, e_min)

    t0 = time.perf_counter()
    failed = None
    try:
        state, _ = run_passes(dense, state, passes, default_block_size(dense.n_rows), PassHooks(on_pass=on_pass))
    except Diverged as exc:
        failed = f"Diverged: {exc}"
    seconds = time.perf_counter() - t0
    last = recorded.get(str(passes))
    if failed is None and (last is None or not all(math.isfinite(v) for v in last.values())):
        failed = "non-finite figure"
    used = {k: params[k] for k in ("eta0", "mu", "xi") if k in params}
    out = {"seed": seed, "figures": recorded, "params_used": used, "failed": failed, "seconds": seconds}
    if failed is None:
        out["gains_final"] = {k: float(state[k]) for k in ("eta0", "mu") if k in state}
        out["gain_reductions"] = int(state.get("gain_reductions", 0))
    return out


def run_seeds(case_data: dict, solver: str, passes: int, record_at: tuple[int, ...], seeds: tuple[int, ...],
              init: str, **gains) -> dict:
    """`run_one` for each of ``seeds``; the figures are the median over the seeds (one seed: its own),
    and the point has failed if any seed failed. ``per_seed`` keeps each run's last-pass figures."""
    runs = [run_one(case_data, solver, passes, record_at, seed, init, **gains) for seed in seeds]
    failures = [r for r in runs if r["failed"]]
    failed = None
    if failures:
        failed = failures[0]["failed"]
        if len(runs) > 1:
            failed = f"{len(failures)} of {len(runs)} seeds failed: {failed}"
    out = {"params_used": runs[0]["params_used"], "seconds": sum(r["seconds"] for r in runs), "failed": failed}
    ok = [r for r in runs if not r["failed"]]
    out["figures"] = {p: {f: float(np.median([r["figures"][p][f] for r in ok])) for f in ("served", "iterate")}
                      for p in ok[0]["figures"] if all(p in r["figures"] for r in ok)} if ok else {}
    if len(runs) > 1:
        out["per_seed"] = [{"seed": r["seed"], "failed": r["failed"], "last": r["figures"].get(str(passes))}
                           for r in runs]
    if not failures:
        out["gains_final"] = runs[0]["gains_final"] if len(runs) == 1 else [r["gains_final"] for r in runs]
        out["gain_reductions"] = max(r["gain_reductions"] for r in runs)
    return out


def grid_points(solver: str, resolved: dict) -> list[dict]:
    """The 3 x 3 grid of gains around the resolved defaults (module docstring)."""
    d = resolved["eta0"]
    if solver == "kha-smd":
        m = resolved["mu"]
        return [{"eta0": d * a, "mu": m * b} for a in (0.1, 1.0, 10.0) for b in (0.1, 1.0, 10.0)]
    return [{"eta0": float(d * f)} for f in 30.0 ** np.linspace(-1.0, 1.0, 9)]


def final(run: dict, passes: int, figure: str) -> float | None:
    """A run's figure at the last pass, None if it failed."""
    return None if run["failed"] else run["figures"][str(passes)][figure]


def solver_result(case_data: dict, solver: str, passes: int, record_at: tuple[int, ...],
                  seeds: tuple[int, ...], init: str) -> dict:
    context = FitContext(n_rows=case_data["Kc"].shape[0], n_components=case_data["r"],
                         mean_diagonal=case_data["mean_diagonal"])
    resolved = SOLVERS[solver].resolved({"seed": seeds[0], "init": init}, context)
    default = run_seeds(case_data, solver, passes, record_at, seeds, init)
    grid = []
    for gains in grid_points(solver, resolved):
        point = run_seeds(case_data, solver, passes, record_at, seeds, init, **gains)
        grid.append({"gains": gains, **{k: point[k] for k in ("figures", "failed", "gain_reductions", "per_seed")
                                        if k in point}})
    out = {"default": default, "grid": grid, "best": {}, "ratio": {}}
    for figure in ("served", "iterate"):
        ok = [(final(p, passes, figure), i) for i, p in enumerate(grid) if not p["failed"]]
        if not ok:
            out["best"][figure] = None
            out["ratio"][figure] = None
            continue
        value, i = min(ok)
        out["best"][figure] = {"index": i, "gains": grid[i]["gains"], "figures": grid[i]["figures"][str(passes)]}
        mine = final(default, passes, figure)
        out["ratio"][figure] = None if mine is None else (mine + FLOOR) / (value + FLOOR)
    return out


def run_case(case: Case, passes: int, record_at: tuple[int, ...], seeds: tuple[int, ...] = (SEED,),
             init: str = "auto") -> dict:
    t0 = time.perf_counter()
    data = build(case)
    l, n = data["X_shape"]
    result = {
        "data": DATA[case.data][1], "scale": case.scale, "l": int(l), "n": int(n), "kernel": data["spec"].to_dict(),
        "width": case.width if case.kernel in ("gaussian", "laplacian") else None,
        "r_rule": case.r, "r": data["r"], "gap": {"k": data["gap_k"], "ratio": data["gap_ratio"]},
        "e_min": data["e_min"], "lambda_1": float(data["eigenvalues"][0]),
        "trace": float(np.trace(data["Kc"])), "frobenius": data["norm"],
        "top_eigenvalues": [float(v) for v in data["eigenvalues"][: GAP_SEARCH + PAST_GAP + 3]],
        "negligible_e_min": data["negligible"], "solvers": {},
    }
    for solver in SOLVER_NAMES:
        result["solvers"][solver] = solver_result(data, solver, passes, record_at, seeds, init)
    result["seconds"] = time.perf_counter() - t0
    return result


def _ratio(result: dict, solver: str, figure: str) -> float:
    """A case's default/best ratio, inf where the default failed."""
    ratio = result["solvers"][solver]["ratio"][figure]
    return math.inf if ratio is None else ratio


def summarise(results: dict, passes: int) -> dict:
    """Worst ratios, goal counts and negligible cases (module docstring)."""
    negligible = [name for name, res in results.items() if res["negligible_e_min"]]
    counted = [name for name in results if name not in negligible]
    summary = {"passes": passes, "negligible_e_min": negligible, "cases_counted": len(counted),
               "within": WITHIN, "served_target": SERVED_TARGET, "solvers": {}}
    for solver in SOLVER_NAMES:
        s = {"worst_ratio": {}, "worst_finite_ratio": {}, "within_count": {}, "default_failed": [],
             "served_at_target": 0, "served_above_target": []}
        for figure in ("served", "iterate"):
            ranked = [(_ratio(results[name], solver, figure), name) for name in counted]
            ratio, name = max(ranked) if ranked else (math.nan, None)
            s["worst_ratio"][figure] = {"ratio": ratio if math.isfinite(ratio) else None, "case": name,
                                        "failed": math.isinf(ratio)}
            finite = [(r, n) for r, n in ranked if math.isfinite(r)]
            ratio, name = max(finite) if finite else (None, None)
            s["worst_finite_ratio"][figure] = {"ratio": ratio, "case": name}
            s["within_count"][figure] = sum(r <= WITHIN for r, _ in ranked)
        s["within_count"]["both"] = sum(
            all(_ratio(results[n], solver, f) <= WITHIN for f in ("served", "iterate")) for n in counted)
        for name in counted:
            default = results[name]["solvers"][solver]["default"]
            if default["failed"]:
                s["default_failed"].append(name)
                continue
            served = final(default, passes, "served")
            if served <= SERVED_TARGET:
                s["served_at_target"] += 1
            else:
                s["served_above_target"].append(name)
        s["goals_met"] = s["within_count"]["both"] == len(counted) and s["served_at_target"] == len(counted)
        summary["solvers"][solver] = s
    return summary


def plot(results: dict, passes: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    y = np.arange(len(names))[::-1]
    low, high = 1e-8, 1e2  # figures outside are drawn at the edge (triangles), so that E_min ~ 0 cases fit
    fig, axes = plt.subplots(1, len(SOLVER_NAMES), figsize=(7.0 * len(SOLVER_NAMES), 0.32 * len(names) + 1.8),
                             sharey=True)
    for ax, solver in zip(np.atleast_1d(axes), SOLVER_NAMES):
        marks = (("default served", "default", "served", dict(marker="o", color="C0")),
                 ("default iterate", "default", "iterate", dict(marker="o", mfc="none", color="C1")),
                 ("grid best served", "best", "served", dict(marker="x", color="C2")),
                 ("grid best iterate", "best", "iterate", dict(marker="+", color="C3")))
        for label, which, figure, style in marks:
            xs = []
            for name in names:
                res = results[name]["solvers"][solver]
                if which == "default":
                    value = final(res["default"], passes, figure)
                else:
                    value = None if res["best"][figure] is None else res["best"][figure]["figures"][figure]
                xs.append(np.nan if value is None else value)
            xs = np.array(xs)
            inside = ~(xs < low) & ~(xs > high)
            ax.plot(xs[inside], y[inside], linestyle="none", ms=6, label=label, **style)
            for edge, side in ((low, xs < low), (high, xs > high)):
                ax.plot(np.full(side.sum(), edge), y[side], linestyle="none", ms=6, color=style["color"],
                        marker="<" if edge == low else ">", mfc=style.get("mfc"))
        failed = [i for i, n in enumerate(names) if results[n]["solvers"][solver]["default"]["failed"]]
        for i in failed:
            ax.annotate("default failed", (0.95, y[i]), xycoords=("axes fraction", "data"), ha="right",
                        va="center", color="red", fontsize=7)
        ax.axvline(SERVED_TARGET, color="k", linestyle="--", linewidth=0.8, label=f"{SERVED_TARGET:g}")
        ax.set_xscale("log")
        ax.set_xlim(low / 2, high * 2)
        ax.set_title(f"{solver}: excess error after {passes} passes, defaults vs best of the gain grid")
        ax.set_xlabel(f"excess reconstruction error E(A)/E_min - 1 (triangles: beyond {low:g} or {high:g})")
        ax.grid(True, which="both", axis="x", alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
    labels = [f"{n} (r={results[n]['r']}){'  [E_min ~ 0]' if results[n]['negligible_e_min'] else ''}"
              for n in names]
    ax0 = np.atleast_1d(axes)[0]
    ax0.set_yticks(y)
    ax0.set_yticklabels(labels, fontsize=7)
    for tick, n in zip(ax0.get_yticklabels(), names):
        if results[n]["negligible_e_min"]:
            tick.set_color("grey")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def table(results: dict, passes: int) -> str:
    """One line per case: r, E_min and the default's and grid best's figures at the last pass."""

    def fmt(v):
        return "failed" if v is None else f"{v:.2e}"

    head = (f"{'case':32s} {'r':>3s} {'E_min':>9s} | {'smd srv':>9s} {'smd itr':>9s} {'best srv':>9s} "
            f"{'ratio':>6s} | {'et srv':>9s} {'et itr':>9s} {'best srv':>9s} {'ratio':>6s}")
    lines = [head, "-" * len(head)]
    for name, res in results.items():
        cells = []
        for solver in SOLVER_NAMES:
            s = res["solvers"][solver]
            best = s["best"]["served"]
            ratio = s["ratio"]["served"]
            cells.append(f"{fmt(final(s['default'], passes, 'served')):>9s} "
                         f"{fmt(final(s['default'], passes, 'iterate')):>9s} "
                         f"{fmt(None if best is None else best['figures']['served']):>9s} "
                         f"{'-' if ratio is None else f'{ratio:.2f}':>6s}")
        flag = "*" if res["negligible_e_min"] else " "
        lines.append(f"{name:31s}{flag} {res['r']:3d} {res['e_min']:9.2e} | {cells[0]} | {cells[1]}")
    lines.append("* E_min negligible (left out of the goals)")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="all", help="comma-separated case names, or all")
    ap.add_argument("--passes", type=int, default=20)
    ap.add_argument("--quick", action="store_true",
                    help=f"{len(QUICK_CASES)} small cases, {QUICK_PASSES} passes; writes robustness_quick")
    ap.add_argument("--seeds", type=int, default=1,
                    help="fit seeds 0..N-1 per run, figures their median (N > 1 writes robustness_seedsN)")
    ap.add_argument("--list", action="store_true", help="print the case names and exit")
    ap.add_argument("--init", choices=("auto", "random"), default="auto",
                    help="the start of every run: the default (auto: warm where affordable) or the paper's random "
                         "start (writes robustness_random)")
    args = ap.parse_args()
    by_name = {c.name: c for c in CASES}
    if args.list:
        print("\n".join(by_name))
        return
    names = args.cases.split(",") if args.cases != "all" else QUICK_CASES if args.quick else list(by_name)
    passes, name = (QUICK_PASSES, "robustness_quick") if args.quick else (args.passes, "robustness")
    if unknown := [n for n in names if n not in by_name]:
        ap.error(f"unknown case(s) {', '.join(unknown)}; --list shows them")
    if args.seeds < 1 or passes < 1:
        ap.error("--seeds, --passes: at least 1")
    chosen = [by_name[n] for n in names]
    seeds = tuple(range(SEED, SEED + args.seeds))
    if args.seeds > 1:
        name = f"{name}_seeds{args.seeds}"
    if args.init != "auto":
        name = f"{name}_{args.init}"
    record_at = tuple(sorted({p for p in RECORD_AT if p < passes} | {passes}))
    t0 = time.perf_counter()
    results = {}
    for case in chosen:
        results[case.name] = run_case(case, passes, record_at, seeds, args.init)
        print(f"{case.name}: r={results[case.name]['r']} {results[case.name]['seconds']:.1f} s", file=sys.stderr)
    summary = summarise(results, passes)
    seconds = time.perf_counter() - t0
    doc = {
        "passes": passes, "record_at": list(record_at), "solvers": list(SOLVER_NAMES), "seeds": list(seeds),
        "init": args.init, "ratio_floor": FLOOR,
        "grids": {"kha-smd": "eta0 in {d/10, d, 10d} x mu in {m/10, m, 10m}, d and m the resolved defaults",
                  "kha-et": "eta0 at 9 points log-spaced over [d/30, 30d]"},
        "negligible_rule": f"E_min < {NEGLIGIBLE:g} * ||K'||_F",
        "seconds_total": seconds, "summary": summary, "cases": results,
    }
    plot(results, passes, output_path(f"{name}.png"))
    save(name, doc)
    print(table(results, passes))
    print(f"total {seconds:.0f} s ({len(chosen)} cases, {passes} passes, {len(seeds)} seed(s))")


if __name__ == "__main__":
    main()
