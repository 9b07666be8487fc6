"""Seed 000 §5.4, Fig. 4: denoising a walking motion with 25 kernel PCs, excess error per pass and MSE.

The CMU walk cannot be downloaded; `paper.motion.walking_motion` synthesises an articulated walker (16
joints, 48 coordinates per frame). Gaussian noise is added to every frame, KHA/t, KHA/et and KHA-SMD find
25 components of the noisy frames, and each noisy frame is replaced by the fixed-point pre-image of its
projection (`kpca.preimage.reconstruct`), as in tests/kpca/test_motion_denoise.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import scipy.linalg

from bench._stepwise import DenseRows
from kpca.defaults import MU_SCALE
from kpca.solvers import get_solver
from kpca.estimator import KernelHebbianPCA
from kpca.kernels import KernelSpec
from kpca.metrics import minimal_error
from kpca.model import KernelModel
from kpca.noise import gaussian_noise
from kpca.preimage import reconstruct
from kpca.rows import KernelRows
from paper._common import (SOLVER_LABELS, curve, figure, final_score, fmt, local_search, ordered, plot_curves,
                           save_figure, verdict_word)
from paper._criteria import criterion
from paper.motion import walking_motion

TITLE = "Seed 000 Fig. 4: human motion denoising (a synthetic walk for CMU mocap), excess error per pass"
SEED = "000"
R, NOISE = 25, 0.03
ORDER, MSE = criterion("000_fig4_order"), criterion("000_fig4_mse")


def run(figures: Path, quick: bool = False) -> dict:
    t0 = time.perf_counter()
    frames, passes = (120, 3) if quick else (400, 30)
    clean, _ = walking_motion(frames, rng=0, in_place=True)
    noisy = gaussian_noise(clean, NOISE, np.random.default_rng(1))
    d2 = np.sum((noisy[::7, None] - noisy[None, ::7]) ** 2, axis=-1)
    sigma = float(np.sqrt(np.median(d2) / 2))
    rows = KernelRows(noisy, KernelSpec("gaussian", sigma=sigma))
    c = rows.fit_centering()
    Kc = rows.dense()
    e_min, dense, s = minimal_error(scipy.linalg.eigvalsh(Kc), R), DenseRows(Kc), c.mean_diagonal

    def go(solver, **params):
        return curve(dense, Kc, e_min, solver, R, passes, s, **params)

    params, tried = {}, {}
    for solver in ("kha-t", "kha-et"):
        eta0, tried[solver] = local_search(lambda v: final_score(go(solver, eta0=v)), get_solver(solver).gain_scale / s)
        params[solver] = {"eta0": eta0}
    eta0 = params["kha-et"]["eta0"]
    mu, tried["kha-smd"] = local_search(lambda v: final_score(go("kha-smd", eta0=eta0, mu=v, xi=0.99)), MU_SCALE / s)
    params["kha-smd"] = {"eta0": eta0, "mu": mu, "xi": 0.99}
    runs = {solver: go(solver, **p) for solver, p in params.items()}

    mse_noisy = float(np.mean((noisy - clean) ** 2))
    out, mse = {}, {}
    for solver, res in runs.items():
        model = KernelModel(rows=rows, A=res["state"]["A"].copy(), AK=res["state"]["AK"].copy())
        out[solver] = reconstruct(model, noisy, method="fixed-point")
        mse[solver] = float(np.mean((out[solver] - clean) ** 2))
    exact = KernelHebbianPCA(R, sigma=sigma, solver="exact").fit(noisy).model_
    mse["exact"] = float(np.mean((reconstruct(exact, noisy, method="fixed-point") - clean) ** 2))
    cut = {k: 1 - v / mse_noisy for k, v in mse.items()}

    fig, axes = figure(3, 4.4)
    plot_curves(axes[0], {SOLVER_LABELS[k]: v["excess_error"] for k, v in runs.items()}, f"excess error, r = {R}")
    f = frames // 2
    for ax, (name, other) in zip(axes[1:], (("noisy", noisy), ("denoised by KHA-SMD", out["kha-smd"]))):
        ax.scatter(clean[f, 0::3], clean[f, 2::3], c="k", s=18, label="original")
        ax.scatter(other[f, 0::3], other[f, 2::3], c="r", s=12, marker="x", label=name)
        ax.set_title(f"frame {f}: original and {name}")
        ax.set_xlabel("x, forward (m)")
        ax.set_ylabel("z, up (m)")
        ax.set_aspect("equal")
        ax.legend(fontsize=8)
    path = figures / "000_fig4_motion.png"
    save_figure(fig, path)

    final = {k: v["excess_error"][-1] for k, v in runs.items()}
    table = "\n".join(
        f"| {SOLVER_LABELS[k]} | {', '.join(f'{a} {b:g}' for a, b in params[k].items())} | "
        f"{', '.join(f'{a:g}: {fmt(b)}' for a, b in sorted(tried[k].items()))} | {fmt(v['excess_error'][min(9, passes - 1)])}"
        f" | {fmt(final[k])} | {mse[k]:.2e} ({100 * cut[k]:.1f} %) |" for k, v in runs.items())
    ok_order = ordered(final, ORDER["order"])
    verdict_order = "reproduced" if ok_order else "not reproduced"
    md = f"""**Claim (§5.4, Fig. 4).** A CMU walk in Cartesian coordinates, Gaussian noise added to the frames,
