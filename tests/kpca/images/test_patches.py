import numpy as np
import pytest

from bench.denoise_image import join_quadrants
from kpca.images.patches import (
    assemble_patches,
    channels_of,
    downscale_mean,
    extract_patches,
    from_unit,
    patch_count,
    patch_plan,
    patch_side,
    snr_db,
    split_quadrants,
    to_unit,
    upscale_replicate,
)

SHAPES = [(20, 20), (23, 17), (11, 11), (16, 31, 3), (13, 12, 1), (14, 19, 4)]


def _naive_patches(image, patch, rows, cols):
    return np.array([image[r : r + patch, c : c + patch].ravel() for r in rows for c in cols])


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("patch,stride", [(1, 1), (5, 2), (11, 2), (4, 4), (6, 5), (3, 1)])
def test_round_trip_is_exact(shape, patch, stride, rng):
    if patch > min(shape[:2]):
        pytest.skip("patch larger than image")
    image = rng.random(shape)
    patches, grid = extract_patches(image, patch, stride)
    channels = shape[2] if len(shape) == 3 else 1
    assert patches.shape == (len(grid.rows) * len(grid.cols), patch * patch * channels)
    assert patches.shape == (grid.n_patches, grid.n_features)
    np.testing.assert_array_equal(patches, _naive_patches(image, patch, grid.rows, grid.cols))
    out = assemble_patches(patches, grid)
    assert out.shape == image.shape and out.dtype == np.float64
    np.testing.assert_array_equal(out, image)  # exact, not just close


def test_grid_positions_include_last_and_cover_every_pixel():
    _, grid = extract_patches(np.zeros((30, 24)), 11, 2)
    assert list(grid.rows) == list(range(0, 20, 2)) + [19]
    assert list(grid.cols) == [0, 2, 4, 6, 8, 10, 12, 13]
    _, grid = extract_patches(np.zeros((31, 24)), 11, 2)
    assert grid.rows[-1] == 20 and list(grid.rows) == list(range(0, 21, 2))  # grid lands on the last
    for shape, patch, stride in [(30, 24), 11, 2], [(17, 40), 4, 4], [(9, 10), 3, 3], [(128, 128), 11, 2]:
        ones, grid = extract_patches(np.ones(shape), patch, stride)
        covered = np.zeros(shape)
        for k, (i, j) in enumerate((i, j) for i in grid.rows for j in grid.cols):
            covered[i : i + patch, j : j + patch] += ones[k].reshape(patch, patch)
        assert covered.min() >= 1


def test_seed_000_lena_quadrant_count():
    # 128 x 128 quadrant, 11 x 11 windows, two-pixel spacing: 60 x 60 on our grid
    # (the paper's 3844 = 62^2 needs 133 pixels a side; see the module docstring).
    patches, grid = extract_patches(np.zeros((128, 128)), 11, 2)
    assert patches.shape == (3600, 121)
    patches, _ = extract_patches(np.zeros((133, 133)), 11, 2)
    assert patches.shape == (3844, 121)


def test_colour_patch_layout_is_row_major_channels_last():
    image = np.arange(5 * 6 * 3, dtype=np.float64).reshape(5, 6, 3)
    patches, grid = extract_patches(image, 2, 2)
    # second patch: rows 0-1, columns 2-3
    assert grid.cols[1] == 2
    np.testing.assert_array_equal(patches[1], image[0:2, 2:4, :].ravel())
    np.testing.assert_array_equal(patches[1][:3], image[0, 2])  # a pixel's channels are adjacent


def test_constant_image_and_averaging_of_modified_patches(rng):
    patches, grid = extract_patches(np.full((25, 21), 0.3), 7, 3)
    np.testing.assert_array_equal(assemble_patches(patches, grid), np.full((25, 21), 0.3))

    image = rng.random((25, 21, 2))
    patches, grid = extract_patches(image, 7, 3)
    np.testing.assert_allclose(assemble_patches(2.0 * patches, grid), 2.0 * image, rtol=1e-15)
    np.testing.assert_allclose(assemble_patches(patches + 1.0, grid), image + 1.0, rtol=1e-15)

    # Patch k filled with the value k: each pixel gets the mean of the ids of the patches covering it.
    ids = np.repeat(np.arange(grid.n_patches, dtype=float)[:, None], grid.n_features, axis=1)
    out = assemble_patches(ids, grid)
    p = grid.patch
    total = np.zeros((25, 21))
    count = np.zeros((25, 21))
    for k, (i, j) in enumerate((i, j) for i in grid.rows for j in grid.cols):
        total[i : i + p, j : j + p] += k
        count[i : i + p, j : j + p] += 1
    np.testing.assert_allclose(out[..., 0], total / count, rtol=1e-13)
    np.testing.assert_allclose(out[..., 1], total / count, rtol=1e-13)
    assert not np.allclose(out[..., 0], out[0, 0, 0])  # genuinely varying


