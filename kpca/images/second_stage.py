"""The empirical Wiener second stage after the tuned first stage, kept only where (T1) says it helps.

`kpca.images.tuning.tune_patches` (or `kpca.images.model_tuning.tune_model`, for a stored model) chooses the first
stage f.
The second stage g(y) = W(y, f(y), s) (`kpca.images.wiener.wiener_stage`: the noisy patches shrunk in the basis
of f(y)'s patches by the Wiener gain of f(y)'s coefficients) is a denoiser of y like any other, so (T1)
estimates its error with the same draws z as the first stage's: both paths, f alone and f then W, run on
y1 (W with y1's noise level s1) and compared with y2, averaged over the draws, on the tuning windows.
`stage_risks` does this for any first stage f(y1, s1) on windows each drawn as `tune_model` draws them;
`second_stage_risks` for a `PatchSettings` first stage with `tune_patches`' draws (one z over the whole
image, cut into `kpca.images.tuning.tuning_windows`). `choose_second_stage` keeps W only where its estimated risk
is lower than f's alone: the choice reads nothing but the noisy input. One more first-stage evaluation
and one Wiener stage per window and draw.

Variants of W (`VARIANTS`, named by `variant_name`): the patch side (the first stage's, or 5, 11, 15:
larger patches for smooth images and regular textures, smaller for irregular ones), one or two passes
(W(y, W(y, f(y))): the first pass's output as the second pass's pilot, BM3D's idea of a better pilot
for the Wiener step) and the gain's noise level (s, or 0.8 s: a pilot that is itself a shrunk estimate
underestimates the signal's energy in (W2), so its gains shrink too much). ``auto`` estimates (T1) of
each with the same draws (12 Wiener stages per window and draw, each O(m n^2)) and keeps the single
stage ``wiener`` or none, as before, unless the variant of least estimated risk beats that choice by
more than `MARGIN` standard errors of the difference (16 x 16 blocks of the per-pixel losses, as
`kpca.images.tuning.choose`): a variant is chosen only where the estimate says clearly that it helps.

A request's choice (`STAGE_CHOICES`): ``auto`` decides by (T1) among f, W and its variants; ``wiener``
always applies the single stage W; ``off`` never.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import replace

import numpy as np

from kpca.images.denoising import LINEAR, PatchSettings, denoise_image, linear_pca_denoise
from kpca.images.tuning import DRAWS, Tuned, block_means, recorrupted_levels, recorruptions, tuning_windows
from kpca.images.wiener import wiener_stage, wiener_stages

WIENER = "wiener"
STAGE_CHOICES = ("auto", WIENER, "off")  # a request's second_stage: decided by (T1), always, never
SHRINK = "patch"  # (W2) per patch and coefficient (bench/results/wiener_probe.json)
WIENER_TILE = None  # one basis for the whole image (bench/results/wiener_probe.json)
#: (patch side or None: the first stage's, passes, gain noise factor) of the variants ``auto`` weighs
#: (bench/results/second_stage_probe.json)
VARIANTS = ((None, 1, 1.0), (None, 2, 1.0), (None, 1, 0.8), (None, 2, 0.8), (5, 1, 1.0), (5, 2, 1.0), (5, 1, 0.8),
            (5, 2, 0.8), (11, 1, 1.0), (11, 2, 1.0), (15, 1, 1.0), (15, 2, 1.0))
#: the Wiener stages, estimated and applied, shrink in float32 (`kpca.images.wiener.wiener_stages`): their rounding,
#: about 1e-7 of a pixel, is far below the estimate's own noise and a 16-bit pixel's step, and their products cost
#: half of float64's; the estimate is of the stage as applied
WIENER_DTYPE = np.float32
MARGIN = 1.0  # standard errors by which a variant must beat the single stage's choice (second_stage_probe.json)
#: a Wiener stage of patches this wide or wider reads every second patch (`wiener_stride`): a pixel is still in 30
#: or more of them, its answer within 0.05 dB on bench/denoise_quality.py's cases, at a quarter of the cost
WIDE_PATCH = 11
_NAME = re.compile(r"wiener(2)?(?:-(\d+)x\d+)?(?:-s([0-9.]+))?")


def variant_name(patch: int, passes: int, scale: float, first_patch: int) -> str:
    """The name of a Wiener variant: ``wiener``, then ``2`` for two passes, ``-PxP`` for a patch side P
    other than the first stage's ``first_patch``, ``-sF`` for a gain noise factor F other than 1; the
    single stage with the first stage's patch is `WIENER`. O(1)."""
    return (WIENER + ("2" if passes == 2 else "") + ("" if patch == first_patch else f"-{patch}x{patch}")
            + ("" if scale == 1.0 else f"-s{scale:g}"))