KHA with 25 PCs and a Gaussian kernel (sigma = sqrt(1.5)): "KHA-SMD clearly outperformed KHA/et, which in
turn was better than KHA/t. KHA-SMD managed to reduce the mean-squared error by 87.5 %".

**Criteria (paper/criteria/000_fig4_*.json, committed before the run).** (1) {ORDER.text}. (2) The 87.5 % is
**not testable here**: {MSE.not_testable}.

**Setup.** `paper.motion.walking_motion({frames}, rng=0, in_place=True)`: {frames} frames at 60 fps of a
synthetic walker (16 joints, 48 coordinates, metres; the CMU data cannot be downloaded), Gaussian noise
{NOISE} m per coordinate (seed 1), the noise level tests/kpca/test_motion_denoise.py uses (the paper does
not give its level). Kernel width by the median rule, sqrt(median squared distance / 2) = {sigma:.3f} m
(sqrt(1.5) is for the paper's units; not tuned), r = {R}, {passes} passes from the random start, blocks of
256 rows. **Gains:** the paper's local search over {{1, 2, 5}} x 10^b from the library default, scored by
the excess error after pass {passes}; KHA-SMD with KHA/et's eta0 and xi = 0.99. MSE against the clean frames
after the fixed-point pre-image of each noisy frame; noisy input MSE {mse_noisy:.2e}.

| solver | gains | tried (value: final excess error) | excess error, 10 passes | after {passes} | MSE after {passes} (reduction) |
|---|---|---|---|---|---|
{table}

Exact KPCA with the same r and pre-image: MSE {mse['exact']:.2e} ({100 * cut['exact']:.1f} % reduction).

![Fig. 4: excess error per pass; one frame, original against noisy and denoised]({path.parent.name}/{path.name})

**Verdict:** {verdict_word(verdict_order)} -- excess error KHA-SMD < KHA/et < KHA/t after {passes} passes:
{"yes" if ok_order else "no"}. Not judged: MSE reduced by {100 * cut['kha-smd']:.1f} % with KHA-SMD, the paper
{MSE["paper_cut_pct"]:g} % at its own (unstated) noise level. The
reduction depends on the noise level, the data, r and the kernel width, none of which is the paper's; the
exact eigenvectors' {100 * cut['exact']:.1f} % is where more passes lead. A less converged fit can denoise
more (KHA/t here: its components do not yet span the leading {R}, so they keep less of the noise), so the MSE
is not a measure of convergence; the excess error is.
"""
    fig_rel = f"figures/{path.name}"
    claims = [ORDER.result(verdict_order, fig_rel), MSE.result(None, fig_rel)]
    return {"markdown": md, "claims": claims, "seconds": time.perf_counter() - t0}
