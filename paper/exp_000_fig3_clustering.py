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

from bench._stepwise import DenseRows
from kpca.affinity import AffinityRows
from kpca.clustering import clustering_from_state, prepare_clustering
from kpca.defaults import MU_SCALE
from kpca.solvers import get_solver
from kpca.driver import PassHooks, run_passes
from kpca.kernels import KernelSpec
from kpca.metrics import excess_error, minimal_error, variation_of_information
from paper._common import (SOLVER_LABELS, figure, fmt, graded, local_search, ordered, overall, plot_curves,
                           save_figure, verdict_word)
from paper._criteria import criterion

TITLE = "Seed 000 Fig. 3: spectral clustering of the digits, excess error and VI per pass"
SEED = "000"
K, SIGMA, BLOCK = 10, 3.0, 256
ORDER, VI_ET_SMD, VI_T = (criterion(i) for i in ("000_fig3_order", "000_fig3_vi_et_smd", "000_fig3_vi_t"))


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
    t_passes = passes if quick else max(passes, VI_T["run_passes"])  # KHA/t runs on past the claim's 30 passes
    runs = {solver: run_solver(rows, L, e_min, solver, t_passes if solver == "kha-t" else passes, params[solver],
                               truth, n_init) for solver in params}
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

    def first_match(vi, margin):  # first pass whose VI is within ``margin`` nats of the exact eigenvectors'
        return next((i + 1 for i, v in enumerate(vi) if v <= vi_exact + margin), None)

    def at(values, p):  # the value after pass p, or after the last pass of a shorter run
        return values[min(p, len(values)) - 1]

    reach = {k: first_match(v["vi"], VI_ET_SMD["margin_nats"]) for k, v in runs.items()}
    reach_t = first_match(runs["kha-t"]["vi"], VI_T["margin_nats"])
    early, late = min(ORDER["early_pass"], passes), min(ORDER["late_pass"], passes)
    tenth = {k: at(v["excess_error"], early) for k, v in runs.items()}
    final = {k: at(v["excess_error"], late) for k, v in runs.items()}
    table = "\n".join(
        f"| {SOLVER_LABELS[k]} | {', '.join(f'{a} {b:g}' for a, b in params[k].items())} | "
        f"{', '.join(f'{a:g}: {fmt(b)}' for a, b in sorted(tried[k].items()))} | {fmt(tenth[k])} | {fmt(final[k])} | "
        f"{at(runs[k]['vi'], early):.3f} | {runs[k]['vi'][-1]:.3f} ({len(runs[k]['vi'])}) | {reach[k] or 'never'} |"
        for k in runs)
    ok_order = ordered(final, ORDER["order"]) and ordered(tenth, ORDER["order"])
    in_time = [reach[k] is not None and reach[k] <= VI_ET_SMD["by_pass"] for k in VI_ET_SMD["solvers"]]
    verdict_t = ("not reproduced" if reach_t is not None and reach_t <= VI_T["after_pass"]
                 else "partly" if reach_t is None else "reproduced")
    verdicts = {"order": "reproduced" if ok_order else "not reproduced", "et_smd": graded(sum(in_time), len(in_time)),
                "t": verdict_t}
    early_note = ("" if verdict_t != "not reproduced" else
                  f"At pass {reach_t} KHA/t's excess error is {fmt(at(runs['kha-t']['excess_error'], reach_t or 1))} "
                  "and its clustering already matches the exact eigenvectors': on these data (the digits with sigma "
                  f"{SIGMA:g}: a fifth of USPS's rows, other clusters) the clustering stops depending on the "
                  "eigenvectors' accuracy before they converge; why USPS is more sensitive is not known.")
    md = f"""**Claim (§5.3, Fig. 3).** Spectral clustering (Ng, Jordan and Weiss) of all 7291 USPS digits with 10
kernel PCs by KHA, Gaussian sigma 8, scored by the variation of information (VI) against the classes ("a VI
of 4.54 corresponds to random performance", 0 to perfect agreement): "KHA-SMD dominates KHA/et in both
convergence speed and quality of reconstruction; KHA/et in turn outperforms KHA/t. [...] KHA/et and KHA-SMD
produce a clustering as good as that obtained from a (computationally expensive) full kernel PCA within 10
passes through the data; KHA/t after more than 30 passes." The paper gives no VI value for the full KPCA.

**Criteria (paper/criteria/000_fig3_*.json, committed before the run).** (1) {ORDER.text}. (2) {VI_ET_SMD.text}.
(3) {VI_T.text}.

**Setup.** All {n} of scikit-learn's digits / 16 (USPS is not available offline; the whole set is used, not
scaled down), their 10 classes as reference. Gaussian affinity sigma {SIGMA:g}, set a priori as in Fig. 1
(not tuned on the labels); NJW's L = D^-1/2 A D^-1/2 with A_ii = 0, uncentred (the solvers fit L + c I,
the same eigenvectors), 10 leading eigenvectors from the random start,
blocks of {BLOCK} rows, {passes} passes (KHA/t {t_passes}, for (3)); after each pass the served (Rayleigh-Ritz) eigenvectors, rows
normalised, k-means with {n_init} restarts (seed 0). Excess error (eq. 22) of the rank-10 reconstruction of
L + c I.
**Gains:** the paper's local search over {{1, 2, 5}} x 10^b from the library default, scored by the excess
error after pass {tune_passes} (the claim is about the first 10 passes); KHA-SMD uses KHA/et's eta0, xi = 0.99.

| solver | gains | tried (value: excess error after {tune_passes}) | excess error, {early} passes | after {late} | VI, {early} passes | VI after the last pass (passes) | first pass within {VI_ET_SMD["margin_nats"]:g} nats of exact |
|---|---|---|---|---|---|---|---|
{table}

VI of the exact eigenvectors (solver `exact`): **{vi_exact:.3f}** nats; a uniformly random labelling:
{vi_random:.2f} (the paper's 4.54 on USPS is the same quantity, about H(classes) + H(clusters)).

![Fig. 3: excess error and VI per pass]({path.parent.name}/{path.name})

**Verdict:** {verdict_word(overall(verdicts.values()))} -- (1) {verdict_word(verdicts["order"])}: excess error
ordered KHA-SMD < KHA/et < KHA/t after {early} and {late} passes: {"yes" if ok_order else "no"}; (2)
{verdict_word(verdicts["et_smd"])}: KHA/et and KHA-SMD first within {VI_ET_SMD["margin_nats"]:g} nats of the exact clustering at
passes {reach['kha-et'] or 'never'} and {reach['kha-smd'] or 'never'}; (3) {verdict_word(verdict_t)}: KHA/t first within
{VI_T["margin_nats"]:g} nats at pass {reach_t or f'none of {t_passes}'} (the paper: after more than {VI_T["after_pass"]}). {early_note}
VI is a step function of the clustering and k-means adds its own noise, so small VI
differences (a few hundredths) between passes are not meaningful.
"""
    fig_rel = f"figures/{path.name}"
    claims = [c.result(verdicts[key], fig_rel) for key, c in (("order", ORDER), ("et_smd", VI_ET_SMD), ("t", VI_T))]
    return {"markdown": md, "claims": claims, "seconds": time.perf_counter() - t0}
