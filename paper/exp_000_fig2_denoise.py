"""Seed 000 §5.2, Fig. 2: multipatch image PCA of a noisy image, excess error per pass and SNR.

The image, noise and patches as `bench/denoise_image.py` (`camera` reduced to 256 x 256, Gaussian noise
0.1, four 128 x 128 sub-images, 11 x 11 patches), but on a coarser patch grid to fit a 2-core machine; the
per-pass curves of KHA with the constant gain 0.05 of Kim et al., KHA/t, KHA/et and KHA-SMD (Gaussian
kernel sigma 1, r = 20) averaged over the sub-images; SNR of the reconstructions by the fixed-point
pre-image (`kpca.preimage.reconstruct`).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import scipy.linalg
from skimage import data

from bench._stepwise import DenseRows
from bench.denoise_image import PATCH, join_quadrants, linear_pca_denoise
from kpca.defaults import MU_SCALE
from kpca.solvers import get_solver
from kpca.images.patches import assemble_patches, downscale_mean, extract_patches, snr_db, split_quadrants
from kpca.kernels import KernelSpec
from kpca.metrics import minimal_error
from kpca.model import KernelModel
from kpca.noise import gaussian_noise
from kpca.preimage import reconstruct
from kpca.rows import KernelRows
from paper._common import (SOLVER_LABELS, curve, figure, final_score, fmt, local_search, ordered, plot_curves,
                           save_figure)
from paper._criteria import criterion

TITLE = "Seed 000 Fig. 2: multipatch image denoising (camera for Lena), excess error per pass and SNR"
SEED = "000"
R, NOISE, KIM_ETA0 = 20, 0.1, 0.05
ORDER, MAGNITUDES, SNR = (criterion(i) for i in ("000_fig2_order", "000_fig2_magnitudes", "000_fig2_snr"))


def quadrant_problem(part: np.ndarray, stride: int):
    P, grid = extract_patches(part, PATCH, stride)
    rows = KernelRows(P, KernelSpec("gaussian", sigma=1.0))
    c = rows.fit_centering()
    Kc = rows.dense()
    return {"P": P, "grid": grid, "rows": rows, "Kc": Kc, "dense": DenseRows(Kc), "s": c.mean_diagonal,
            "e_min": minimal_error(scipy.linalg.eigvalsh(Kc), R)}


def tune(q: dict, passes: int) -> dict:
    """The paper's local search on one sub-image: eta0 of KHA/t and KHA/et, then mu of KHA-SMD."""

    def score(solver, **params):
        return final_score(curve(q["dense"], q["Kc"], q["e_min"], solver, R, passes, q["s"], **params))

    params, tried = {"kha": {"eta0": KIM_ETA0}}, {}
    for solver in ("kha-t", "kha-et"):
        eta0, tried[solver] = local_search(lambda v: score(solver, eta0=v), get_solver(solver).gain_scale / q["s"])
        params[solver] = {"eta0": eta0}
    eta0 = params["kha-et"]["eta0"]
    mu, tried["kha-smd"] = local_search(lambda v: score("kha-smd", eta0=eta0, mu=v, xi=0.99), MU_SCALE / q["s"])
    params["kha-smd"] = {"eta0": eta0, "mu": mu, "xi": 0.99}
    return {"params": params, "tried": tried}


def denoised(q: dict, state: dict) -> np.ndarray:
    model = KernelModel(rows=q["rows"], A=state["A"].copy(), AK=state["AK"].copy())
    return assemble_patches(reconstruct(model, q["P"], method="fixed-point"), q["grid"])


