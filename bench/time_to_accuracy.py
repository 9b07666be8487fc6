"""Time to an answer: how long each way of fitting takes to reach a served excess error of 1e-3 and 1e-6.

Two data sets, r = 16 components, a Gaussian kernel, at each size l (``--sizes``):

* ``digits``: the 1797 digits (pixels / 16) repeated to l rows with a jitter of 0.05 (n = 64), sigma 3
  (`bench._common.jittered_digits`, as bench/solvers.py);
* ``patches``: l random 8 x 8 patches of scikit-image's ``camera`` (n = 64, grey levels in [0, 1]),
  sigma the median distance of a sample (the service's ``"auto"``).

Methods, one after the other in this process (each fit's jitted code compiled first on 300 rows):

* ``default``: `kpca.estimator.KernelHebbianPCA` with only the kernel and ``n_components`` (ritz,
  its Nystrom start, Rayleigh-Ritz passes and tol), a point per pass (``callback``) and its end; ``default tol 1e-4``
  the same with that tol (and at most 100 passes): what a user who names an accuracy gets; ``default
  float64`` the default with float64 kernel tiles (its ``kernel_precision`` ``auto`` takes float32 where
  the tol allows: the served error it costs is what this row shows);
* ``lanczos``: the project's exact eigensolver at residual tols 1e-2, 1e-3 and 1e-4 (a point per tol:
  what a user who sets the tol gets); ``exact`` where the l x l matrix is affordable (``--exact-max``);
* ``kha-smd (paper)`` and ``kha-et (paper)``: the paper's algorithm, a random start and stochastic
  passes with the default gains, a point per pass up to ``--passes``;
* ``nystrom``, ``subsampled``, ``nystrom-weighted``, ``rskpca`` with their defaults, and ``nystrom``
  with 3000 landmarks: one point each;
* scikit-learn's ``KernelPCA`` with ``eigen_solver="arpack"`` and ``"randomized"``, where its dense
  l x l kernel matrix fits the memory budget (``--sklearn-max``).

Every point's served components are scored afterwards by seed 000 eq. 22 on the training rows: the
excess error ``E / E_min - 1`` with ``E^2 = ||K'||_F^2 - 2 tr(Z K' Z^T) + ||Z Z^T||_F^2`` for the
training projections Z (r x l, centred) and ``E_min^2 = ||K'||_F^2 - sum_i lambda_i^2`` from the
reference eigenvalues (lanczos at tol 1e-10), all from one shared pass of kernel rows; scoring is not
timed. A method's time to an accuracy is the first point that reaches it (None: never); the default's notes
keep the residual it stopped on, beside its measured excess error. Prints JSON and a table; writes bench/results/time_to_accuracy.json and .png.

    python bench/time_to_accuracy.py [--sizes 8000,20000,40000] [--datasets digits,patches] [--quick]
    python bench/time_to_accuracy.py --markdown bench/results/time_to_accuracy.json   # the README's table
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402

from bench._common import environment, excess_errors, jittered_digits, output_path, save  # noqa: E402

R = 16
TARGETS = (1e-3, 1e-6)
LANCZOS_TOLS = (1e-2, 1e-3, 1e-4)
DEFAULT_TOLS = (1e-4,)
ONE_SHOT = ("nystrom", "subsampled", "nystrom-weighted", "rskpca")
MEMORY_BUDGET = 6 * 2**30  # bytes a dense l x l method (scikit-learn, exact) may take: 2 matrices of float64


def patches(l: int, seed: int = 0) -> np.ndarray:
    """l random 8 x 8 patches (n = 64) of scikit-image's camera, grey levels in [0, 1]. O(l n)."""
    from skimage.data import camera

    image = camera().astype(np.float64) / 255.0
    rng = np.random.default_rng([seed, 8])
    i = rng.integers(0, image.shape[0] - 8, size=l)
    j = rng.integers(0, image.shape[1] - 8, size=l)
    return np.stack([image[a:a + 8, b:b + 8].ravel() for a, b in zip(i, j)])


DATASETS = {"digits": (jittered_digits, 3.0), "patches": (patches, "auto")}


class Run:
    """The timed points of one method: ``(seconds since its start, served projections Z (r, l))``."""

    def __init__(self):
        self.t0, self.points, self.paused = time.perf_counter(), [], 0.0

    def add(self, Z: np.ndarray) -> None:
        """A point now (the time spent here does not count)."""
        at = time.perf_counter()
        self.points.append((at - self.t0 - self.paused, np.array(Z, dtype=np.float64)))
        self.paused += time.perf_counter() - at


def projections(model, X: np.ndarray) -> np.ndarray:
    """The training rows' projections (r, l) a fitted estimator serves."""
    A = getattr(model.model_, "A", None)
    if A is not None and model.model_.rows.n_rows == X.shape[0]:
        return np.asarray(model.model_.AK)
    return np.concatenate([model.transform(X[a:a + 4096]) for a in range(0, X.shape[0], 4096)]).T


