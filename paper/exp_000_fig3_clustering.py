"""Seed 000 §5.3, Fig. 3: spectral clustering of all digits, excess error and VI per pass against exact KPCA.

NJW spectral clustering (`kpca.clustering`) of all 1797 of scikit-learn's digits / 16 into 10 clusters:
the 10 leading eigenvectors of NJW's L = D^-1/2 A D^-1/2 (A the Gaussian K with A_ii = 0; the solvers fit
its positive semi-definite shift L + c I, `kpca.affinity`) by KHA/t, KHA/et and KHA-SMD from the
random start (`prepare_clustering`, `kpca.driver.run_passes` with a per-pass hook), k-means on their
normalised rows (`clustering_from_state`) after every pass, scored by the variation of information
against the digit labels (`kpca.metrics.variation_of_information`); exact eigenvectors for comparison.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import scipy.linalg
from sklearn.datasets import load_digits

from kpca.affinity import AffinityRows
from kpca.clustering import clustering_from_state, prepare_clustering
from kpca.defaults import MU_SCALE
from kpca.solvers import get_solver
from kpca.driver import PassHooks, run_passes
from kpca.kernels import KernelSpec
from kpca.metrics import excess_error, minimal_error, variation_of_information
from kpca.rows import DenseRows
from paper._common import SOLVER_LABELS, figure, fmt, local_search, plot_curves, save_figure

TITLE = "Seed 000 Fig. 3: spectral clustering of the digits, excess error and VI per pass"
SEED = "000"
K, SIGMA, BLOCK = 10, 3.0, 256


def run_solver(rows, L, e_min, solver, passes, params, truth=None, n_init=10) -> dict:
    """Excess error (of L's rank-K reconstruction, eq. 22) and, with ``truth``, VI after every pass."""
    state = prepare_clustering(rows, K, solver, {"init": "random", "seed": 0, **params}).state
    errors, vi = [], []

    def on_pass(s):
        errors.append(excess_error(L, s["AK"], e_min))
        if truth is not None:
            vi.append(variation_of_information(clustering_from_state(s, rows, 0, n_init).labels, truth))

    run_passes(DenseRows(L), state, passes, BLOCK, PassHooks(on_pass=on_pass))
    return {"excess_error": errors, "vi": vi}


def run(figures: Path, quick: bool = False) -> dict:
    t0 = time.perf_counter()
    n, passes, tune_passes, n_init = (300, 3, 2, 2) if quick else (1797, 30, 10, 10)
    digits = load_digits()
    X, truth = digits.data[:n] / 16.0, digits.target[:n]
    rows = AffinityRows(X, KernelSpec("gaussian", sigma=SIGMA))
    rows.fit_centering()
    L = rows.dense()
    e_min = minimal_error(scipy.linalg.eigvalsh(L), K)
    s = rows.centering.mean_diagonal

    def score(solver, **params):
        last = run_solver(rows, L, e_min, solver, tune_passes, params)["excess_error"][-1]
        return last if np.isfinite(last) else float("inf")

    params, tried = {}, {}
    for solver in ("kha-t", "kha-et"):
        eta0, tried[solver] = local_search(lambda v: score(solver, eta0=v), get_solver(solver).gain_scale / s)
        params[solver] = {"eta0": eta0}
    eta0 = params["kha-et"]["eta0"]
    mu, tried["kha-smd"] = local_search(lambda v: score("kha-smd", eta0=eta0, mu=v, xi=0.99), MU_SCALE / s)
    params["kha-smd"] = {"eta0": eta0, "mu": mu, "xi": 0.99}
    runs = {solver: run_solver(rows, L, e_min, solver, passes, params[solver], truth, n_init) for solver in params}
    exact_state, _ = prepare_clustering(rows, K, "exact").run(rows)
    vi_exact = variation_of_information(clustering_from_state(exact_state, rows, 0, n_init).labels, truth)
    rng = np.random.default_rng(0)
    vi_random = float(np.mean([variation_of_information(rng.integers(0, K, n), truth) for _ in range(20)]))

    fig, axes = figure(2)
    plot_curves(axes[0], {SOLVER_LABELS[k]: v["excess_error"] for k, v in runs.items()}, "excess error of L, r = 10")
    plot_curves(axes[1], {**{SOLVER_LABELS[k]: v["vi"] for k, v in runs.items()}, "exact eigenvectors": vi_exact},
                "variation of information to the labels (nats)", ylabel="VI", log=False)
    path = figures / "000_fig3_clustering.png"
    save_figure(fig, path)

    def first_match(vi):  # first pass whose VI is within 0.05 nats of the exact eigenvectors'
        return next((i + 1 for i, v in enumerate(vi) if v <= vi_exact + 0.05), None)

    reach = {k: first_match(v["vi"]) for k, v in runs.items()}
    final = {k: v["excess_error"][-1] for k, v in runs.items()}
    tenth = {k: v["excess_error"][min(9, passes - 1)] for k, v in runs.items()}
    table = "\n".join(
        f"| {SOLVER_LABELS[k]} | {', '.join(f'{a} {b:g}' for a, b in params[k].items())} | "
        f"{', '.join(f'{a:g}: {fmt(b)}' for a, b in sorted(tried[k].items()))} | {fmt(tenth[k])} | {fmt(final[k])} | "
        f"{runs[k]['vi'][min(9, passes - 1)]:.3f} | {runs[k]['vi'][-1]:.3f} | {reach[k] or 'never'} |" for k in runs)
    ok_order = final["kha-smd"] < final["kha-et"] < final["kha-t"] and tenth["kha-smd"] < tenth["kha-et"] < tenth["kha-t"]
    ok_10 = all(reach[k] is not None and reach[k] <= 10 for k in ("kha-et", "kha-smd"))
    ok_t = reach["kha-t"] is None or reach["kha-t"] > reach["kha-et"]
    md = f"""**Claim (§5.3, Fig. 3).** Spectral clustering (Ng, Jordan and Weiss) of all 7291 USPS digits with 10
kernel PCs by KHA, Gaussian sigma 8, scored by the variation of information (VI) against the classes ("a VI
of 4.54 corresponds to random performance", 0 to perfect agreement): "KHA-SMD dominates KHA/et in both
convergence speed and quality of reconstruction; KHA/et in turn outperforms KHA/t. [...] KHA/et and KHA-SMD
produce a clustering as good as that obtained from a (computationally expensive) full kernel PCA within 10
passes through the data; KHA/t after more than 30 passes." The paper gives no VI value for the full KPCA.

**Criteria (fixed before the run).** (1) Excess error ordered KHA-SMD < KHA/et < KHA/t after 10 and after
{passes} passes: reproduced, else not. (2) KHA/et and KHA-SMD within 0.05 nats of the exact eigenvectors'
VI by pass 10, and KHA/t first within 0.05 nats later than KHA/et: reproduced if both, partly if one, not
reproduced if none.

**Setup.** All {n} of scikit-learn's digits / 16 (USPS is not available offline; the whole set is used, not
scaled down), their 10 classes as reference. Gaussian affinity sigma {SIGMA:g}, set a priori as in Fig. 1
(not tuned on the labels); NJW's L = D^-1/2 A D^-1/2 with A_ii = 0, uncentred (the solvers fit L + c I,
the same eigenvectors), 10 leading eigenvectors from the random start,
blocks of {BLOCK} rows, {passes} passes; after each pass the served (Rayleigh-Ritz) eigenvectors, rows
normalised, k-means with {n_init} restarts (seed 0). Excess error (eq. 22) of the rank-10 reconstruction of
L + c I.
**Gains:** the paper's local search over {{1, 2, 5}} x 10^b from the library default, scored by the excess
error after pass {tune_passes} (the claim is about the first 10 passes); KHA-SMD uses KHA/et's eta0, xi = 0.99.

| solver | gains | tried (value: excess error after {tune_passes}) | excess error, 10 passes | after {passes} | VI, 10 passes | VI, {passes} | first pass within 0.05 of exact |
|---|---|---|---|---|---|---|---|
{table}

VI of the exact eigenvectors (solver `exact`): **{vi_exact:.3f}** nats; a uniformly random labelling:
{vi_random:.2f} (the paper's 4.54 on USPS is the same quantity, about H(classes) + H(clusters)).

![Fig. 3: excess error and VI per pass]({path.parent.name}/{path.name})

**Verdict:** {"reproduced" if ok_order and ok_10 and ok_t else ("partly reproduced" if ok_order or ok_10 else "not reproduced")}
-- excess error ordered KHA-SMD < KHA/et < KHA/t after 10 and {passes} passes: {"yes" if ok_order else "no"};
KHA/et and KHA-SMD within 0.05 nats of the exact clustering by pass 10: {"yes" if ok_10 else "no"}
(passes {reach['kha-et']} and {reach['kha-smd']}); KHA/t later than KHA/et: {"yes" if ok_t else "no"} (pass
{reach['kha-t']}). Here the clustering stops depending on the eigenvectors' accuracy early: KHA/t's,
with an excess error of {fmt(runs['kha-t']['excess_error'][1])} after 2 passes, already give the exact eigenvectors'
VI, so the third claim cannot show on these data (the digits with sigma {SIGMA:g}: a fifth of USPS's rows and
other clusters; why USPS is more sensitive is not known). VI is a step function of the clustering and k-means adds its own noise, so small VI
differences (a few hundredths) between passes are not meaningful.
"""
    fig_rel = f"figures/{path.name}"
    claims = [
        {"claim": "Again KHA-SMD dominates KHA/et in both convergence speed and quality of reconstruction (left); "
                  "KHA/et in turn outperforms KHA/t",
         "criterion": f"excess error ordered KHA-SMD < KHA/et < KHA/t after 10 and after {passes} passes: reproduced, "
                      "else not reproduced",
         "verdict": "reproduced" if ok_order else "not reproduced", "figure": fig_rel},
        {"claim": "KHA/et and KHA-SMD produce a clustering as good as that obtained from a (computationally expensive) "
                  "full kernel PCA within 10 passes through the data; KHA/t after more than 30 passes",
         "criterion": "(1) KHA/et and KHA-SMD within 0.05 nats of the exact eigenvectors' VI by pass 10; (2) KHA/t first "
                      "within 0.05 nats later than KHA/et; reproduced if both, partly if one, not reproduced if none",
         "verdict": "reproduced" if ok_10 and ok_t else ("partly" if ok_10 or ok_t else "not reproduced"),
         "figure": fig_rel},
    ]
    return {"markdown": md, "claims": claims, "seconds": time.perf_counter() - t0}
