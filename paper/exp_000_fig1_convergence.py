"""Seed 000 §5.1, Fig. 1: excess error per pass of KHA/t, KHA/et and KHA-SMD, dot-product and Gaussian kernels.

Data as `bench/convergence.py` (whose plot this reuses): the first 1000 of scikit-learn's digits / 16
(USPS cannot be downloaded; the paper used the first 100 per class of USPS, 1000 rows of 256 pixels),
r = 16, the paper's random start, 20 passes, blocks of 256 rows. Gains tuned as the paper did
(`paper._common.local_search`): eta0 for KHA/t and KHA/et, then mu for KHA-SMD with KHA/et's eta0 and
xi = 0.99, each scored by its excess error after the last pass.
"""

from __future__ import annotations

import time
from pathlib import Path

import scipy.linalg
from sklearn.datasets import load_digits

from bench._stepwise import DenseRows
from bench.convergence import plot
from kpca.defaults import MU_SCALE
from kpca.solvers import get_solver
from kpca.kernels import KernelSpec
from kpca.metrics import minimal_error
from kpca.rows import KernelRows
from paper._common import SOLVER_LABELS, curve, final_score, fmt, local_search, ordered
from paper._criteria import criterion

TITLE = "Seed 000 Fig. 1: excess error per pass on USPS (digits), dot-product and Gaussian kernels"
SEED = "000"
R = 16
CLAIM_IDS = {"dot-product kernel": "000_fig1_order_dot", "Gaussian kernel, sigma 3": "000_fig1_order_gaussian"}


def tuned_curves(X, spec, passes: int) -> dict:
    """Per solver: the tuned parameters, every grid value tried with its score, and the curve."""
    rows = KernelRows(X, spec)
    c = rows.fit_centering()
    Kc = rows.dense()
    e_min = minimal_error(scipy.linalg.eigvalsh(Kc), R)
    dense, s = DenseRows(Kc), c.mean_diagonal
    out = {}

    def run(solver, **params):
        return curve(dense, Kc, e_min, solver, R, passes, s, **params)

    for solver in ("kha-t", "kha-et"):
        eta0, tried = local_search(lambda v: final_score(run(solver, eta0=v)), get_solver(solver).gain_scale / s)
        out[solver] = {"params": {"eta0": eta0}, "tried": tried, **run(solver, eta0=eta0)}
    eta0 = out["kha-et"]["params"]["eta0"]
    mu, tried = local_search(lambda v: final_score(run("kha-smd", eta0=eta0, mu=v, xi=0.99)), MU_SCALE / s)
    out["kha-smd"] = {"params": {"eta0": eta0, "mu": mu, "xi": 0.99}, "tried": tried,
                      **run("kha-smd", eta0=eta0, mu=mu, xi=0.99)}
    return out


def run(figures: Path, quick: bool = False) -> dict:
    t0 = time.perf_counter()
    n, passes = (200, 3) if quick else (1000, 20)
    X = load_digits().data[:n] / 16.0
    kernels = {"dot-product kernel": KernelSpec("linear"), "Gaussian kernel, sigma 3": KernelSpec("gaussian", sigma=3.0)}
    results = {title: tuned_curves(X, spec, passes) for title, spec in kernels.items()}
    path = figures / "000_fig1_convergence.png"
    plot({t: {"solvers": {SOLVER_LABELS[k]: v for k, v in res.items()}} for t, res in results.items()}, path)

    lines, verdicts = [], []
    for title, res in results.items():
        final = {k: v["excess_error"][-1] for k, v in res.items()}
        verdicts.append(ordered(final, criterion(CLAIM_IDS[title])["order"]))
        for solver, v in res.items():
            tried = ", ".join(f"{k:g}: {fmt(x)}" for k, x in sorted(v["tried"].items()))
            lines.append(f"| {title} | {SOLVER_LABELS[solver]} | {', '.join(f'{k} {p:g}' for k, p in v['params'].items())}"
                         f" | {tried} | {v['gain_reductions']} | {fmt(v['excess_error'][min(4, passes - 1)])} | {fmt(final[solver])} |")
    verdict = "reproduced" if all(verdicts) else ("partly" if any(verdicts) else "not reproduced")
    md = f"""**Claim (§5.1, Fig. 1).** "KHA/et clearly outperforms KHA/t for both kernels, and KHA-SMD is able to
increase the convergence speed even further" -- 16 eigenvectors of the first 100 USPS digits per class, a
dot-product kernel and a Gaussian kernel with sigma = 8.

**Criteria (paper/criteria/000_fig1_order_*.json, committed before the run).** """ + " ".join(
        f"{criterion(i).text}." for i in CLAIM_IDS.values()) + f"""

**Setup.** The first {n} of scikit-learn's 8 x 8 digits divided by 16 (USPS, 16 x 16 in [-1, 1], is not
available offline); r = {R}; {passes} passes from the paper's random start (A_1 ~ N(0, (rl)^-1 I)),
blocks of 256 rows (`kpca.driver.run_passes`; the paper updates after every row). Gaussian width 3
instead of 8: the digits' pixels span 1 instead of 2 over 64 instead of 256 pixels, so distances are about
a quarter of USPS's (8 / 4 = 2; `bench/convergence.py` uses 3, kept here). **Gains:** tuned as in §5 by a
local search over {{1, 2, 5}} x 10^b, starting from the library default (`kpca.defaults`: eta0 =
gain_scale / s, mu = MU_SCALE / s with s = trace(K')/l), scored by the excess error after pass {passes}
(a run that diverged for good scores infinity; the library's divergence guard, which restarts a pass
with smaller gains, stays on, and the table counts its cuts); KHA-SMD uses KHA/et's eta0 and xi = 0.99 and
tunes mu, as the paper did. Each value tried with its final excess error:

| kernel | solver | chosen | tried (value: final excess error) | gain cuts | after 5 passes | after {passes} |
|---|---|---|---|---|---|---|
""" + "\n".join(lines) + f"""

![Fig. 1: excess error per pass]({path.parent.name}/{path.name})

**Verdict:** {verdict} -- the ordering KHA-SMD < KHA/et < KHA/t after {passes} passes holds for
{sum(verdicts)} of 2 kernels (table above). Differences from the paper's plot are expected in level, not
order: other data (8 x 8 digits), block updates instead of single-row ones.
"""
    claims = [criterion(CLAIM_IDS[t]).result("reproduced" if ok else "not reproduced", f"figures/{path.name}")
              for t, ok in zip(results, verdicts)]
    return {"markdown": md, "claims": claims, "seconds": time.perf_counter() - t0}
