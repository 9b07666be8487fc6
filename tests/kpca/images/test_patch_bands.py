"""kpca.images.patch_bands: an image's patches a band at a time give what all of them at once give, and the
denoisers that read them so hold a band of patches, not every patch (issue 55: images up to the pixel limit)."""

import tracemalloc

import numpy as np
import pytest

from kpca.images import patch_bands
from kpca.images.denoising import linear_pca_candidates
from kpca.images.patch_bands import PatchSum, band_patches, band_ranges, tile_parts
from kpca.images.patches import assemble_patches, extract_patches, patch_grid
from kpca.images.wiener import wiener_stage, wiener_stages

SHAPES = [((37, 29), 7, 1), ((37, 29), 7, 3), ((40, 33, 3), 5, 2), ((16, 16), 16, 1), ((20, 9), 3, 3)]


@pytest.mark.parametrize(("shape", "patch", "stride"), SHAPES)
@pytest.mark.parametrize("values", [1, 500, 10**9], ids=["a-row-a-band", "a-few-rows", "an-eighth-of-the-rows"])
def test_bands_cut_and_average_as_the_whole_grid_does(shape, patch, stride, values):
    rng = np.random.default_rng(0)
    image = rng.random(shape)
    patches, grid = extract_patches(image, patch, stride)
    assert patch_grid(shape, patch, stride)._replace(rows=None, cols=None) == grid._replace(rows=None, cols=None)
    bands = band_ranges(grid, values)
    assert [r for band in bands for r in band] == list(range(len(grid.rows)))
    assert len(bands) >= min(patch_bands.BANDS, len(grid.rows)), "a small image's rows still shared by the cores"
    parts = [band_patches(image, grid, band) for band in bands]
    np.testing.assert_array_equal(np.concatenate(parts), patches)
    unchanged, changed = PatchSum(grid), PatchSum(grid)
    moved = patches + rng.normal(0.0, 0.1, patches.shape)
    start = 0
    for band, part in zip(bands, parts):
        unchanged.add(part, band)
        changed.add(moved[start:start + len(part)], band)
        start += len(part)
    np.testing.assert_array_equal(unchanged.image(), image)  # exact, as assemble_patches is
    np.testing.assert_allclose(changed.image(), assemble_patches(moved, grid), rtol=0, atol=1e-15)


def test_tiles_are_parts_of_whole_grid_rows_and_columns():
    grid = patch_grid((100, 70), 7, 1)
    rows, cols = tile_parts(grid, 32)
    assert [len(r) for r in rows] == [32, 31, 31] and [len(c) for c in cols] == [32, 32]
    assert tile_parts(grid, None) == ([range(94)], [range(64)])
    band = band_patches(np.arange(100 * 70.0).reshape(100, 70), grid, rows[1], slice(cols[1].start, cols[1].stop))
    assert band.shape == (31 * 32, 49) and band[0, 0] == grid.rows[32] * 70 + grid.cols[32]


def test_wiener_stages_share_a_basis_and_equal_one_stage_per_level():
    rng = np.random.default_rng(1)
    x = np.linspace(0.0, 1.0, 50)
    clean = 0.5 + 0.3 * np.sin(7 * x)[:, None] * np.cos(5 * x)[None, :]
    noisy, pilot = clean + rng.normal(0, 0.1, clean.shape), clean + rng.normal(0, 0.02, clean.shape)
    for tile in (None, 16):
        both = wiener_stages(noisy, pilot, 7, 1, [0.1, 0.08], tile=tile)
        for noise, got in zip((0.1, 0.08), both):
            np.testing.assert_array_equal(got, wiener_stage(noisy, pilot, 7, 1, noise, tile=tile))
        assert not np.allclose(both[0], both[1])


def peak_bytes(call) -> int:
    """The most memory numpy (traced) held at once during ``call()``."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_whole_image_stages_hold_a_band_of_patches_not_every_patch(monkeypatch):
    """A 384 x 384 image: its 15 x 15 patches at stride 1 are 246 MB of float64, its 7 x 7 ones 56 MB. With
    bands of 2**16 values (a few in flight on the caller's threads) the Wiener stage with one basis for the
    image and linear PCA hold a small part."""
    monkeypatch.setattr(patch_bands, "BAND_VALUES", 1 << 16)
    rng = np.random.default_rng(2)
    noisy = rng.random((384, 384))
    pilot = noisy + rng.normal(0, 0.01, noisy.shape)
    wide = patch_grid(noisy.shape, 15, 1).n_patches * 225 * 8
    assert peak_bytes(lambda: wiener_stage(noisy, pilot, 15, 1, 0.1)) < wide / 10
    narrow = patch_grid(noisy.shape, 7, 1).n_patches * 49 * 8
    assert peak_bytes(lambda: linear_pca_candidates(noisy, 7, 1, [2, 8])) < narrow / 4


def test_the_image_warm_up_runs_every_kind_of_candidate():
    """`kpca.images.warmup.warm_images` (a worker's start, ``make warm``): the fixed point and Kwok-Tsang ran."""
    from kpca.images.warmup import warm_images

    assert warm_images() == ["fixed-point/2", "kwok-tsang/2"]


@pytest.mark.parametrize(("method", "options"), [("fixed-point", {"n_iter": 1}), ("fixed-point", {"n_iter": 3}),
                                                 ("kwok-tsang", {}), ("gradient", {"n_iter": 3}), ("learned", {})])
def test_a_stored_models_answer_in_bands_is_its_answer_on_every_patch(method, options, monkeypatch):
    """`replaced_in_bands` (the model route's answer, issue 55): every pre-image method treats each patch on its
    own, so a model's pre-images of an image's patches band by band, averaged back, are those of every patch at
    once to rounding; with bands of 2**11 values a 40 x 36 image's 5 x 5 patches are cut into 18."""
    from kpca.images.denoising import fit_patch_model
    from kpca.images.tile_preimages import TilePreimages

    monkeypatch.setattr(patch_bands, "BAND_VALUES", 1 << 11)
    rng = np.random.default_rng(4)
    image = rng.random((40, 36))
    patches, grid = extract_patches(image, 5, 1)
    model = fit_patch_model(patches[rng.choice(len(patches), 150, replace=False)], sigma=1.2, n_components=6)
    learned: dict = {}

    def replace(P):
        return TilePreimages(model, P, learned=learned).preimages(4, method, options)

    assert len(patch_bands.band_ranges(grid)) > 8
    want = assemble_patches(replace(patches), grid)
    got = patch_bands.replaced_in_bands(image, grid, replace)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert not np.allclose(got, image)