def run(figures: Path, quick: bool = False) -> dict:
    t0 = time.perf_counter()
    stride, passes, long_passes = (11, 3, 6) if quick else (4, 50, 200)
    clean = downscale_mean(data.camera() / 255.0, 2)
    noisy = gaussian_noise(clean, NOISE, np.random.default_rng(0))
    quads = [quadrant_problem(part, stride) for part in split_quadrants(noisy)]
    tuning = tune(quads[0], passes)
    curves = {s: [] for s in ("kha", "kha-t", "kha-et", "kha-smd")}
    parts = {"kha-et": [], "kha-smd": [], "kha/long": [], "linear_pca": []}
    long_errors = []
    for i, q in enumerate(quads):
        for solver in curves:
            res = curve(q["dense"], q["Kc"], q["e_min"], solver, R, passes, q["s"], seed=i, **tuning["params"][solver])
            curves[solver].append(res["excess_error"])
            if solver in parts:
                parts[solver].append(denoised(q, res["state"]))
        res = curve(q["dense"], q["Kc"], q["e_min"], "kha", R, long_passes, q["s"], seed=i, eta0=KIM_ETA0)
        long_errors.append(res["excess_error"][-1])
        parts["kha/long"].append(denoised(q, res["state"]))
        parts["linear_pca"].append(assemble_patches(linear_pca_denoise(q["P"], R), q["grid"]))
    mean = {s: np.mean(np.array(v), axis=0) for s, v in curves.items()}
    images = {k: join_quadrants(v, clean.shape) for k, v in parts.items()}
    snr = {"noisy": snr_db(clean, noisy), **{k: snr_db(clean, v) for k, v in images.items()}}

    fig, axes = figure(3, 4.6)
    plot_curves(axes[0], {SOLVER_LABELS[s]: v for s, v in mean.items()}, "excess error, mean of 4 sub-images")
    for ax, (name, image) in zip(axes[1:], (("noisy", noisy), ("KHA-SMD, fixed-point pre-image", images["kha-smd"]))):
        ax.imshow(image, cmap="gray", vmin=0, vmax=1)
        ax.set_title(f"{name}: SNR {snr['noisy' if name == 'noisy' else 'kha-smd']:.2f} dB")
        ax.axis("off")
    path = figures / "000_fig2_denoise.png"
    save_figure(fig, path)

    final = {s: float(v[-1]) for s, v in mean.items()}
    rows = "\n".join(
        f"| {SOLVER_LABELS[s]} | {', '.join(f'{k} {p:g}' for k, p in tuning['params'][s].items())} | "
        + (", ".join(f"{k:g}: {fmt(x)}" for k, x in sorted(tuning["tried"][s].items())) if s in tuning["tried"]
           else "not tuned: Kim et al.'s value, as the paper") + f" | {fmt(mean[s][min(9, passes - 1)])} | {fmt(final[s])} |"
        for s in curves)
    et_gain = final["kha"] / final["kha-et"]
    smd_gain = final["kha-et"] / final["kha-smd"]
    ok_order = ordered(final, ORDER["order"])
    ok_et = et_gain >= MAGNITUDES["et_ratio_min"]  # "two orders of magnitude", within a factor 3
    ok_smd = smd_gain >= MAGNITUDES["smd_ratio_min"]  # "an additional order of magnitude", within a factor 3
    ok_snr = snr["kha-et"] >= snr["kha/long"] - SNR["snr_slack_db"]
    n_patches = quads[0]["P"].shape[0]
    oks = (ok_order, ok_et, ok_smd, ok_snr)
    verdict = "reproduced" if all(oks) else ("partly reproduced" if any(oks) else "not reproduced")
    md = f"""**Claim (§5.2, Fig. 2).** Lena in four sub-images, 11 x 11 windows on a 2-pixel grid (3844 per
sub-image), Gaussian kernel sigma 1, r = 20, curves averaged over the sub-images: "After 50 passes through the
training data, KHA/et achieves an excess reconstruction error two orders of magnitude better than
conventional KHA [constant gain 0.05 of Kim et al.]; KHA-SMD yields an additional order of magnitude
improvement. KHA/t, while superior to a constant gain, is comparatively ineffective here." And: constant
gain after 800 passes gives a reconstruction error of 5.64 % and SNR 13.46, KHA/et 13.49 in 50 passes.

**Criteria (paper/criteria/000_fig2_*.json, committed before the run).** (1) {ORDER.text}. (2) {MAGNITUDES.text}.
(3) {SNR.text}.

**Setup.** scikit-image's `camera` (Lena is not bundled) reduced to 256 x 256 by 2 x 2 block means, pixels
in [0, 1], Gaussian noise sigma {NOISE} (seed 0), split in four 128 x 128 sub-images. **Scaled down:** patches on
a {stride}-pixel grid, {n_patches} per sub-image instead of 3600 on the 2-pixel grid (exact K' and its
eigenvalues for eq. 22 cost O(l^2) memory, O(l^3) time per sub-image, and the 4 x 5 fits run {passes} passes);
the constant-gain comparison runs {long_passes} passes, not 800. Gaussian kernel sigma 1 and r = {R} as the paper.
Blocks of 256 rows. **Gains:** tuned on the top-left sub-image by the paper's local search over {{1, 2, 5}} x
10^b (score: excess error after pass {passes}), used unchanged on all four; KHA's constant eta0 = 0.05 as the
paper. Denoising: each noisy patch replaced by the fixed-point pre-image of its projection, overlaps averaged.

| solver | gains | tried on sub-image 1 (value: excess error) | after 10 passes | after {passes} |
|---|---|---|---|---|
{rows}

![Fig. 2: excess error per pass; noisy image; denoised by KHA-SMD]({path.parent.name}/{path.name})

After {passes} passes the constant gain's excess error is {et_gain:.0f} times KHA/et's (the paper: about 100),
KHA/et's {smd_gain:.1f} times KHA-SMD's (the paper: about 10). Constant gain after {long_passes} passes:
excess error {fmt(float(np.mean(long_errors)))} (mean over sub-images).

SNR (dB, `kpca.images.patches.snr_db`, whole 256 x 256 image): noisy {snr['noisy']:.2f}; KHA/et {passes} passes
{snr['kha-et']:.2f}; KHA-SMD {passes} passes {snr['kha-smd']:.2f}; constant gain {long_passes} passes
{snr['kha/long']:.2f}; linear PCA with the same r {snr['linear_pca']:.2f}. The paper's 13.46 / 13.49 are on
Lena with another noise level and SNR convention, so only the comparison between solvers transfers.

**Verdict:** {verdict} -- ordering
KHA-SMD < KHA/et < KHA/t < constant gain after {passes} passes: {"yes" if ok_order else "no"}; KHA/et two orders
below the constant gain: {"yes" if ok_et else "no"} ({et_gain:.0f}x); KHA-SMD one more: {"yes" if ok_smd else "no"}
({smd_gain:.1f}x); KHA/et in {passes} passes denoises as well as the constant gain in {long_passes}:
{"yes" if ok_snr else "no"}. Why the gaps between the solvers are smaller than the paper's is not known;
candidates: a quarter of the paper's patches per sub-image (each pass has a quarter of its steps, and the
tuned gains are larger), block updates of 256 rows, `camera` for Lena. On this image linear PCA denoises better than kernel PCA with sigma 1 (as in
`bench/denoise_image.py`'s sweep: the narrow kernel keeps much of the noise), which the paper does not compare.
"""
    fig_rel = f"figures/{path.name}"
    claims = [
        ORDER.result("reproduced" if ok_order else "not reproduced", fig_rel),
        MAGNITUDES.result("reproduced" if ok_et and ok_smd else ("partly" if ok_et or ok_smd else "not reproduced"),
                          fig_rel),
        SNR.result("reproduced" if ok_snr else "not reproduced", fig_rel),
    ]
    return {"markdown": md, "claims": claims, "seconds": time.perf_counter() - t0}
