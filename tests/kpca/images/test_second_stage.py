"""The Wiener second stage's risk estimate for any first stage (`kpca.images.second_stage.stage_risks`), the
request's three-valued choice (issue 27: the stored-model path's second stage, forced on or off) and the
stage's variants (patch side, passes, gain) that ``auto`` weighs by (T1)."""

from __future__ import annotations

import numpy as np
import pytest

from kpca.images.patches import assemble_patches, extract_patches
from kpca.images.denoising import (LINEAR, PatchSettings, denoise_image, fit_patch_model, leading, linear_pca_denoise,
                                  preimages)
from kpca.images.second_stage import (WIENER_DTYPE, MARGIN, SHRINK, WIENER, apply_second_stage, choose_variant,
                                      lower_stage, parse_stage, second_stage_risks, stage_choice, stage_risks,
                                      variant_name, variants, WIDE_PATCH, wiener_stride)
from kpca.images.wiener import wiener_stage
from kpca.images.model_tuning import tune_model
from kpca.images.tuning import ALPHA, DRAWS, recorruptions, tuning_windows

from tests.kpca.images.test_denoise_tuning import mse, scene, smooth_scene

LINEAR_FIRST = PatchSettings(method=LINEAR, width=None, n_components=2, tile=16)
KERNEL_FIRST = PatchSettings(patch=5, stride=2, method="fixed-point", n_components=4, tile=16, width=0.5)


def naive_second_stage_risks(noisy, settings, noise, seed=0, draws=DRAWS):
    """`second_stage_risks` as it was written before `stage_risks` (commit 0ad02bc), loop for loop, its Wiener
    stage in its precision (`WIENER_DTYPE`)."""
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
            second = wiener_stage(y1[rows, cols], first, settings.patch, settings.stride, s1, shrink=SHRINK,
                                  dtype=WIENER_DTYPE)
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
    naive = naive_second_stage_risks(noisy, settings, 0.1, seed=3)
    risks = second_stage_risks(noisy, settings, 0.1, seed=3)
    assert {key: risks[key] for key in naive} == naive


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
    assert risks[WIENER] < risks["first"] - 0.001 and lower_stage(risks) in variants(7)
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


def test_variant_names_name_their_patch_passes_and_gain():
    """Every variant's name reads back as its (patch, passes, gain factor); the single stage with the
    first stage's patch is ``wiener``; a patch equal to the first stage's is not named again."""
    named = variants(7)
    assert list(named)[0] == WIENER and named[WIENER] == (7, 1, 1.0) and len(named) == 12
    assert {"wiener2", "wiener-s0.8", "wiener2-5x5-s0.8", "wiener-15x15", "wiener2-15x15"} <= set(named)
    for name, spec in named.items():
        assert parse_stage(name, 7) == spec and variant_name(*spec, 7) == name
    assert "wiener-5x5" not in variants(5) and variants(5)[WIENER] == (5, 1, 1.0) and len(variants(5)) == 8
    assert set(variants(7, 12)) == set(named) - {"wiener-15x15", "wiener2-15x15"}  # windows of 12 pixels
    for bad in ("wiener3", "wiener-7x", "off", None):
        with pytest.raises(ValueError, match="second_stage"):
            parse_stage(bad, 7)


def test_windows_smaller_than_a_variants_patch_leave_it_out(rng):
    """A 12 x 12 image (one tuning window) has no 15 x 15 patch: the estimate weighs the other variants."""
    noisy = scene(12, 1) + rng.normal(0.0, 0.1, (12, 12))
    risks = second_stage_risks(noisy, PatchSettings(patch=5, stride=1, method=LINEAR, width=None, n_components=2,
                                                    tile=16), 0.1)
    assert "wiener-11x11" in risks and "wiener-15x15" not in risks and "wiener2" in risks


def test_a_variant_is_the_single_stage_with_its_patch_passes_and_gain(rng):
    clean = scene(40, 1)
    noisy = clean + rng.normal(0.0, 0.1, clean.shape)
    first = linear_pca_denoise(noisy, 7, 1, 2)
    once = wiener_stage(noisy, first, 7, 1, 0.1, dtype=WIENER_DTYPE)
    assert np.array_equal(apply_second_stage(noisy, first, (7, 1), 0.1, WIENER), once)
    twice = wiener_stage(noisy, once, 7, 1, 0.1, dtype=WIENER_DTYPE)
    assert np.array_equal(apply_second_stage(noisy, first, (7, 1), 0.1, "wiener2"), twice)
    assert np.array_equal(apply_second_stage(noisy, first, (7, 1), 0.1, "wiener-5x5-s0.8"),
                          wiener_stage(noisy, first, 5, 1, 0.8 * 0.1, dtype=WIENER_DTYPE))
    # patches of WIDE_PATCH or more read every second patch (issue 55), estimated as applied
    wide = apply_second_stage(noisy, first, (7, 1), 0.1, "wiener-11x11")
    assert WIDE_PATCH == 11 and wiener_stride(11, 1) == 2 and wiener_stride(7, 1) == 1 and wiener_stride(15, 3) == 3
    assert np.array_equal(wide, wiener_stage(noisy, first, 11, 2, 0.1, dtype=WIENER_DTYPE))
    assert not np.array_equal(wide, wiener_stage(noisy, first, 11, 1, 0.1, dtype=WIENER_DTYPE))


