"""The empirical Wiener second stage after the tuned first stage, kept only where (T1) says it helps.

`kpca.tuning.tune_patches` (or `kpca.tuning.tune_model`, for a stored model) chooses the first stage f.
The second stage g(y) = W(y, f(y), s) (`kpca.wiener.wiener_stage`: the noisy patches shrunk in the basis
of f(y)'s patches by the Wiener gain of f(y)'s coefficients) is a denoiser of y like any other, so (T1)
estimates its error with the same draws z as the first stage's: both paths, f alone and f then W, run on
y1 (W with y1's noise level s1) and compared with y2, averaged over the draws, on the tuning windows.
`stage_risks` does this for any first stage f(y1, s1) on windows each drawn as `tune_model` draws them;
`second_stage_risks` for a `PatchSettings` first stage with `tune_patches`' draws (one z over the whole
image, cut into `kpca.tuning.tuning_windows`). `choose_second_stage` keeps W only where its estimated risk
is lower than f's alone: the choice reads nothing but the noisy input. One more first-stage evaluation
and one Wiener stage per window and draw.

A request's choice (`STAGE_CHOICES`): ``auto`` decides by (T1), ``wiener`` always applies W, ``off`` never.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

import numpy as np

from kpca.patch_denoising import LINEAR, PatchSettings, denoise_image, linear_pca_denoise
from kpca.tuning import ALPHA, DRAWS, Tuned, recorruptions, tuning_windows
from kpca.wiener import wiener_stage

WIENER = "wiener"
STAGE_CHOICES = ("auto", WIENER, "off")  # a request's second_stage: decided by (T1), always, never
SHRINK = "patch"  # (W2) per patch and coefficient (bench/results/wiener_probe.json)
WIENER_TILE = None  # one basis for the whole image (bench/results/wiener_probe.json)


def stage_choice(value: bool | str) -> str:
    """A request's ``second_stage`` as one of `STAGE_CHOICES`; a bool (the flag before the choice had
    three values) is ``auto`` (True) or ``off`` (False). ValueError naming ``second_stage`` otherwise."""
    if isinstance(value, bool):
        return "auto" if value else "off"
    if value not in STAGE_CHOICES:
        raise ValueError(f"second_stage: {value!r} is not one of {STAGE_CHOICES}")
    return value


def apply_second_stage(noisy: np.ndarray, first: np.ndarray, settings: PatchSettings | tuple[int, int],
                       noise: float, stage: str | None) -> np.ndarray:
    """``first`` (the first stage's output for ``noisy``) followed by the second stage ``stage``
    (`WIENER` or None: ``first`` unchanged), with the patch and stride of ``settings`` (a `PatchSettings`
    or a ``(patch, stride)`` pair); a colour image (H, W, C) channel by channel. Cost:
    `kpca.wiener.wiener_stage` per channel, O(N n^2)."""
    if stage is None:
        return first
    if stage != WIENER:
        raise ValueError(f"second_stage: {stage!r} is not one of (None, {WIENER!r})")
    patch, stride = (settings.patch, settings.stride) if isinstance(settings, PatchSettings) else settings
    y, p = np.asarray(noisy, dtype=np.float64), np.asarray(first, dtype=np.float64)
    if y.ndim == 3:
        return np.stack([apply_second_stage(y[:, :, c], p[:, :, c], (patch, stride), noise, stage)
                         for c in range(y.shape[2])], axis=-1)
    return wiener_stage(y, p, patch, stride, noise, shrink=SHRINK, tile=WIENER_TILE)


def _risks(outputs: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]], noise: float, patch: int, stride: int,
           draws: int) -> dict:
    """(T1) of f alone and followed by W from ``outputs``, one ``(y1, y2, f(y1))`` per window and draw (W
    run on y1 with y1's noise level s1), summed in the order given and divided by ``draws`` times the
    pixels of one draw's windows: ``{"first", WIENER, "pixels", "draws"}``."""
    s1 = float(noise) * float(np.sqrt(1.0 + ALPHA * ALPHA))
    offset = float(noise) ** 2 * (1.0 + 1.0 / ALPHA**2)
    sums = {"first": 0.0, WIENER: 0.0}
    values = 0
    for y1, target, first in outputs:
        second = apply_second_stage(y1, first, (patch, stride), s1, WIENER)
        sums["first"] += float(np.sum((first - target) ** 2 - offset))
        sums[WIENER] += float(np.sum((second - target) ** 2 - offset))
        values += target.size
    draws = max(int(draws), 1)
    count = max(values // draws, 1) * draws
    return {"first": sums["first"] / count, WIENER: sums[WIENER] / count, "pixels": values // draws,
            "draws": draws}


def stage_risks(first: Callable[[np.ndarray, float], np.ndarray], windows: list[np.ndarray], noise: float,
                patch: int, stride: int, seed: int = 0, draws: int = DRAWS) -> dict:
    """(T1) of the first stage ``first`` alone and followed by the Wiener stage, on noisy ``windows``.

    Parameters
    ----------
    first : callable
        ``first(y1, s1) -> f(y1)``: one recorrupted window (noise level ``s1``) through the first stage,
        same shape.
    windows : list of ndarray
        The noisy input or windows of it (``(H, W)`` or ``(H, W, C)``); window w's draws z come from
        ``seed + w``, as `kpca.tuning.tune_model` draws them, so ``first``'s risk here is the one the
        tuning estimated for it over the same draws.
    noise : float
        s of (T1).
    patch, stride : int
        The Wiener stage's patches (the first stage's).
    seed, draws : int
        Of the draws z (`kpca.tuning.recorruptions`).

    Returns ``{"first": risk, "wiener": risk, "pixels": N, "draws": draws}``, risks per value on the
    scale of the windows, N the values of all windows. Cost per draw: ``first`` and one Wiener stage per
    window.
    """
    s1 = float(noise) * float(np.sqrt(1.0 + ALPHA * ALPHA))

    def outputs():
        for w, window in enumerate(windows):
            for y1, target in recorruptions(window, noise, seed + w, draws):
                yield y1, target, first(y1, s1)

    return _risks(outputs(), noise, patch, stride, draws)


def second_stage_risks(noisy: np.ndarray, settings: PatchSettings, noise: float, seed: int = 0,
                       draws: int = DRAWS) -> dict:
    """(T1) of the first stage ``settings`` alone and followed by the Wiener stage, with the draws of
    `kpca.tuning.tune_patches` (same ``seed``: z over the whole image), on its tuning windows: as
    `stage_risks`. A colour image is read as its mean over channels, as the tuning does. Cost per draw:
    the first stage on the windows (``linear``: on the whole image) and one Wiener stage per window."""
    image = np.asarray(noisy, dtype=np.float64)
    if image.ndim == 3:
        image = image.mean(axis=2)
    windows = tuning_windows(image.shape, settings.tile)
    s1 = float(noise) * float(np.sqrt(1.0 + ALPHA * ALPHA))

    def outputs():
        for y1, target in recorruptions(image, noise, seed, draws):
            whole = linear_pca_denoise(y1, settings.patch, settings.stride, settings.n_components) \
                if settings.method == LINEAR else None
            for rows, cols in windows:
                y1_w = y1[rows, cols]
                first = whole[rows, cols] if whole is not None else denoise_image(y1_w, settings, s1)
                yield y1_w, target[rows, cols], first

    return _risks(outputs(), noise, settings.patch, settings.stride, draws)


def lower_stage(risks: dict) -> str | None:
    """`WIENER` where its estimated risk is lower than the first stage's alone, else None."""
    return WIENER if risks[WIENER] < risks["first"] else None


def choose_second_stage(noisy: np.ndarray, tuned: Tuned, seed: int = 0, draws: int = DRAWS) -> Tuned:
    """``tuned`` with ``second_stage`` set: ``{"stage": WIENER or None, "risks": second_stage_risks(...)}``,
    `WIENER` only where its estimated risk (T1) is lower than the first stage's alone. Reads nothing but
    the noisy image. Cost: `second_stage_risks`."""
    risks = second_stage_risks(noisy, tuned.settings, tuned.noise, seed, draws)
    return replace(tuned, second_stage={"stage": lower_stage(risks), "risks": risks})


__all__ = ["WIENER", "STAGE_CHOICES", "SHRINK", "WIENER_TILE", "stage_choice", "apply_second_stage", "stage_risks",
           "second_stage_risks", "lower_stage", "choose_second_stage"]