def test_assemble_keeps_float32_and_checks_shape(rng):
    image = rng.random((12, 12)).astype(np.float32)
    patches, grid = extract_patches(image, 5, 2)
    out = assemble_patches(patches, grid)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, image)
    with pytest.raises(ValueError, match="patches"):
        assemble_patches(patches[:-1], grid)


def test_extract_errors_name_the_argument():
    with pytest.raises(ValueError, match="patch"):
        extract_patches(np.zeros((10, 20)), 11, 2)
    with pytest.raises(ValueError, match="patch"):
        extract_patches(np.zeros((20, 10)), 11, 2)
    with pytest.raises(ValueError, match="stride"):
        extract_patches(np.zeros((20, 20)), 5, 0)
    with pytest.raises(ValueError, match="stride"):
        extract_patches(np.zeros((20, 20)), 5, 6)  # would leave gaps
    with pytest.raises(ValueError, match="image"):
        extract_patches(np.zeros(20), 5, 1)


@pytest.mark.parametrize("shape", [(8, 8), (9, 7), (2, 3), (5, 5, 3), (128, 131, 1)], ids=str)
def test_quadrants_round_trip(shape, rng):
    image = rng.random(shape)
    parts = split_quadrants(image)
    assert len(parts) == 4
    H, W = shape[:2]
    assert parts[0].shape[:2] == ((H + 1) // 2, (W + 1) // 2)
    assert parts[3].shape[:2] == (H // 2, W // 2)
    assert sum(p.size for p in parts) == image.size
    np.testing.assert_array_equal(join_quadrants(parts, shape), image)
    parts[0][...] = -1.0  # copies, not views
    assert image.min() >= 0


def test_quadrants_errors():
    with pytest.raises(ValueError, match="image"):
        split_quadrants(np.zeros((1, 5)))
    parts = split_quadrants(np.zeros((6, 6)))
    with pytest.raises(ValueError, match="parts"):
        join_quadrants(parts, (7, 6))
    with pytest.raises(ValueError, match="parts"):
        join_quadrants(parts[:3], (6, 6))


def test_upscale_and_downscale(rng):
    image = np.array([[1, 2], [3, 4]], dtype=np.uint8)
    np.testing.assert_array_equal(
        upscale_replicate(image, 2), np.array([[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]])
    )
    assert upscale_replicate(image, 3).dtype == np.uint8

    colour = rng.random((5, 7, 3))
    big = upscale_replicate(colour, 4)
    assert big.shape == (20, 28, 3)
    np.testing.assert_array_equal(big, np.kron(colour, np.ones((4, 4, 1))))
    np.testing.assert_allclose(downscale_mean(big, 4), colour, rtol=1e-15)

    x = np.arange(7 * 5, dtype=float).reshape(7, 5)
    small = downscale_mean(x, 2)  # cropped to 6 x 4
    assert small.shape == (3, 2)
    assert small[0, 0] == np.mean([0, 1, 5, 6])
    assert small[2, 1] == np.mean(x[4:6, 2:4])
    with pytest.raises(ValueError, match="factor"):
        downscale_mean(x, 0)
    with pytest.raises(ValueError, match="factor"):
        downscale_mean(x, 6)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("shape", [(16, 16), (4, 8, 3)], ids=str)
def test_to_unit_round_trip_integer(dtype, shape, rng):
    top = np.iinfo(dtype).max
    image = rng.integers(0, top, size=shape, endpoint=True).astype(dtype)
    image.flat[0], image.flat[1] = 0, top
    unit, info = to_unit(image)
    assert unit.dtype == np.float64 and unit.shape == shape
    assert unit.min() == 0.0 and unit.max() == 1.0
    back = from_unit(unit, info)
    assert back.dtype == dtype and back.shape == shape
    np.testing.assert_array_equal(back, image)


def test_to_unit_every_uint16_value():
    image = np.arange(65536, dtype=np.uint16)
    np.testing.assert_array_equal(from_unit(*to_unit(image)), image)


@pytest.mark.parametrize("shape", [(16, 16), (4, 8, 3)], ids=str)
def test_to_unit_float32(shape, rng):
    image = rng.random(shape).astype(np.float32)
    unit, info = to_unit(image)
    assert unit.dtype == np.float64
    back = from_unit(unit, info)
    assert back.dtype == np.float32 and back.shape == shape
    np.testing.assert_array_equal(back, image)


def test_from_unit_clips_and_rounds():
    _, info = to_unit(np.zeros(3, dtype=np.uint8))
    out = from_unit(np.array([-0.3, 0.5, 1.7, 2.4 / 255, 2.6 / 255]), info)
    np.testing.assert_array_equal(out, [0, 128, 255, 2, 3])
    _, info = to_unit(np.zeros(3, dtype=np.float32))
    np.testing.assert_array_equal(from_unit(np.array([-1.0, 0.25, 3.0]), info), [0.0, 0.25, 1.0])


def test_to_unit_rejects_out_of_range_floats_and_signed_ints():
    with pytest.raises(ValueError, match="image"):
        to_unit(np.array([0.0, 255.0]))
    with pytest.raises(ValueError, match="image"):
        to_unit(np.array([0.5, np.nan]))
    with pytest.raises(ValueError, match="image"):
        to_unit(np.array([1, 2], dtype=np.int16))


def test_snr_db_known_values(rng):
    clean = rng.random((32, 32))
    assert snr_db(clean, clean) == float("inf")
    # Error energy exactly 1% of the signal energy -> 20 dB.
    direction = rng.normal(size=clean.shape)
    direction *= np.sqrt(0.01 * np.sum(clean**2) / np.sum(direction**2))
    assert snr_db(clean, clean + direction) == pytest.approx(20.0, abs=1e-10)
    assert snr_db(clean, clean - direction) == pytest.approx(20.0, abs=1e-10)
    # Halving the error raises SNR by 10 log10(4).
    assert snr_db(clean, clean + direction / 2) == pytest.approx(20.0 + 10 * np.log10(4), abs=1e-10)
    # Plain vs centred: constant image 2 with error energy n -> 10 log10(4); centred signal is 0.
    flat = np.full(100, 2.0)
    est = flat + np.where(np.arange(100) % 2, 1.0, -1.0)
    assert snr_db(flat, est) == pytest.approx(10 * np.log10(4.0))
    assert snr_db(flat, est, centered=True) == float("-inf")
    # Centred removes only the signal's mean.
    x = np.array([1.0, 3.0])  # mean 2, centred energy 2, plain energy 10
    assert snr_db(x, x + np.array([1.0, 0.0]), centered=True) == pytest.approx(10 * np.log10(2.0))
    assert snr_db(x, x + np.array([1.0, 0.0])) == pytest.approx(10.0)
    with pytest.raises(ValueError, match="estimate"):
        snr_db(clean, clean[:-1])


@pytest.mark.parametrize("shape", [(23, 17), (16, 31, 3)], ids=str)
def test_stride_one_matches_scikit_learn(shape, rng):
    """At stride 1 our grid is scikit-learn's: the same patches in the same order, and the same
    average of (modified) overlapping patches. Ours also takes strides > 1, which sklearn does not."""
    from sklearn.feature_extraction.image import extract_patches_2d, reconstruct_from_patches_2d

    image = rng.normal(size=shape)
    patches, grid = extract_patches(image, 5, 1)
    theirs = extract_patches_2d(image, (5, 5))
    np.testing.assert_array_equal(patches, theirs.reshape(len(theirs), -1))
    noisy = patches + rng.normal(size=patches.shape)  # overlaps now disagree
    expected = reconstruct_from_patches_2d(noisy.reshape(theirs.shape), shape)
    np.testing.assert_allclose(assemble_patches(noisy, grid), expected, rtol=0, atol=1e-12)


# ---------------------------------------------------------------- geometry without cutting
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("patch,stride", [(1, 1), (5, 2), (11, 2), (4, 4), (6, 5), (3, 1), (11, 11)])
def test_patch_count_is_what_extract_patches_cuts(shape, patch, stride):
    if patch > min(shape[:2]) or stride > patch:
        pytest.skip("extract_patches refuses these")
    patches, grid = extract_patches(np.zeros(shape), patch, stride)
    assert patch_count(shape[0], shape[1], patch, stride) == grid.n_patches == patches.shape[0]
    assert grid.n_features == patch * patch * channels_of(shape)


def test_patch_side_of_square_patches_only():
    assert [patch_side(n) for n in (1, 4, 64, 121)] == [1, 2, 8, 11]
    assert [patch_side(n, 3) for n in (3, 12, 363)] == [1, 2, 11]
    for n, channels in ((2, 1), (63, 1), (64, 3), (121, 3), (1, 3)):
        with pytest.raises(ValueError, match="n_features"):
            patch_side(n, channels)


def test_patch_plan_gives_the_side_and_the_upscaled_size():
    """What /denoise-image checks before any work: an 8 x 8 grey model on a 30 x 20 image upscaled 3 times;
    a colour model's rows on a colour image; grey rows that are not square patches of a colour image."""
    assert patch_plan((30, 20), 64, 3) == (8, 90, 60)
    assert patch_plan((30, 20, 3), 192) == (8, 30, 20)
    assert patch_plan((30, 20, 3), 192).patch == patch_side(192, 3)
    with pytest.raises(ValueError, match="n_features"):
        patch_plan((30, 20, 3), 64)
    with pytest.raises(ValueError, match="upscale"):
        patch_plan((30, 20), 64, 0)