def test_auto_picks_two_passes_of_a_larger_patch_on_a_smooth_image(rng):
    """After rank-1 linear PCA of a smooth image (as on scikit-image's cell), the single 7 x 7 stage lets
    noise back in (true error up, 1.05e-4 to 1.23e-4 here), while two passes of 15 x 15 patches halve the
    first stage's error. (T1), reading the noisy image only (the clean one is used below to score), picks a
    larger patch's variant by more than `MARGIN` standard errors, and it is truly the better answer."""
    clean = smooth_scene(64, 2)
    noisy = clean + np.random.default_rng(2).normal(0.0, 0.1, clean.shape)
    settings = PatchSettings(method=LINEAR, width=None, n_components=1, tile=32)
    risks = second_stage_risks(noisy, settings, 0.1)
    chosen = lower_stage(risks)
    assert chosen not in (None, WIENER) and parse_stage(chosen, 7)[0] > 7
    assert risks[WIENER] - risks[chosen] > MARGIN * risks["standard_error"]
    first = linear_pca_denoise(noisy, 7, 1, 1)
    picked = mse(apply_second_stage(noisy, first, settings, 0.1, chosen), clean)  # peeking, in the test
    assert picked < 0.8 * min(mse(first, clean), mse(apply_second_stage(noisy, first, settings, 0.1, WIENER), clean))


def test_a_variant_replaces_the_single_stage_only_by_more_than_the_margin(rng):
    """`choose_variant`: the single stage (kept, its risk being below the first stage's) gives way to a
    variant of lower estimated risk only where the difference exceeds ``margin`` standard errors of its
    block means; a variant that is not lower never replaces it; nothing below the first stage keeps None."""
    base = rng.normal(0.0, 1.0, (64, 64))
    noise = rng.normal(0.0, 1.0, (64, 64))

    def case(shift):
        losses = {"first": {0: base + 1.0}, WIENER: {0: base}, "wiener2": {0: base - shift + 0.5 * noise}}
        return {name: float(np.mean(loss[0])) for name, loss in losses.items()}, losses

    risks, losses = case(0.5)  # about 25 standard errors of 16 blocks
    assert choose_variant(risks, losses, 1)["chosen"] == "wiener2"
    risks, losses = case(0.5 * float(np.mean(noise)) + 1e-3)  # lower, but well within one standard error
    assert risks["wiener2"] < risks[WIENER] and choose_variant(risks, losses, 1)["chosen"] == WIENER
    assert choose_variant(risks, losses, 1, margin=0.0)["chosen"] == "wiener2"
    risks, losses = case(-0.5)
    assert choose_variant(risks, losses, 1) == {"chosen": WIENER, "standard_error": None}
    risks = {"first": 0.0, WIENER: 1.0, "wiener2": 2.0}
    assert choose_variant(risks, losses, 1)["chosen"] is None


@pytest.mark.parametrize("method", ["fixed-point", LINEAR])
def test_the_second_stage_reads_the_tunings_first_stage_outputs_and_estimates_the_same(method, rng):
    """Issue 55: `choose_second_stage` reads the chosen candidate's outputs that `tune_patches` computed on
    the same draws (``Tuned.first_outputs``) instead of running the first stage again; its risks equal
    those of the first stage run again to rounding (the tuning fitted each width at its largest rank)."""
    from kpca.images.second_stage import choose_second_stage
    from kpca.images.tuning import tune_patches

    clean = scene(48, 6)
    noisy = clean + rng.normal(0.0, 0.1, clean.shape)
    base = PatchSettings(patch=5, stride=2, tile=16)
    tuned = tune_patches(noisy, base, {"method": method}, noise=0.1)
    assert tuned.settings.method == method and tuned.seed == 0
    assert len(tuned.first_outputs) == DRAWS and all(d is not None for d in tuned.first_outputs)
    reused = choose_second_stage(noisy, tuned).second_stage["risks"]
    again = second_stage_risks(noisy, tuned.settings, tuned.noise)
    for key in ("first", WIENER):
        assert reused[key] == pytest.approx(again[key], rel=1e-9, abs=1e-12), key
    assert reused["chosen"] == again["chosen"]
    other_seed = choose_second_stage(noisy, tuned, seed=1).second_stage["risks"]  # other draws: run again
    assert other_seed == second_stage_risks(noisy, tuned.settings, tuned.noise, seed=1)


def test_a_wide_variant_is_estimated_at_the_stride_it_is_applied_at(rng):
    """Issue 55: the estimate (T1) of ``wiener-11x11`` is the loss of the stage as `apply_second_stage` applies
    it (every second patch, `wiener_stride`), on y1 against y2, draw by draw."""
    clean = smooth_scene(40, 3)
    noisy = clean + rng.normal(0.0, 0.1, clean.shape)
    settings = PatchSettings(patch=5, stride=1, method=LINEAR, width=None, n_components=2, tile=None)
    risks = second_stage_risks(noisy, settings, 0.1)
    s1, offset = 0.1 * np.sqrt(1.0 + ALPHA**2), 0.1**2 * (1.0 + 1.0 / ALPHA**2)
    total = 0.0
    for y1, target in recorruptions(noisy, 0.1, 0, DRAWS):
        first = linear_pca_denoise(y1, 5, 1, 2)
        out = apply_second_stage(y1, first, settings, s1, "wiener-11x11")
        total += float(np.mean((out - target) ** 2)) - offset
    assert risks["wiener-11x11"] == pytest.approx(total / DRAWS, rel=1e-9)
