"""The Wiener second stage's risk estimate for any first stage (`kpca.second_stage.stage_risks`) and the
request's three-valued choice (issue 27: the stored-model path's second stage, forced on or off)."""

from __future__ import annotations

import numpy as np
import pytest

from kpca.images import assemble_patches, extract_patches
from kpca.patch_denoising import (LINEAR, PatchSettings, denoise_image, fit_patch_model, leading, linear_pca_denoise,
                                  preimages)
from kpca.second_stage import (WIENER, apply_second_stage, lower_stage, second_stage_risks, stage_choice,
                               stage_risks)
from kpca.tuning import ALPHA, DRAWS, recorruptions, tune_model, tuning_windows

from tests.kpca.test_denoise_tuning import mse, scene, smooth_scene

LINEAR_FIRST = PatchSettings(method=LINEAR, width=None, n_components=2, tile=16)
KERNEL_FIRST = PatchSettings(patch=5, stride=2, method="fixed-point", n_components=4, tile=16, width=0.5)


def naive_second_stage_risks(noisy, settings, noise, seed=0, draws=DRAWS):
    """`second_stage_risks` as it was written before `stage_risks` (commit 0ad02bc), loop for loop."""
    image = np.asarray(noisy, dtype=np.float64)
    windows = tuning_windows(image.shape, settings.tile)
    s1 = noise * np.sqrt(1.0 + ALPHA**2)
    offset = noise**2 * (1.0 + 1.0 / ALPHA**2)
    first_sum = wiener_sum = 0.0
    pixels = sum((r.stop - r.start) * (c.stop - c.start) for r, c in windows)
    for y1, target in recorruptions(image, noise, seed, draws):
        whole = linear_pca_denoise(y1, settings.patch, settings.stride, settings.n_components) \
            if settings.method == LINEAR else None
        for rows, cols in windows:
            first = whole[rows, cols] if whole is not None else denoise_image(y1[rows, cols], settings, s1)
            second = apply_second_stage(y1[rows, cols], first, settings, s1, WIENER)
            first_sum += float(np.sum((first - target[rows, cols]) ** 2 - offset))
            wiener_sum += float(np.sum((second - target[rows, cols]) ** 2 - offset))
    return {"first": first_sum / (draws * pixels), WIENER: wiener_sum / (draws * pixels), "pixels": pixels,
            "draws": draws}


@pytest.mark.parametrize("settings", [LINEAR_FIRST, KERNEL_FIRST], ids=["linear", "fixed-point"])
def test_second_stage_risks_are_unchanged_on_overlapping_windows(settings, rng):
    """The refactor onto `stage_risks`' sums is exact: the same numbers, bit for bit, as the loop it
    replaced, on a 100 x 200 image whose sixteen 32 x 32 tuning windows overlap (four rows of them in
    100 pixels)."""
    clean = scene(200, 4)[:100]
    noisy = clean + rng.normal(0.0, 0.1, clean.shape)
    assert len(tuning_windows(noisy.shape, settings.tile)) == 16
    assert second_stage_risks(noisy, settings, 0.1, seed=3) == naive_second_stage_risks(noisy, settings, 0.1, seed=3)


@pytest.mark.parametrize("settings", [LINEAR_FIRST, KERNEL_FIRST], ids=["linear", "fixed-point"])
def test_stage_risks_of_a_patch_settings_first_stage_are_second_stage_risks(settings, rng):
    """On an image of one tuning window the draws of `tune_patches` (over the image) and of `tune_model`
    (window w from ``seed + w``) are the same, so `stage_risks` with the first stage ``settings`` gives
    `second_stage_risks`' numbers exactly."""
    clean = scene(48, 2)
    noisy = clean + rng.normal(0.0, 0.1, clean.shape)
    assert tuning_windows(noisy.shape, settings.tile) == [(slice(0, 48), slice(0, 48))]

    def first(y1, s1):
        return linear_pca_denoise(y1, settings.patch, settings.stride, settings.n_components) \
            if settings.method == LINEAR else denoise_image(y1, settings, s1)

    general = stage_risks(first, [noisy], 0.1, settings.patch, settings.stride, seed=7)
    assert general == second_stage_risks(noisy, settings, 0.1, seed=7)
    assert general["pixels"] == 48 * 48 and general["draws"] == DRAWS