def fit_estimator(X, sigma, run: Run, **options):
    """Fit `KernelHebbianPCA` on X, a point per pass (``callback``) and one at the end."""
    from kpca.estimator import KernelHebbianPCA
    from kpca.solvers import ritz_components

    def on_pass(state):
        run.add(ritz_components(state["A"], state["AK"])[1])

    model = KernelHebbianPCA(R, sigma=sigma, **options).fit(X, callback=on_pass)  # one-shot solvers: no passes
    run.add(projections(model, X))
    return model


def sklearn_fit(X, sigma: float, solver: str, run: Run) -> None:
    from sklearn.decomposition import KernelPCA

    model = KernelPCA(R, kernel="rbf", gamma=0.5 / sigma**2, eigen_solver=solver, random_state=0).fit(X)
    run.add(model.eigenvectors_.T * np.sqrt(model.eigenvalues_)[:, None])


def measure(name: str, l: int, args) -> dict:
    """Every method on data set ``name`` at l rows: their points and times to the targets."""
    from kpca.estimator import KernelHebbianPCA
    from kpca.kernels import KernelSpec
    from kpca.rows import KernelRows

    make, sigma = DATASETS[name]
    X = make(l)
    if sigma == "auto":
        rows = KernelRows(X, KernelSpec("gaussian", sigma="auto"))
        sigma = float(rows.resolve_kernel().sigma)
    spec = KernelSpec("gaussian", sigma=sigma)
    small = X[:300]
    for solver in ("kha-smd", "lanczos", "nystrom"):  # compile (or load) the jitted code first
        KernelHebbianPCA(R, sigma=sigma, solver=solver, passes=1).fit(small)
    KernelHebbianPCA(R, sigma=sigma, passes=1,  # and the default's float32 tiles from a Nystrom start
                     solver_params={"init": "nystrom", "init_size": 100, "tol": 0}).fit(small)
    KernelHebbianPCA(R, sigma=sigma, passes=1, solver_params={"init": "nystrom", "init_size": 100}).fit(small)
    t0 = time.perf_counter()
    reference = KernelHebbianPCA(R, sigma=sigma, solver="lanczos", solver_params={"tol": 1e-10}).fit(X)
    reference_s = time.perf_counter() - t0
    eigenvalues = np.asarray(reference.eigenvalues_)
    runs, notes = {}, {}

    def timed(method: str, fn, *fn_args, **options):
        if args.methods and not any(method.startswith(m) for m in args.methods.split(",")):
            return None
        if args.only and method not in args.only.split(","):
            return None
        run = Run()
        try:
            result = fn(*fn_args, run, **options)
        except MemoryError as exc:
            notes[method] = f"failed: {exc}"
            return None
        runs[method] = run
        print(f"{name} l {l:6d} {method:22s} {run.points[-1][0]:8.2f} s, {len(run.points)} points", file=sys.stderr)
        return result

    default = timed("default", fit_estimator, X, sigma)
    if default is not None:
        notes["default"] = {k: v for k, v in default.params_used_.items() if np.isscalar(v)}
        notes["default"]["residual"] = default.state_.get("residual")
    timed("default float64", fit_estimator, X, sigma, solver_params={"kernel_precision": "float64"})
    for tol in DEFAULT_TOLS:  # a user who names an accuracy: the default fit with that tol, a point per pass
        timed(f"default tol {tol:g}", fit_estimator, X, sigma, solver_params={"tol": tol, "passes": 100})
    for tol in LANCZOS_TOLS:
        timed(f"lanczos tol {tol:g}", fit_estimator, X, sigma, solver="lanczos", solver_params={"tol": tol})
    for solver in ("kha-smd", "kha-et"):
        timed(f"{solver} (paper)", fit_estimator, X, sigma, solver=solver, init="random", passes=args.passes)
    for solver in ONE_SHOT:
        timed(solver, fit_estimator, X, sigma, solver=solver)
    timed("nystrom 3000", fit_estimator, X, sigma, solver="nystrom", solver_params={"landmarks": min(3000, l - 1)})
    dense_bytes = 2 * 8 * l * l
    if l <= args.exact_max and dense_bytes <= MEMORY_BUDGET:
        timed("exact", fit_estimator, X, sigma, solver="exact")
    else:
        notes["exact"] = f"not run: l x l above --exact-max {args.exact_max}"
    for solver in ("arpack", "randomized"):
        if l <= args.sklearn_max and dense_bytes <= MEMORY_BUDGET:
            timed(f"scikit-learn {solver}", sklearn_fit, X, sigma, solver)
        else:
            notes[f"scikit-learn {solver}"] = (f"not run: its dense l x l kernel matrix ({dense_bytes / 2**30:.1f} "
                                               f"GiB with its centred copy) is over the budget or --sklearn-max")
    keyed = {(method, i): Z for method, run in runs.items() for i, (_, Z) in enumerate(run.points)}
    t0 = time.perf_counter()
    scores = excess_errors(X, spec, {f"{m}#{i}": Z for (m, i), Z in keyed.items()}, eigenvalues)
    print(f"{name} l {l:6d} scoring {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    methods = {}
    for method, run in runs.items():
        curve = [(s, scores[f"{method}#{i}"]) for i, (s, _) in enumerate(run.points)]
        reached = {f"{target:g}": next((s for s, e in curve if e <= target), None) for target in TARGETS}
        methods[method] = {"curve": curve, "time_to": reached, "final_excess_error": curve[-1][1],
                           "seconds": curve[-1][0]}
    return {"n_features": X.shape[1], "sigma": sigma, "reference": "lanczos, tol 1e-10",
            "reference_s": reference_s, "eigenvalues": eigenvalues.tolist(), "methods": methods, "notes": notes}


def markdown(result: dict) -> str:
    """The README's table: seconds to each target per method, data set and size (the first point that
    reaches it: an iterative fit may run on to confirm it), and the whole fit's seconds."""
    lines = ["| data | l | method | to 1e-3 (s) | to 1e-6 (s) | whole fit (s) | final excess error |",
             "|---|---|---|---|---|---|---|"]
    for name, sizes in result["datasets"].items():
        for l, entry in sizes.items():
            for method, m in entry["methods"].items():
                cells = [f"{m['time_to'][f'{t:g}']:.1f}" if m["time_to"][f"{t:g}"] is not None else "not reached"
                         for t in TARGETS]
                lines.append(f"| {name} | {int(l):,} | {method} | {cells[0]} | {cells[1]} | {m['seconds']:.1f} | "
                             f"{m['final_excess_error']:.1e} |")
            for method, note in entry["notes"].items():
                if isinstance(note, str):
                    lines.append(f"| {name} | {int(l):,} | {method} | {note} | | | |")
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(name, l, entry) for name, sizes in result["datasets"].items() for l, entry in sizes.items()]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    for ax, (name, l, entry) in zip(axes[0], panels):
        for method, m in entry["methods"].items():
            s, e = zip(*m["curve"])
            ax.plot(s, np.maximum(e, 1e-16), marker="o", ms=3, label=method)
        for target in TARGETS:
            ax.axhline(target, color="grey", lw=0.5, ls=":")
        ax.set(xscale="log", yscale="log", title=f"{name}, l = {int(l):,}", xlabel="seconds",
               ylabel="served excess error (eq. 22)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8000,20000,40000")
    ap.add_argument("--datasets", default="digits,patches")
    ap.add_argument("--passes", type=int, default=10, help="passes of the paper's KHA runs")
    ap.add_argument("--exact-max", type=int, default=8000, help="largest l the exact solver is run on")
    ap.add_argument("--sklearn-max", type=int, default=20000, help="largest l scikit-learn is run on")
    ap.add_argument("--methods", default="", help="only the methods whose names start with one of these "
                                                  "(comma-separated; default: all)")
    ap.add_argument("--only", default="", help="only the methods of exactly these names (comma-separated)")
    ap.add_argument("--quick", action="store_true", help="l 2000 and 4000, digits, 3 passes")
    ap.add_argument("--markdown", metavar="JSON", help="print the table of a saved result, and stop")
    ap.add_argument("--merge", action="store_true", help="add these sizes to the saved result (each size's "
                                                         "entry from one run, with its own environment)")
    args = ap.parse_args()
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())))
        return
    if args.quick:
        args.sizes, args.datasets, args.passes = "2000,4000", "digits", 3
    sizes, names = [int(s) for s in args.sizes.split(",")], args.datasets.split(",")
    result = {"r": R, "targets": list(TARGETS), "passes": args.passes,
              "datasets": {name: {str(l): measure(name, l, args) for l in sizes} for name in names}}
    name = "time_to_accuracy_quick" if args.quick else "time_to_accuracy"
    if args.merge and output_path(f"{name}.json").exists():
        saved = json.loads(output_path(f"{name}.json").read_text())
        for entries in result["datasets"].values():
            for entry in entries.values():
                entry["environment"] = environment()
        earlier = saved.pop("environment", None)
        for entries in saved["datasets"].values():
            for entry in entries.values():
                entry.setdefault("environment", earlier)
        for data, entries in result["datasets"].items():
            saved["datasets"].setdefault(data, {}).update(entries)
        result = saved
    save(name, result)
    plot(result, output_path(f"{name}.png"))
    print(markdown(result))


if __name__ == "__main__":
    main()