def variants(first_patch: int, largest: int | None = None) -> dict:
    """``{name: (patch, passes, scale)}`` of `VARIANTS` for a first stage of patch side ``first_patch``
    (duplicates dropped, and patches wider than ``largest``, the least side of the windows, if given),
    `WIENER` first. O(1)."""
    out: dict[str, tuple] = {}
    for patch, passes, scale in VARIANTS:
        side = first_patch if patch is None else patch
        if patch is None or largest is None or side <= largest:
            out.setdefault(variant_name(side, passes, scale, first_patch), (side, passes, scale))
    return out


def parse_stage(stage: str, first_patch: int) -> tuple[int, int, float]:
    """``(patch, passes, scale)`` of a variant's name (`variant_name`); ValueError naming ``second_stage``
    if it is none. O(1)."""
    match = _NAME.fullmatch(stage) if isinstance(stage, str) else None
    if match is None:
        raise ValueError(f"second_stage: {stage!r} is not a Wiener stage (wiener[2][-PxP][-sF])")
    return (int(match.group(2)) if match.group(2) else first_patch, 2 if match.group(1) else 1,
            float(match.group(3)) if match.group(3) else 1.0)


def wiener_stride(side: int, stride: int) -> int:
    """The stride a Wiener stage of patch side ``side`` runs at for a first stage of ``stride``: at least 2 for
    patches of `WIDE_PATCH` or more (estimated and applied alike), else ``stride``. O(1)."""
    return max(int(stride), 2) if side >= WIDE_PATCH else int(stride)


def stage_choice(value: bool | str) -> str:
    """A request's ``second_stage`` as one of `STAGE_CHOICES`; a bool (the flag before the choice had
    three values) is ``auto`` (True) or ``off`` (False). ValueError naming ``second_stage`` otherwise."""
    if isinstance(value, bool):
        return "auto" if value else "off"
    if value not in STAGE_CHOICES:
        raise ValueError(f"second_stage: {value!r} is not one of {STAGE_CHOICES}")
    return value


def apply_second_stage(noisy: np.ndarray, first: np.ndarray, settings: PatchSettings | tuple[int, int],
                       noise: float, stage: str | None, report: Callable[[int, int], None] | None = None) -> np.ndarray:
    """``first`` (the first stage's output for ``noisy``) followed by the second stage ``stage``
    (`WIENER`, a variant's name, `variant_name`, or None: ``first`` unchanged), with the stride of
    ``settings`` (a `PatchSettings` or a ``(patch, stride)`` pair; `wiener_stride` for wide patches) and its
    patch unless the variant names one; a colour image (H, W, C) channel by channel; ``report(done, total)``
    after each band of patches of each pass. Cost: `kpca.images.wiener.wiener_stage` per channel and pass, O(N n^2)."""
    if stage is None:
        return first
    patch, stride = (settings.patch, settings.stride) if isinstance(settings, PatchSettings) else settings
    side, passes, scale = parse_stage(stage, patch)
    y, p = np.asarray(noisy, dtype=np.float64), np.asarray(first, dtype=np.float64)
    if y.ndim == 3:
        return np.stack([apply_second_stage(y[:, :, c], p[:, :, c], (patch, stride), noise, stage, report)
                         for c in range(y.shape[2])], axis=-1)
    for k in range(passes):  # one count of units over the passes
        counted = None if report is None else (lambda done, total, k=k: report(k * total + done, passes * total))
        p = wiener_stage(y, p, side, wiener_stride(side, stride), scale * noise, shrink=SHRINK, tile=WIENER_TILE,
                         report=counted, dtype=WIENER_DTYPE)
    return p


