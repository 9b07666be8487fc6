"""The tuner's probe (issue 55): candidates estimated on the stride-2 patches through tile models fitted on
the request's stride-1 patches (`kpca.images.tuning.probe_settings`, `denoise_candidates`' ``fit_stride``)."""

from __future__ import annotations

import numpy as np
import pytest

from kpca.images.denoising import (Candidate, PatchSettings, corner_span, denoise_candidates, fit_patch_model,
                                   preimages, training_rows)
from kpca.images.patch_bands import tile_parts
from kpca.images.patches import assemble_patches, extract_patches, patch_grid
from kpca.images.second_stage import choose_second_stage, second_stage_risks
from kpca.images.tuning import TUNING_STRIDE, probe_settings, tune_patches


def noisy_scene(side: int = 40, seed: int = 0) -> np.ndarray:
    y, x = np.mgrid[0:side, 0:side] / (side - 1.0)
    clean = 0.5 + 0.3 * np.sin(7 * x) * np.cos(5 * y) + 0.2 * (x > 0.5)
    return clean + np.random.default_rng(seed).normal(0.0, 0.1, clean.shape)


@pytest.mark.parametrize("shape, tile", [((40, 40), 16), ((37, 53), 12), ((20, 20), None)])
def test_the_fitting_grid_is_cut_into_the_same_tiles(shape, tile):
    """Each tile's fitting corners are those in the span of its own corners: the spans of a tile's parts
    partition the finer grid, in order, and the same grid gives the parts themselves."""
    coarse, fine = patch_grid(shape, 5, 2), patch_grid(shape, 5, 1)
    for corners, fines, parts in zip((coarse.rows, coarse.cols), (fine.rows, fine.cols), tile_parts(coarse, tile)):
        spans = [corner_span(corners, part, fines) for part in parts]
        assert [i for span in spans for i in span] == list(range(len(fines)))
        for part, span in zip(parts, spans):
            assert fines[span.start] == corners[part.start] and len(span) > 0
            assert corner_span(corners, part, corners) == part


@pytest.mark.parametrize("method", ["fixed-point", "kwok-tsang", "learned"])
def test_stride_two_patches_go_through_the_model_of_the_stride_one_sample(method):
    """One tile: the model of a sample of the stride-1 patches (as the request fits it) denoises the stride-2
    patches, which are averaged back: equal to doing it by hand, and not the model of the stride-2 patches."""
    image = noisy_scene()
    settings = PatchSettings(patch=5, stride=2, width=1.0, n_components=4, method=method, tile=None)
    sigma = settings.sigma(0.1)
    candidate = Candidate(4, method, {"n_iter": 1} if method == "fixed-point" else {})
    got = denoise_candidates(image, settings, 0.1, [candidate], max_rows=300, seed=3, fit_stride=1)[candidate.key()]
    pool, _ = extract_patches(image, 5, 1)
    model = fit_patch_model(pool[training_rows(np.arange(len(pool)), 300, 3)], sigma, 4)
    P, grid = extract_patches(image, 5, 2)
    want = assemble_patches(preimages(model, P, method, candidate.options), grid)
    assert np.abs(got - want).max() <= 1e-10
    alone = denoise_candidates(image, settings, 0.1, [candidate], max_rows=300, seed=3)[candidate.key()]
    assert np.abs(alone - want).max() > 1e-6, "fitted on the stride-2 patches, the model differs"


def test_the_tuner_estimates_at_the_probe_stride_and_the_second_stage_reads_its_outputs():
    image = noisy_scene(48)
    base = PatchSettings(patch=5, stride=1, tile=24)
    assert probe_settings(base).stride == TUNING_STRIDE == 2
    assert probe_settings(PatchSettings(patch=5, stride=3)).stride == 3  # a coarser request keeps its own
    assert probe_settings(PatchSettings(patch=1, stride=1)).stride == 1  # never past the patch side
    tuned = tune_patches(image, base, {"n_components": 2}, noise=0.1)
    assert tuned.stride == 2 and tuned.settings.stride == 1  # estimated at the probe, chosen for the request
    staged = choose_second_stage(image, tuned)
    again = second_stage_risks(image, tuned.settings, 0.1, first_outputs=None, stride=tuned.stride)
    for key in ("first", "wiener"):  # the kept outputs are the probe's: recomputing them gives the same risks
        assert again[key] == pytest.approx(staged.second_stage["risks"][key], rel=1e-9)


@pytest.mark.parametrize("shape", [(256, 256), (1024, 768), (200, 900)])
def test_tuning_windows_are_centred_in_the_cells_of_an_even_grid(shape):
    """Issue 55: each window sits at the centre of its cell of an even grid over the image (a stratified sample),
    not against the image's edges: inside the image, apart, and as many as fit in the pixels."""
    from kpca.images.tuning import TUNING_PIXELS, tuning_windows

    windows = tuning_windows(shape, 32)
    H, W = shape
    side = windows[0][0].stop - windows[0][0].start
    assert side == 64 and len(windows) == TUNING_PIXELS // side**2
    per_axis = int(np.ceil(np.sqrt(len(windows))))
    for rows, cols in windows:
        assert 0 <= rows.start and rows.stop <= H and 0 <= cols.start and cols.stop <= W
        centre = ((rows.start + rows.stop) / 2 / H * per_axis, (cols.start + cols.stop) / 2 / W * per_axis)
        assert all(abs(c - (np.floor(c) + 0.5)) < 0.02 or side > extent / per_axis
                   for c, extent in zip(centre, shape)), (rows, cols)
    corners = {(r.start, c.start) for r, c in windows}
    assert len(corners) == len(windows) and (0, 0) not in corners
