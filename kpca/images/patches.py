"""Images as rows: overlapping patches, quadrants, rescaling, unit range, SNR.

Helpers for the image experiments of the seed papers, pure numpy:

* multipatch denoising (seed 000 §5.2, after Kim et al.): the image is split
  into four sub-images (`split_quadrants`); from each, ``11 x 11`` windows
  are taken on a grid with two-pixel spacing (`extract_patches`), each
  window is one row of the data matrix, and the denoised windows are put
  back by averaging the overlaps (`assemble_patches`);
* hyperresolution (seed 002 §4.2): a low-resolution image is scaled up by
  pixel replication (`upscale_replicate`) to the training resolution and cut
  into slightly overlapping windows that are reconstructed and averaged;
  `downscale_mean` makes the low-resolution input from a known original.

Images are arrays of shape (H, W) (grey) or (H, W, C) (channels last). A
patch of an (H, W, C) image is flattened in C order, i.e. row by row, the C
channels of a pixel adjacent: ``patch.reshape(p, p, C).ravel()``.

Patch geometry without cutting: `channels_of` an image shape, `patch_side` of rows of a patch
model, `patch_plan` (the patch side and the size of an upscaled image, for denoising an image
through such a model) and `patch_count` (the patches `extract_patches` cuts), each O(1), so that
a request's work is known before any is done.

A note on the seed's counts: 3844 = 62^2 windows per sub-image. On our grid
(positions ``0, 2, 4, ...`` plus the last one, ``H - 11``) a 128 x 128
quadrant of a 256 x 256 Lena gives 60 x 60 = 3600 windows; 62 positions need
a 133-pixel side. The paper does not say how its sub-images were cut (with
overlap, or from a larger image), so that count is not reproduced exactly.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np


class PatchGrid(NamedTuple):
    """Where `extract_patches` took its patches; all `assemble_patches` needs.

    Attributes
    ----------
    shape : tuple of int
        Shape of the source image, (H, W) or (H, W, C).
    patch : int
        Side of the square patch, in pixels.
    stride : int
        Grid spacing, in pixels.
    rows, cols : ndarray of int, shape (n_rows,) and (n_cols,)
        Top-left corners of the patches; patch ``k`` sits at
        ``(rows[k // n_cols], cols[k % n_cols])``.
    """

    shape: tuple
    patch: int
    stride: int
    rows: np.ndarray
    cols: np.ndarray

    @property
    def n_patches(self) -> int:
        """Number of patches, ``n_rows * n_cols``."""
        return len(self.rows) * len(self.cols)

    @property
    def n_features(self) -> int:
        """Length of a flattened patch, ``patch * patch * C`` (C = 1 for grey)."""
        return self.patch * self.patch * channels_of(self.shape)


class PatchPlan(NamedTuple):
    """How an image is cut for a patch model (`patch_plan`).

    Attributes
    ----------
    patch : int
        Side of the model's square patches, in pixels.
    height, width : int
        Size of the image that is cut: the input's, times the upscale factor.
    """

    patch: int
    height: int
    width: int


def channels_of(shape) -> int:
    """Channels C of an image of shape (H, W) (1) or (H, W, C). O(1)."""
    return int(shape[2]) if len(shape) == 3 else 1


def patch_side(n_features: int, channels: int = 1) -> int:
    """Side p of the square patches of ``channels`` channels whose flattened rows hold ``n_features``
    values, ``p * p * channels == n_features`` (the rows of `extract_patches`).

    Raises ValueError naming ``n_features`` when no such p exists. Cost O(1).
    """
    n_features, channels = int(n_features), int(channels)
    side = math.isqrt(n_features // channels)
    if side * side * channels != n_features:
        raise ValueError(f"n_features: {n_features} values are not a square patch of {channels} channel(s)")
    return side


def patch_plan(image_shape, n_features: int, upscale: int = 1) -> PatchPlan:
    """The patches an image of ``image_shape`` (H, W) or (H, W, C) is cut into by a model over rows of
    ``n_features`` values, after `upscale_replicate` by ``upscale``: the patch side (`patch_side` with
    the image's C) and the upscaled height and width.

    Raises ValueError (`patch_side`) when the rows are not square patches of C channels. Whether the
    patches fit the image, and a stride, are for the caller to check (`patch_count` counts them).
    Cost O(1).
    """
    upscale = _positive_int(upscale, "upscale")
    patch = patch_side(n_features, channels_of(image_shape))
    return PatchPlan(patch, int(image_shape[0]) * upscale, int(image_shape[1]) * upscale)


def patch_count(height: int, width: int, patch: int, stride: int) -> int:
    """Patches `extract_patches` cuts from a ``height`` x ``width`` image (the grid of step ``stride``
    plus the last position on each axis), computed without cutting them; ``1 <= patch <= min(height,
    width)``. Cost O(1)."""
    per_axis = [-(-(side - patch) // stride) + 1 for side in (height, width)]
    return per_axis[0] * per_axis[1]


def _check_image(image) -> np.ndarray:
    image = np.asarray(image)
    if image.ndim not in (2, 3):
        raise ValueError(f"image: expected shape (H, W) or (H, W, C), got {image.shape}")
    return image


def _positive_int(value, name: str) -> int:
    if int(value) != value or value < 1:
        raise ValueError(f"{name}: must be an integer >= 1, got {value}")
    return int(value)


def _positions(size: int, patch: int, stride: int) -> np.ndarray:
    """``0, stride, 2 stride, ...`` up to ``size - patch``, which is always included."""
    last = size - patch
    pos = np.arange(0, last + 1, stride)
    if pos[-1] != last:
        pos = np.append(pos, last)
    return pos


def _runs(positions: np.ndarray, stride: int) -> list[tuple[slice, slice]]:
    """``positions`` (from `_positions`) as (patch indices, image slice) pairs: the regular part
    ``0, stride, ...`` and, where the grid does not land on the last position, that position alone."""
    n = len(positions)
    regular = n if positions[-1] == (n - 1) * stride else n - 1
    runs = [(slice(0, regular), slice(0, (regular - 1) * stride + 1, stride))]
    if regular < n:
        last = int(positions[-1])
        runs.append((slice(regular, n), slice(last, last + 1)))
    return runs


def _shift(image_slice: slice, by: int) -> slice:
    return slice(image_slice.start + by, image_slice.stop + by, image_slice.step)


def extract_patches(image: np.ndarray, patch: int, stride: int) -> tuple[np.ndarray, PatchGrid]:
    """Square patches on a regular grid, one flattened patch per row.

    Top-left corners are ``0, stride, 2 stride, ...`` along each axis, plus
    the last position ``H - patch`` (``W - patch``) when the grid does not
    land on it, so that every pixel is in at least one patch.

    Parameters
    ----------
    image : ndarray of shape (H, W) or (H, W, C)
    patch : int
        Side of the square patch, ``1 <= patch <= min(H, W)``.
    stride : int
        Grid spacing, ``1 <= stride <= patch`` (a larger stride would leave
        pixels uncovered).

    Returns
    -------
    patches : ndarray of shape (n_rows * n_cols, patch * patch * C), image's dtype
        Row ``i * n_cols + j`` is the patch at ``(grid.rows[i], grid.cols[j])``,
        flattened in C order (channels last); C = 1 for a grey image.
    grid : PatchGrid
        Geometry to pass to `assemble_patches`.

    Cost: a copy of ``m p^2 C`` values (m patches).
    """
    image = _check_image(image)
    grid = patch_grid(image.shape, patch, stride)
    windows = np.lib.stride_tricks.sliding_window_view(image, (grid.patch, grid.patch), axis=(0, 1))
    selected = windows[np.ix_(grid.rows, grid.cols)]  # (n_rows, n_cols, [C,] p, p): one copy, of the patches only
    if image.ndim == 3:
        selected = np.moveaxis(selected, 2, -1)  # channels last within a patch
    patches = np.ascontiguousarray(selected).reshape(grid.n_patches, -1)
    return patches, grid


def patch_grid(shape: tuple, patch: int, stride: int) -> PatchGrid:
    """The grid of corners `extract_patches` cuts an image of ``shape`` (H, W) or (H, W, C) into, with its
    checks (ValueError naming ``patch`` or ``stride``), without cutting any patch. O(H + W)."""
    patch = _positive_int(patch, "patch")
    if int(stride) != stride or stride < 1:
        raise ValueError(f"stride: must be an integer >= 1, got {stride}")
    stride = int(stride)
    H, W = shape[:2]
    if patch > H or patch > W:
        raise ValueError(f"patch: side {patch} exceeds the image size {H} x {W}")
    if stride > patch:
        raise ValueError(f"stride: {stride} > patch {patch} would leave pixels uncovered")
    return PatchGrid(tuple(shape), patch, stride, _positions(H, patch, stride), _positions(W, patch, stride))


def assemble_patches(patches: np.ndarray, grid: PatchGrid) -> np.ndarray:
    """Put patches back into an image, averaging where they overlap.

    Parameters
    ----------
    patches : ndarray of shape (grid.n_patches, grid.n_features)
        Patches in the order of `extract_patches`, possibly modified.
    grid : PatchGrid
        As returned by `extract_patches`.

    Returns
    -------
    ndarray of shape grid.shape, floating (patches' dtype if floating, else float64)
        Each pixel is the mean of the values that the patches covering it
        give it. For unmodified patches this is exactly the source image.

    Cost: O(m p^2 C) for m patches, in ``p^2`` vectorised passes.

    Maintenance note. A plain ``sum / count`` is not an exact inverse in
    floating point (``(x + x + x) / 3 != x`` for about one value in six).
    We therefore average deviations from a reference value ``r`` (the value
    the last covering patch gives the pixel): ``r + sum(v - r) / count``,
    equal to the mean in exact arithmetic, exact when all ``v`` agree, and,
    as a shifted sum, no less accurate than the plain mean otherwise.
    """
    patches = np.asarray(patches)
    shape, p = tuple(grid.shape), grid.patch
    channels = channels_of(shape)
    if patches.shape != (grid.n_patches, grid.n_features):
        raise ValueError(
            f"patches: expected shape ({grid.n_patches}, {grid.n_features}) for this grid, got {patches.shape}"
        )
    dtype = patches.dtype if np.issubdtype(patches.dtype, np.floating) else np.float64
    blocks = patches.astype(dtype, copy=False).reshape(len(grid.rows), len(grid.cols), p, p, channels)
    H, W = shape[:2]
    reference = np.zeros((H, W, channels), dtype=dtype)
    deviation = np.zeros((H, W, channels), dtype=dtype)
    # The corners are a regular grid plus at most one extra last position per axis, so each offset
    # (di, dj) reaches the image through at most four strided views (no fancy indexing); within one
    # offset the target pixels are distinct, so assignment and += are safe.
    parts = [(a, b, c, d) for a, b in _runs(grid.rows, grid.stride) for c, d in _runs(grid.cols, grid.stride)]
    for di in range(p):
        for dj in range(p):
            for block_rows, image_rows, block_cols, image_cols in parts:
                reference[_shift(image_rows, di), _shift(image_cols, dj)] = blocks[block_rows, block_cols, di, dj]
    for di in range(p):
        for dj in range(p):
            for block_rows, image_rows, block_cols, image_cols in parts:
                target = (_shift(image_rows, di), _shift(image_cols, dj))
                deviation[target] += blocks[block_rows, block_cols, di, dj] - reference[target]
    row_count = np.zeros(H, dtype=np.int64)
    col_count = np.zeros(W, dtype=np.int64)
    for d in range(p):
        row_count[grid.rows + d] += 1
        col_count[grid.cols + d] += 1
    count = np.multiply.outer(row_count, col_count)[:, :, None].astype(dtype)
    image = reference + deviation / count
    return image.reshape(shape)


def split_quadrants(image: np.ndarray) -> list[np.ndarray]:
    """Four sub-images: top-left, top-right, bottom-left, bottom-right (copies).

    Rows are cut at ``ceil(H / 2)`` and columns at ``ceil(W / 2)``, so for an
    odd size the top (left) parts are one pixel larger. Requires H, W >= 2.
    """
    image = _check_image(image)
    H, W = image.shape[:2]
    if H < 2 or W < 2:
        raise ValueError(f"image: needs at least 2 x 2 pixels to split, got {H} x {W}")
    h, w = (H + 1) // 2, (W + 1) // 2
    return [image[:h, :w].copy(), image[:h, w:].copy(), image[h:, :w].copy(), image[h:, w:].copy()]


def upscale_replicate(image: np.ndarray, factor: int) -> np.ndarray:
    """Scale up by pixel replication: each pixel becomes a ``factor x factor`` block.

    Seed 002 §4.2 stretches the low-resolution input to the training
    resolution this way before projecting it. Returns an array of shape
    (factor H, factor W[, C]) in the image's dtype. Cost O(factor^2 H W C).
    """
    image = _check_image(image)
    factor = _positive_int(factor, "factor")
    return np.repeat(np.repeat(image, factor, axis=0), factor, axis=1)


def downscale_mean(image: np.ndarray, factor: int) -> np.ndarray:
    """Scale down by block means over ``factor x factor`` blocks.

    The image is first cropped (bottom and right) to a multiple of `factor`.
    Returns shape (H // factor, W // factor[, C]), floating (float64 for
    integer input). ``downscale_mean(upscale_replicate(x, f), f)`` equals
    ``x`` up to rounding.
    """
    image = _check_image(image)
    factor = _positive_int(factor, "factor")
    H, W = image.shape[:2]
    h, w = H // factor, W // factor
    if h == 0 or w == 0:
        raise ValueError(f"factor: {factor} exceeds the image size {H} x {W}")
    cropped = image[: h * factor, : w * factor]
    blocks = cropped.reshape((h, factor, w, factor) + image.shape[2:])
    return blocks.mean(axis=(1, 3))


class UnitInfo(NamedTuple):
    """How `to_unit` scaled an image: its dtype and the value mapped to 1."""

    dtype: np.dtype
    scale: float


def to_unit(image: np.ndarray) -> tuple[np.ndarray, UnitInfo]:
    """Float64 copy of an image on the unit range [0, 1].

    Unsigned integer images are divided by their type's maximum (255 for
    uint8, 65535 for uint16). Floating images must already lie in [0, 1]
    (a float image on 0..255 raises instead of being silently clipped).

    Parameters
    ----------
    image : ndarray of any shape, unsigned integer or floating dtype

    Returns
    -------
    unit : ndarray of the same shape, float64, values in [0, 1]
    info : UnitInfo
        Pass to `from_unit` to get the original dtype back.
    """
    image = np.asarray(image)
    dtype = image.dtype
    if np.issubdtype(dtype, np.unsignedinteger):
        scale = float(np.iinfo(dtype).max)
        return image.astype(np.float64) / scale, UnitInfo(dtype, scale)
    if np.issubdtype(dtype, np.floating):
        unit = image.astype(np.float64)
        if unit.size and not (np.all(np.isfinite(unit)) and unit.min() >= 0.0 and unit.max() <= 1.0):
            raise ValueError(
                f"image: a floating image must lie in [0, 1] and be finite, got range "
                f"[{np.nanmin(unit)}, {np.nanmax(unit)}]; rescale it first"
            )
        return unit, UnitInfo(dtype, 1.0)
    raise ValueError(f"image: dtype {dtype} not supported; use an unsigned integer or floating image")


def from_unit(image: np.ndarray, info: UnitInfo) -> np.ndarray:
    """Back from [0, 1] to the dtype recorded by `to_unit`.

    Values are clipped to [0, 1] (a denoised or noisy image can leave the
    range), scaled by ``info.scale``, and, for integer types, rounded to the
    nearest integer. ``from_unit(*to_unit(x))`` equals ``x`` exactly for
    uint8, uint16 and float images in [0, 1].
    """
    values = np.clip(np.asarray(image, dtype=np.float64), 0.0, 1.0)
    if np.issubdtype(info.dtype, np.integer):
        return np.rint(values * info.scale).astype(info.dtype)
    return (values * info.scale).astype(info.dtype)


def snr_db(clean: np.ndarray, estimate: np.ndarray, centered: bool = False) -> float:
    """Signal-to-noise ratio of an estimate, in decibels.

    Definition used here::

        SNR = 10 log10( ||clean||^2 / ||clean - estimate||^2 )

    with sums over all pixels (and channels). With ``centered=True`` the
    clean image's mean is subtracted in the numerator only, i.e. ``||clean -
    mean(clean)||^2`` (the error is unchanged); this is the variance-based
    SNR of much of the denoising literature.

    Seed 000 §5.2 reports SNRs of 13.46 and 13.49 for denoised Lena (Kim et
    al.: 14.09) without defining SNR: neither the formula, nor whether it is
    in dB, nor whether the images were mean-removed is stated. On an image
    in [0, 1] the mean dominates ``||clean||^2``, so the plain SNR is several
    dB above the centered one for the same error; compare with the paper's
    numbers knowing that either could be meant.

    Returns
    -------
    float
        ``inf`` when the estimate is exact, ``-inf`` when the (possibly
        centred) signal energy is zero but the error is not.
    """
    clean = np.asarray(clean, dtype=np.float64)
    estimate = np.asarray(estimate, dtype=np.float64)
    if clean.shape != estimate.shape:
        raise ValueError(f"estimate: shape {estimate.shape} differs from clean's {clean.shape}")
    signal = clean - clean.mean() if centered else clean
    signal_energy = float(np.sum(signal * signal))
    error = clean - estimate
    error_energy = float(np.sum(error * error))
    if error_energy == 0.0:
        return float("inf")
    if signal_energy == 0.0:
        return float("-inf")
    return float(10.0 * np.log10(signal_energy / error_energy))