def _risks(outputs: Iterable[tuple[int, np.ndarray, np.ndarray, np.ndarray]], noise: float, patch: int,
           stride: int, draws: int, largest: int, keep_losses: bool = False) -> dict:
    """(T1) of f alone, followed by W and by each variant (`variants`; ``largest``: the windows' least
    side) from ``outputs``, one
    ``(window, y1, y2, f(y1))`` per window and draw (W run on y1 with y1's noise level s1), summed in the
    order given and divided by ``draws`` times the pixels of one draw's windows: ``{"first", WIENER,
    variant..., "pixels", "draws", "chosen", "standard_error"}`` (`choose_variant`); with ``keep_losses``
    also ``"losses"``, the per-pixel losses `choose_variant` reads."""
    s1, offset = recorrupted_levels(noise)
    names = variants(patch, largest)
    sums = {"first": 0.0, **{name: 0.0 for name in names}}
    losses: dict = {name: {} for name in sums}  # name -> window -> per-pixel losses summed over the draws
    values = 0
    scales: dict[int, list[float]] = {}  # patch side -> the gain noise factors of its first passes
    for side, _, scale in names.values():
        scales.setdefault(side, [])
        if scale not in scales[side]:
            scales[side].append(scale)
    for window, y1, target, first in outputs:
        outs = {"first": first}
        for side, factors in scales.items():  # one basis per side serves every factor's first pass
            stages = wiener_stages(y1, first, side, wiener_stride(side, stride), [f * s1 for f in factors],
                                   shrink=SHRINK, tile=WIENER_TILE, dtype=WIENER_DTYPE)
            outs.update({variant_name(side, 1, f, patch): out for f, out in zip(factors, stages)})
        for name, (side, passes, scale) in names.items():  # a second pass's pilot is the first pass's output
            if passes == 2:
                outs[name] = wiener_stage(y1, outs[variant_name(side, 1, scale, patch)], side,
                                          wiener_stride(side, stride), scale * s1,
                                          shrink=SHRINK, tile=WIENER_TILE, dtype=WIENER_DTYPE)
        outs = {name: outs[name] for name in ("first", *names)}
        for name, out in outs.items():
            loss = (out - target) ** 2 - offset
            sums[name] += float(np.sum(loss))
            losses[name][window] = losses[name].get(window, 0.0) + loss
        values += target.size
    draws = max(int(draws), 1)
    count = max(values // draws, 1) * draws
    risks = {name: total / count for name, total in sums.items()}
    answer = {**risks, "pixels": values // draws, "draws": draws, **choose_variant(risks, losses, draws)}
    return {**answer, "losses": losses} if keep_losses else answer


def choose_variant(risks: dict, losses: dict, draws: int, margin: float = MARGIN) -> dict:
    """The second stage ``auto`` keeps, from the estimates (T1) ``risks`` (``"first"`` and a risk per
    variant) and the per-pixel ``losses`` (name -> window -> losses summed over ``draws``): `WIENER` if its
    risk is lower than the first stage's alone, else None (the rule before the variants); replaced by the
    variant of least risk where that beats it by more than ``margin`` standard errors of the difference of
    their 16 x 16 block means (`kpca.images.tuning.block_means`). ``{"chosen", "standard_error"}``. O(pixels)."""
    incumbent = WIENER if risks[WIENER] < risks["first"] else "first"
    best = min((name for name in risks if name != "first"), key=lambda name: risks[name])
    if best == incumbent or risks[best] >= risks[incumbent]:
        return {"chosen": None if incumbent == "first" else incumbent, "standard_error": None}
    blocks = np.concatenate([block_means((losses[incumbent][w] - losses[best][w]) / draws)
                             for w in losses[best]])
    error = float(np.std(blocks, ddof=1) / np.sqrt(blocks.size)) if blocks.size > 1 else 0.0
    chosen = best if risks[incumbent] - risks[best] > margin * error else incumbent
    return {"chosen": None if chosen == "first" else chosen, "standard_error": error}


def stage_risks(first: Callable[[np.ndarray, float], np.ndarray], windows: list[np.ndarray], noise: float,
                patch: int, stride: int, seed: int = 0, draws: int = DRAWS, first_outputs: list | None = None) -> dict:
    """(T1) of the first stage ``first`` alone and followed by the Wiener stage, on noisy ``windows``.

    Parameters
    ----------
    first : callable
        ``first(y1, s1) -> f(y1)``: one recorrupted window (noise level ``s1``) through the first stage,
        same shape.
    windows : list of ndarray
        The noisy input or windows of it (``(H, W)`` or ``(H, W, C)``); window w's draws z come from
        ``seed + w``, as `kpca.images.model_tuning.tune_model` draws them, so ``first``'s risk here is the one the
        tuning estimated for it over the same draws.
    noise : float
        s of (T1).
    patch, stride : int
        The Wiener stage's patches (the first stage's).
    seed, draws : int
        Of the draws z (`kpca.images.tuning.recorruptions`).
    first_outputs : list, optional
        ``first``'s outputs already computed on these draws (``[draw][window]``, a draw None where not:
        `kpca.images.tuning.Tuned.first_outputs` of `kpca.images.model_tuning.tune_model`), read instead of
        calling ``first``.

    Returns ``{"first": risk, "wiener": risk, variant: risk..., "pixels": N, "draws": draws, "chosen":
    stage or None, "standard_error": se or None}`` (`choose_variant`), risks per value on the scale of the
    windows, N the values of all windows. Cost per draw: ``first`` and 12 Wiener stages per window.
    """
    s1, _ = recorrupted_levels(noise)

    def outputs():
        for w, window in enumerate(windows):
            for d, (y1, target) in enumerate(recorruptions(window, noise, seed + w, draws)):
                known = first_outputs[d] if first_outputs is not None and d < len(first_outputs) else None
                yield w, y1, target, first(y1, s1) if known is None else known[w]

    return _risks(outputs(), noise, patch, stride, draws, min(min(np.shape(w)[:2]) for w in windows))


def second_stage_risks(noisy: np.ndarray, settings: PatchSettings, noise: float, seed: int = 0,
                       draws: int = DRAWS, keep_losses: bool = False, first_outputs: list | None = None,
                       stride: int | None = None) -> dict:
    """(T1) of the first stage ``settings`` alone and followed by the Wiener stage, with the draws of
    `kpca.images.tuning.tune_patches` (same ``seed``: z over the whole image), on its tuning windows: as
    `stage_risks`. A colour image is read as its mean over channels, as the tuning does. Cost per draw:
    the first stage on the windows (``linear``: on the whole image) and 12 Wiener stages per window.
    ``keep_losses``: also the per-pixel losses (`_risks`), for a probe. ``first_outputs``: the first stage's
    outputs on the windows where already computed (``[draw][window]``, None for a draw that was not,
    `kpca.images.tuning.Tuned.first_outputs`), read instead of run again. ``stride``: of the patches of the
    estimate, first stage and Wiener stages (default ``settings.stride``; the tuning's probe,
    `kpca.images.tuning.probe_settings`, with its first stage's models fitted at ``settings.stride``)."""
    image = np.asarray(noisy, dtype=np.float64)
    if image.ndim == 3:
        image = image.mean(axis=2)
    windows = tuning_windows(image.shape, settings.tile)
    s1, _ = recorrupted_levels(noise)
    probe = replace(settings, stride=settings.stride if stride is None else int(stride))

    def outputs():
        for d, (y1, target) in enumerate(recorruptions(image, noise, seed, draws)):
            known = first_outputs[d] if first_outputs is not None and d < len(first_outputs) else None
            whole = linear_pca_denoise(y1, probe.patch, probe.stride, probe.n_components) \
                if probe.method == LINEAR and known is None else None
            for w, (rows, cols) in enumerate(windows):
                y1_w = y1[rows, cols]
                if known is not None:
                    first = known[w]
                else:
                    first = whole[rows, cols] if whole is not None else denoise_image(
                        y1_w, probe, s1, fit_stride=settings.stride)
                yield w, y1_w, target[rows, cols], first

    largest = min(min(r.stop - r.start, c.stop - c.start) for r, c in windows)
    return _risks(outputs(), noise, probe.patch, probe.stride, draws, largest, keep_losses)


def lower_stage(risks: dict) -> str | None:
    """The stage ``auto`` keeps from `stage_risks`' or `second_stage_risks`' estimates: their ``chosen``
    (`choose_variant`: `WIENER` where its risk is lower than the first stage's alone, a variant where it
    is clearly lower still, else None); `WIENER` or None by the two risks where there is no ``chosen``.
    O(1)."""
    if "chosen" in risks:
        return risks["chosen"]
    return WIENER if risks[WIENER] < risks["first"] else None


def choose_second_stage(noisy: np.ndarray, tuned: Tuned, seed: int = 0, draws: int = DRAWS) -> Tuned:
    """``tuned`` with ``second_stage`` set: ``{"stage": name or None, "risks": second_stage_risks(...)}``,
    the stage `lower_stage` keeps by (T1) (`WIENER` where its estimated risk is lower than the first
    stage's alone, a variant where clearly lower still), estimated at the stride the tuning's were
    (``tuned.stride``). Reads nothing but the noisy image. Cost: `second_stage_risks`, less the first stage's
    runs the tuning kept (``tuned.first_outputs``)."""
    assert isinstance(tuned.settings, PatchSettings), "a second stage follows `tune_patches`' choice"
    same_draws = tuned.seed == seed and tuned.first_outputs is not None and len(tuned.first_outputs) == draws
    risks = second_stage_risks(noisy, tuned.settings, tuned.noise, seed, draws,
                               first_outputs=tuned.first_outputs if same_draws else None, stride=tuned.stride)
    return replace(tuned, second_stage={"stage": lower_stage(risks), "risks": risks})


__all__ = ["WIENER", "STAGE_CHOICES", "SHRINK", "WIENER_TILE", "VARIANTS", "MARGIN", "WIDE_PATCH", "wiener_stride",
           "variant_name", "variants",
           "parse_stage", "stage_choice", "apply_second_stage", "choose_variant", "stage_risks", "second_stage_risks",
           "lower_stage", "choose_second_stage"]
