"""An image's patches a band at a time: memory of a few bands, not of every patch at once.

`kpca.images.patches.extract_patches` cuts every patch of an image at once (m patches of n values: for a
1024 x 1024 image and 15 x 15 patches at stride 1, about 2 GB of float64) and
`kpca.images.patches.assemble_patches` averages them back from the same array. The denoisers instead
walk the grid of patch corners in bands of consecutive grid rows (`band_ranges`): `band_patches` cuts
one band, `PatchSum` adds its (denoised) patches into the image they average to, and the whole image's
patches never exist at once; `kpca.images.patches.patch_grid` is the grid of corners, computed without
cutting.

`PatchSum` averages as `assemble_patches` does, as a reference value plus the mean deviation from it
(exact where every patch covering a pixel gives it the same value), the reference here being the value
the first patch added gives the pixel; where patches disagree the two differ by rounding only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np

from kpca._threads import map_threads, serial_blas
from kpca.images.patches import PatchGrid, channels_of

T = TypeVar("T")

#: values (patches x values of a patch) cut at once by `band_ranges`' bands, at least one grid row
BAND_VALUES = 1 << 21


def band_ranges(grid: PatchGrid, values: int | None = None) -> list[range]:
    """Consecutive grid rows in bands of at most ``values`` values (patches times a patch's values;
    default `BAND_VALUES`; one grid row at least), covering every row of ``grid`` once, in order. O(rows)."""
    values = BAND_VALUES if values is None else int(values)
    per_row = max(len(grid.cols) * grid.n_features, 1)
    rows = max(1, values // per_row)
    return [range(start, min(start + rows, len(grid.rows))) for start in range(0, len(grid.rows), rows)]


def band_patches(image: np.ndarray, grid: PatchGrid, band: range, cols: slice = slice(None)) -> np.ndarray:
    """The patches of ``image`` at grid rows ``band`` and grid columns ``cols`` (a slice), one flattened
    patch per row in the order of `kpca.images.patches.extract_patches` (row-major over the corners,
    channels last within a patch). O(patches n) values copied."""
    image = np.asarray(image)
    p = grid.patch
    windows = np.lib.stride_tricks.sliding_window_view(image, (p, p), axis=(0, 1))
    corners = windows[np.ix_(grid.rows[band.start:band.stop], grid.cols[cols])]
    if image.ndim == 3:
        corners = np.moveaxis(corners, 2, -1)
    return np.ascontiguousarray(corners).reshape(-1, grid.n_features)


def band_moments(image: np.ndarray, grid: PatchGrid, bands: list[range]) -> tuple[np.ndarray, np.ndarray]:
    """The mean (n,) of ``image``'s patches and the sum (n, n) of their centred outer products, read band by
    band (two passes, each band on the caller's cores, `map_ordered`, and summed in order: the result does
    not depend on the threads). Cost O(m n^2) for m patches of n values; memory of a few bands."""
    mean = sum(map_ordered(lambda k: band_patches(image, grid, bands[k]).sum(axis=0), len(bands))) / grid.n_patches

    def gram_of(k: int) -> np.ndarray:
        centred = band_patches(image, grid, bands[k]) - mean
        return centred.T @ centred

    gram = np.zeros((grid.n_features, grid.n_features))
    for piece in map_ordered(gram_of, len(bands)):
        gram += piece
    return mean, gram


def tile_parts(grid: PatchGrid, tile: int | None) -> tuple[list[range], list[range]]:
    """The grid's rows and columns split into the parts of tiles of about ``tile`` x ``tile`` pixels (by
    the patches' corners; None: one part each): tile (i, j) is the patches of row part i and column part j,
    and a row part is a band of whole grid rows. O(rows + columns)."""
    H, W = grid.shape[:2]
    per_row = 1 if tile is None else max(1, int(round(H / tile)))
    per_col = 1 if tile is None else max(1, int(round(W / tile)))
    return _parts(len(grid.rows), per_row), _parts(len(grid.cols), per_col)


def _parts(n: int, count: int) -> list[range]:
    """``range(n)`` in ``min(count, n)`` consecutive parts of sizes differing by one at most, larger first
    (as `numpy.array_split`)."""
    count = max(1, min(count, n))
    size, extra = divmod(n, count)
    bounds = np.cumsum([0] + [size + (1 if k < extra else 0) for k in range(count)])
    return [range(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def map_ordered(work: Callable[[int], T], count: int, threads: int | None = None) -> Iterator[T]:
    """``work(k)`` for k = 0 .. count - 1, yielded in order, on ``threads`` threads (default
    `kpca._threads.map_threads`, the cores the caller may use) with BLAS on one thread each. At most two
    calls (tiles, bands) per thread are started ahead of the one the caller reads, so a caller that stops reading (its
    ``report`` raised `kpca.errors.Stopped`) leaves the rest unstarted. One thread: in the calling thread."""
    threads = max(1, min(int(threads or map_threads()), count))
    if threads == 1:
        yield from (work(k) for k in range(count))
        return
    pool = ThreadPoolExecutor(threads, thread_name_prefix="kpca-tiles")
    try:
        with serial_blas():
            ahead = deque(pool.submit(work, k) for k in range(min(count, 2 * threads)))
            for k in range(count):
                done = ahead.popleft().result()
                if k + len(ahead) + 1 < count:
                    ahead.append(pool.submit(work, k + len(ahead) + 1))
                yield done
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


class PatchSum:
    """Patches added band by band (`add`), averaged into an image of ``grid.shape`` (`image`).

    Memory: three arrays of the image's size (reference, deviation, count) and a mask. Each `add` costs
    O(patches n) in ``n`` vectorised steps."""

    def __init__(self, grid: PatchGrid, dtype=np.float64):
        self.grid = grid
        H, W = grid.shape[:2]
        channels = channels_of(grid.shape)
        self.reference = np.zeros((H, W, channels), dtype=dtype)
        self.deviation = np.zeros((H, W, channels), dtype=dtype)
        self.count = np.zeros((H, W, 1), dtype=np.int32)
        self.seen = np.zeros((H, W, 1), dtype=bool)

    def add(self, patches: np.ndarray, band: range) -> None:
        """Add the patches of grid rows ``band`` (all the grid's columns, in `band_patches`' order)."""
        grid, p = self.grid, self.grid.patch
        channels = channels_of(grid.shape)
        blocks = np.asarray(patches).reshape(len(band), len(grid.cols), p, p, channels)
        for block_rows, image_rows in _runs(grid.rows[band.start:band.stop], grid.stride):
            for block_cols, image_cols in _runs(grid.cols, grid.stride):
                for di in range(p):
                    for dj in range(p):
                        target = (_shift(image_rows, di), _shift(image_cols, dj))
                        values = blocks[block_rows, block_cols, di, dj]
                        new = ~self.seen[target]
                        np.copyto(self.reference[target], values, where=new)
                        self.seen[target] = True
                        self.deviation[target] += values - self.reference[target]
                        self.count[target] += 1

    def image(self) -> np.ndarray:
        """The mean of the values added at each pixel (0 where none was), of ``grid.shape``. O(pixels)."""
        out = self.reference + self.deviation / np.maximum(self.count, 1)
        return out.reshape(self.grid.shape)


def _runs(positions: np.ndarray, stride: int) -> Iterator[tuple[slice, slice]]:
    """``positions`` (ascending corners) as (index slice, image slice) pairs of equal steps: the regular
    run from the first corner with step ``stride``, then each corner off it alone."""
    n = len(positions)
    if n == 0:
        return
    first = int(positions[0])
    regular = 1
    while regular < n and positions[regular] == first + regular * stride:
        regular += 1
    yield slice(0, regular), slice(first, first + (regular - 1) * stride + 1, stride)
    for k in range(regular, n):
        yield slice(k, k + 1), slice(int(positions[k]), int(positions[k]) + 1)


def _shift(image_slice: slice, by: int) -> slice:
    return slice(image_slice.start + by, image_slice.stop + by, image_slice.step)


__all__ = ["BAND_VALUES", "PatchSum", "band_moments", "band_patches", "band_ranges", "map_ordered", "tile_parts"]
