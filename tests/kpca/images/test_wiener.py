"""The empirical Wiener second stage (`kpca.images.wiener`, issue 27)."""

from __future__ import annotations

import numpy as np
import pytest

from kpca.images.denoising import linear_pca_denoise
from kpca.images.wiener import wiener_gains, wiener_stage

from tests.kpca.images.test_denoise_tuning import mse, scene


@pytest.mark.parametrize("shrink, factor", [("patch", 0.5), ("component", 0.9)])
def test_a_perfect_pilot_beats_linear_pca_of_the_noisy_image(shrink, factor, rng):
    """With the clean image as pilot and the true noise level, the Wiener stage is clearly better than
    the best linear PCA of the noisy patches (peeking at the clean image, in the test only): measured
    4.9 dB per patch and coefficient, 0.66 dB per component, one basis for the whole image. (On
    `smooth_scene` 40 x 40 it is +0.4 and -0.6 dB: linear PCA at rank 1 is already near the truth.)"""
    clean = scene(40, 3)
    noisy = clean + rng.normal(0.0, 0.1, clean.shape)
    out = wiener_stage(noisy, clean, 7, 1, 0.1, shrink=shrink)
    best_linear = min(mse(linear_pca_denoise(noisy, 7, 1, r), clean) for r in (1, 2, 4, 8))
    assert mse(out, clean) < factor * best_linear


@pytest.mark.parametrize("shrink", ["patch", "component"])
@pytest.mark.parametrize("tile", [None, 16])
def test_without_noise_the_noisy_image_is_returned(shrink, tile, rng):
    """s -> 0: every gain tends to 1, so the output is y (exactly at s = 0; nearly at a tiny s with a
    pilot whose patches span every direction)."""
    noisy = scene(32, 1) + rng.normal(0.0, 0.05, (32, 32))
    pilot = noisy + rng.normal(0.0, 0.01, noisy.shape)
    assert np.allclose(wiener_stage(noisy, pilot, 5, 1, 0.0, shrink=shrink, tile=tile), noisy, atol=1e-12)
    assert np.allclose(wiener_stage(noisy, pilot, 5, 2, 1e-7, shrink=shrink, tile=tile), noisy, atol=1e-6)


@pytest.mark.parametrize("shrink", ["patch", "component"])
def test_the_float32_stage_is_the_float64_stage_to_its_rounding(shrink, rng):
    """The second stage shrinks in float32 (`kpca.images.second_stage.WIENER_DTYPE`), estimated and applied: its output
    is float64 and within float32's rounding of the float64 stage's (pixels in [0, 1]), far below any
    noise level the estimate separates; and it is not the float64 stage itself (the precision is used)."""
    clean = scene(48, 3)
    noisy = clean + rng.normal(0.0, 0.1, clean.shape)
    pilot = linear_pca_denoise(noisy, 7, 1, 4)
    exact = wiener_stage(noisy, pilot, 7, 1, 0.1, shrink=shrink)
    single = wiener_stage(noisy, pilot, 7, 1, 0.1, shrink=shrink, dtype=np.float32)
    assert single.dtype == np.float64
    assert 0.0 < np.abs(single - exact).max() < 1e-5


def test_gains_are_the_wiener_filter_of_the_pilots_energy():
    c_p = np.array([[3.0, 0.0], [1.0, -2.0]])
    lam = np.array([4.0, 1.0])
    assert np.allclose(wiener_gains(c_p, lam, 1.0, "patch"), [[0.9, 0.0], [0.5, 0.8]])
    assert np.allclose(wiener_gains(c_p, lam, 1.0, "component"), [0.8, 0.5])
    with pytest.raises(ValueError, match="shrink"):
        wiener_gains(c_p, lam, 1.0, "pixel")


def test_a_pilot_of_another_shape_is_refused():
    with pytest.raises(ValueError, match="pilot"):
        wiener_stage(np.zeros((16, 16)), np.zeros((16, 15)), 5, 1, 0.1)


def test_the_second_stage_is_kept_only_where_its_risk_is_lower(monkeypatch):
    """`choose_second_stage` reads (T1) of the first stage alone and followed by the Wiener stage, with
    the tuning's draws, and keeps the Wiener stage only where its risk is the lower."""
    from kpca.images import second_stage
    from kpca.images.denoising import PatchSettings
    from kpca.images.tuning import Tuned

    tuned = Tuned(PatchSettings(method="linear", width=None, n_components=2, tile=16), 0.1, True)
    for first, wiener, expected in ((0.002, 0.001, "wiener"), (0.001, 0.002, None), (0.001, 0.001, None)):
        monkeypatch.setattr(second_stage, "second_stage_risks",
                            lambda *a, f=first, w=wiener, **k: {"first": f, "wiener": w, "pixels": 1, "draws": 3})
        chosen = second_stage.choose_second_stage(np.zeros((16, 16)), tuned)
        assert chosen.second_stage["stage"] == expected and chosen.summary()["second_stage"] == expected
        assert chosen.settings == tuned.settings


def test_second_stage_risks_follow_the_tuning_draws(rng):
    """On a synthetic scene with linear PCA as first stage the Wiener stage's estimated risk is lower
    (measured 0.00056 against 0.00094), so it is kept, and
    the estimate of the first stage alone is (T1) of `kpca.images.tuning.recorrupted_risks` with the same draws."""
    from kpca.images.denoising import PatchSettings, linear_pca_denoise
    from kpca.images.second_stage import choose_second_stage, second_stage_risks
    from kpca.images.tuning import DRAWS, Tuned, recorrupted_risks
    clean = scene(48, 2)
    noisy = clean + rng.normal(0.0, 0.1, clean.shape)
    settings = PatchSettings(method="linear", width=None, n_components=1, tile=32)
    risks = second_stage_risks(noisy, settings, 0.1)
    assert risks["wiener"] < risks["first"]
    reference, _ = recorrupted_risks(lambda y1, _s1: {"first": linear_pca_denoise(y1, 7, 1, 1)}, noisy, 0.1,
                                     draws=DRAWS)
    assert risks["first"] == pytest.approx(reference["first"], rel=1e-9)
    chosen = choose_second_stage(noisy, Tuned(settings, 0.1, False))
    assert chosen.second_stage["stage"] == "wiener"
