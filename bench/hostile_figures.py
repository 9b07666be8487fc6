"""The figures behind docs/choosing-a-solver.md's "What made the difference" (issue 51), measured here.

* ``spreads``: `kpca.sampled_kernel.kernel_spread` (max |K| over K''s mean diagonal, on 512 sampled rows),
  which `kernel_precision: auto` compares with 100, on digits at sigma 3, at widths 30 and 1000 times the
  median distance, and for a linear kernel on digits moved 1e4 from the origin;
* ``partial_fit``: the default fit on 3000 digits, then `partial_fit` of 1000 more: the passes it took, its
  excess error (seed 000 eq. 22) and eigenvalue error against the dense spectrum of the 4000 rows, and its
  seconds against a fresh default fit of the 4000;
* ``rskpca``: rskpca's default on 3000 digits at r 16 (its centres, ``params_used.variance_ratio``, excess
  error), rskpca capped at a tenth of the rows (what the default kept before issue 51), and `nystrom` with
  as many landmarks as the default's centres.

Scored by `bench._adversarial` (the reference the adversarial suite uses). Prints JSON and writes
``bench/results/hostile_figures.json``. About 15 seconds on 2 cores.

Usage: python bench/hostile_figures.py
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402

from bench._adversarial import Case, digits, median_distance, reference, score  # noqa: E402
from bench._common import save  # noqa: E402

SIGMA = 3.0


def spreads() -> dict:
    """``kernel_spread`` of four data/kernel pairs: two inside the float32 rule's 100, two far outside."""
    from kpca.kernels import KernelSpec
    from kpca.rows import KernelRows
    from kpca.sampled_kernel import kernel_spread

    X = digits(2000)
    median = median_distance(X)
    pairs = {"digits, sigma 3": (X, KernelSpec("gaussian", sigma=SIGMA)),
             "digits, width 30x the median distance": (X, KernelSpec("gaussian", sigma=30 * median)),
             "digits, width 1000x the median distance": (X, KernelSpec("gaussian", sigma=1000 * median)),
             "digits 1e4 from the origin, linear kernel": (X + 1e4, KernelSpec("linear"))}
    return {name: float(kernel_spread(KernelRows(data, spec))) for name, (data, spec) in pairs.items()}


def served(model, X, kernel: dict, r: int) -> dict:
    """Excess error (eq. 22) and eigenvalue error of what ``model`` serves for the rows X."""
    Kc, lam = reference(Case("x", X, kernel, r, ""), model.kernel_.get("sigma"))
    return score(Kc, lam, model.transform(X), model.eigenvalues_, r)


def partial_fit() -> dict:
    """partial_fit of 1000 rows after a default fit on 3000, against a fresh default fit of all 4000."""
    from kpca.estimator import KernelHebbianPCA

    r, X = 8, digits(4000, seed=3)
    kernel = {"kernel": "gaussian", "sigma": SIGMA}
    model = KernelHebbianPCA(r, sigma=SIGMA).fit(X[:3000])
    before = model.state_["pass"]
    t0 = time.perf_counter()
    model.partial_fit(X[3000:])
    appended_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    fresh = KernelHebbianPCA(r, sigma=SIGMA).fit(X)
    fresh_s = time.perf_counter() - t0
    return {"rows": [3000, 1000], "r": r,
            "appended": {"passes": int(model.state_["pass"] - before), "seconds": appended_s,
                         **served(model, X, kernel, r)},
            "fresh": {"passes": int(fresh.state_["pass"]), "seconds": fresh_s, **served(fresh, X, kernel, r)}}


def rskpca() -> dict:
    """rskpca's default, rskpca at a tenth of the rows, and nystrom at the default's m, on 3000 digits."""
    from kpca.estimator import KernelHebbianPCA

    r, X = 16, digits(3000)
    kernel = {"kernel": "gaussian", "sigma": SIGMA}
    out = {}
    default = KernelHebbianPCA(r, sigma=SIGMA, solver="rskpca").fit(X)
    m = int(np.asarray(default.state_["centres"]).shape[0])
    out["rskpca default"] = {"centres": m, "variance_ratio": default.params_used_.get("variance_ratio"),
                             **served(default, X, kernel, r)}
    tenth = KernelHebbianPCA(r, sigma=SIGMA, solver="rskpca", solver_params={"max_centres": 300}).fit(X)
    out["rskpca, at most a tenth of the rows"] = {
        "centres": int(np.asarray(tenth.state_["centres"]).shape[0]), **served(tenth, X, kernel, r)}
    nystrom = KernelHebbianPCA(r, sigma=SIGMA, solver="nystrom", solver_params={"landmarks": m}).fit(X)
    out[f"nystrom, {m} landmarks"] = {"centres": m, **served(nystrom, X, kernel, r)}
    return out


def main() -> None:
    warnings.simplefilter("ignore")  # the fits' warnings are not the figures
    result = {"spreads": spreads(), "partial_fit": partial_fit(), "rskpca": rskpca()}
    save("hostile_figures", result)  # prints it too


if __name__ == "__main__":
    main()