def test_the_wiener_stage_is_kept_after_linear_pca_of_too_high_rank(rng):
    """A smooth image and linear PCA at rank 30 of 49 (nearly the noisy patches): the Wiener stage in its
    basis removes most of the noise left. Estimated and true differences agree in sign (measured: -0.0038
    and -0.0026 at seed 0); both paths are read from the noisy image only."""
    clean = smooth_scene(48, 2)
    noisy = clean + rng.normal(0.0, 0.1, clean.shape)

    def first(y1, _s1):
        return linear_pca_denoise(y1, 7, 1, 30)

    risks = stage_risks(first, [noisy], 0.1, 7, 1)
    assert risks[WIENER] < risks["first"] - 0.001 and lower_stage(risks) == WIENER
    out = first(noisy, 0.1)
    assert mse(apply_second_stage(noisy, out, (7, 1), 0.1, WIENER), clean) < mse(out, clean)  # peeking, in the test


def test_the_wiener_stage_is_not_kept_after_an_exact_first_stage(rng):
    """A first stage that already answers the clean image (whatever its input: an oracle, in the test only)
    leaves the Wiener stage nothing to remove but the noise it lets back in: its estimated risk is higher,
    so it is not kept (measured +0.00045 here; +0.00036 to +0.0010 over nine noise seeds)."""
    clean = scene(48, 3)
    noisy = clean + rng.normal(0.0, 0.1, clean.shape)
    risks = stage_risks(lambda _y1, _s1: clean, [noisy], 0.1, 7, 1)
    assert risks[WIENER] > risks["first"] + 0.0002 and lower_stage(risks) is None


def test_stage_risks_of_a_stored_model_use_its_tunings_draws():
    """On a stored model's tuning windows (window w drawn from ``seed + w``, as `tune_model`), the first
    stage's risk is the one the tuning estimated for the chosen candidate over all its draws."""
    clean = scene(64, 5)
    patches, _ = extract_patches(scene(40, 6), 5, 3)
    model = fit_patch_model(patches, 0.6, 6)
    noisy = clean + np.random.default_rng(8).normal(0.0, 0.1, clean.shape)
    windows = [noisy[:32, :32], noisy[32:, 16:48]]

    def apply(m, method, options, y):
        P, grid = extract_patches(y, 5, 2)
        return assemble_patches(preimages(m, P, method, options), grid)

    tuned = tune_model(model, windows, apply, {"method": "kwok-tsang"}, noise=0.1)
    assert tuned.chosen["draws"] == DRAWS
    chosen = tuned.settings
    risks = stage_risks(lambda y1, _s1: apply(leading(model, chosen.n_components), chosen.method, chosen.options, y1),
                        windows, 0.1, 5, 2)
    assert risks["first"] == pytest.approx(tuned.chosen["risk"], rel=1e-9)
    assert risks["pixels"] == 2 * 32 * 32


def test_the_choice_has_three_values_and_reads_the_old_flag():
    assert [stage_choice(v) for v in ("auto", "wiener", "off", True, False)] == ["auto", "wiener", "off", "auto", "off"]
    with pytest.raises(ValueError, match="second_stage"):
        stage_choice("sometimes")


def test_the_stage_takes_a_patch_and_stride_or_settings(rng):
    noisy = rng.normal(0.5, 0.1, (20, 20, 3))
    first = np.clip(noisy, 0.4, 0.6)
    settings = PatchSettings(patch=5, stride=2)
    by_settings = apply_second_stage(noisy, first, settings, 0.1, WIENER)
    assert np.array_equal(by_settings, apply_second_stage(noisy, first, (5, 2), 0.1, WIENER))
    assert by_settings.shape == noisy.shape and apply_second_stage(noisy, first, (5, 2), 0.1, None) is first
