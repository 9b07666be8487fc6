"""The empirical Wiener second stage after the tuned first stage, kept only where (T1) says it helps.

`kpca.tuning.tune_patches` chooses the first stage f (a kernel pre-image per tile, or ``linear``).
The second stage g(y) = W(y, f(y), s) (`kpca.wiener.wiener_stage`: the noisy patches shrunk in the
basis of f(y)'s patches by the Wiener gain of f(y)'s coefficients) is a denoiser of y like any other,
so (T1) estimates its error with the same draws z as the first stage's: both paths, f alone and f then
W, run on y1 (W with y1's noise level s1) and compared with y2, averaged over the draws, on the tuning
windows (`kpca.tuning.tuning_windows`). `choose_second_stage` keeps W only where its estimated risk is
lower than f's alone: the choice reads nothing but the noisy input. One more first-stage evaluation
and one Wiener stage per draw.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from kpca.patch_denoising import LINEAR, PatchSettings, denoise_image, linear_pca_denoise
from kpca.tuning import ALPHA, DRAWS, Tuned, recorruptions, tuning_windows
from kpca.wiener import wiener_stage

WIENER = "wiener"
SHRINK = "patch"  # (W2) per patch and coefficient (bench/results/wiener_probe.json)
WIENER_TILE = None  # one basis for the whole image (bench/results/wiener_probe.json)


def apply_second_stage(noisy: np.ndarray, first: np.ndarray, settings: PatchSettings, noise: float,
                       stage: str | None) -> np.ndarray:
    """``first`` (the first stage's output for ``noisy``) followed by the second stage ``stage``
    (`WIENER` or None: ``first`` unchanged), with ``settings``' patch and stride; a colour image (H, W, C)
    channel by channel. Cost: `kpca.wiener.wiener_stage` per channel, O(N n^2)."""
    if stage is None:
        return first
    if stage != WIENER:
        raise ValueError(f"second_stage: {stage!r} is not one of (None, {WIENER!r})")
    y, p = np.asarray(noisy, dtype=np.float64), np.asarray(first, dtype=np.float64)
    if y.ndim == 3:
        return np.stack([apply_second_stage(y[:, :, c], p[:, :, c], settings, noise, stage)
                         for c in range(y.shape[2])], axis=-1)
    return wiener_stage(y, p, settings.patch, settings.stride, noise, shrink=SHRINK, tile=WIENER_TILE)


def second_stage_risks(noisy: np.ndarray, settings: PatchSettings, noise: float, seed: int = 0,
                       draws: int = DRAWS) -> dict:
    """(T1) of the first stage ``settings`` alone and followed by the Wiener stage, with the draws of
    `kpca.tuning.tune_patches` (same ``seed``), on its tuning windows: ``{"first": risk, "wiener": risk,
    "pixels": N, "draws": draws}``. A colour image is read as its mean over channels, as the tuning
    does. Cost per draw: the first stage on the windows (``linear``: on the whole image) and one Wiener
    stage per window."""
    image = np.asarray(noisy, dtype=np.float64)
    if image.ndim == 3:
        image = image.mean(axis=2)
    windows = tuning_windows(image.shape, settings.tile)
    s1 = float(noise) * float(np.sqrt(1.0 + ALPHA * ALPHA))
    offset = float(noise) ** 2 * (1.0 + 1.0 / ALPHA**2)
    sums = {"first": 0.0, WIENER: 0.0}
    pixels = int(sum((r.stop - r.start) * (c.stop - c.start) for r, c in windows))
    for y1, target in recorruptions(image, noise, seed, draws):
        whole = linear_pca_denoise(y1, settings.patch, settings.stride, settings.n_components) \
            if settings.method == LINEAR else None
        for rows, cols in windows:
            y1_w, target_w = y1[rows, cols], target[rows, cols]
            first = whole[rows, cols] if whole is not None else denoise_image(y1_w, settings, s1)
            second = apply_second_stage(y1_w, first, settings, s1, WIENER)
            sums["first"] += float(np.sum((first - target_w) ** 2 - offset))
            sums[WIENER] += float(np.sum((second - target_w) ** 2 - offset))
    count = max(int(draws), 1) * max(pixels, 1)
    return {"first": sums["first"] / count, WIENER: sums[WIENER] / count, "pixels": pixels, "draws": int(draws)}


def choose_second_stage(noisy: np.ndarray, tuned: Tuned, seed: int = 0, draws: int = DRAWS) -> Tuned:
    """``tuned`` with ``second_stage`` set: ``{"stage": WIENER or None, "risks": second_stage_risks(...)}``,
    `WIENER` only where its estimated risk (T1) is lower than the first stage's alone. Reads nothing but
    the noisy image. Cost: `second_stage_risks`."""
    risks = second_stage_risks(noisy, tuned.settings, tuned.noise, seed, draws)
    stage = WIENER if risks[WIENER] < risks["first"] else None
    return replace(tuned, second_stage={"stage": stage, "risks": risks})


__all__ = ["WIENER", "SHRINK", "WIENER_TILE", "apply_second_stage", "second_stage_risks", "choose_second_stage"]
