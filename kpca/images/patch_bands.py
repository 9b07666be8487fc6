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

import numba
import numpy as np

from kpca._threads import map_threads, serial_blas
from kpca.images.patches import PatchGrid, channels_of

T = TypeVar("T")

#: values (patches x values of a patch) cut at once by `band_ranges`' bands, at least one grid row
BAND_VALUES = 1 << 21
#: bands an image's grid rows are cut into at least (where it has as many rows): the parts its cores share
BANDS = 8


def band_ranges(grid: PatchGrid, values: int | None = None) -> list[range]:
    """Consecutive grid rows in bands of at most ``values`` values (patches times a patch's values;
    default `BAND_VALUES`; one grid row at least), and `BANDS` of them at least where there are as many rows (so
    that a small image's bands still share the cores, `map_ordered`); sizes differing by one at most, covering
    every row of ``grid`` once, in order. O(rows)."""
    values = BAND_VALUES if values is None else int(values)
    per_row = max(len(grid.cols) * grid.n_features, 1)
    n_rows = len(grid.rows)
    if n_rows == 0:
        return []
    rows = max(1, values // per_row)
    return _parts(n_rows, max(-(-n_rows // rows), min(BANDS, n_rows)))


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


def replaced_in_bands(image: np.ndarray, grid: PatchGrid, replace: Callable[[np.ndarray], np.ndarray],
                      report: Callable[[int, int], None] | None = None) -> np.ndarray:
    """The image whose patches (of ``grid``) are ``replace(P)`` of its patches P, overlaps averaged, as
    `kpca.images.patches.assemble_patches` of ``replace`` of every patch would give where ``replace`` treats each
    patch on its own (to rounding): the patches cut and replaced a band at a time (`band_ranges`), in this thread,
    ``report(done, total)`` after each band. Memory of a band of patches, not of all. Cost: ``replace``'s, plus
    O(patches n)."""
    bands = band_ranges(grid)
    total = PatchSum(grid)
    for k, band in enumerate(bands):
        total.add(replace(band_patches(image, grid, band)), band)
        if report is not None:
            report(k + 1, len(bands))
    return total.image()


class PatchSum:
    """Patches added band by band (`add`), averaged into an image of ``grid.shape`` (`image`).

    Memory: three arrays of the image's size (reference, deviation, count) and a mask. Each `add` costs
    O(patches n), in one jitted pass without the GIL (`_add_patches`)."""

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
        blocks = np.ascontiguousarray(patches, dtype=self.reference.dtype)
        blocks = blocks.reshape(len(band), len(grid.cols), p, p, channels_of(grid.shape))
        _add_patches(blocks, np.ascontiguousarray(grid.rows[band.start:band.stop], dtype=np.int64),
                     np.ascontiguousarray(grid.cols, dtype=np.int64), self.reference, self.deviation, self.count,
                     self.seen)

    def image(self) -> np.ndarray:
        """The mean of the values added at each pixel (0 where none was), of ``grid.shape``. O(pixels)."""
        out = self.reference + self.deviation / np.maximum(self.count, 1)
        return out.reshape(self.grid.shape)


@numba.njit(nogil=True, cache=True)
def _add_patches(blocks, rows, cols, reference, deviation, count, seen):  # pragma: no cover - jitted
    """`PatchSum.add`'s sums: each patch (corner ``rows[i], cols[j]``) in turn, row-major, adds each of its values
    to the pixel it covers: the pixel's reference (the first value it is given), deviation from it and count.
    One pass over the patches, without the GIL. O(patches n)."""
    p, channels = blocks.shape[2], blocks.shape[4]
    for i in range(blocks.shape[0]):
        for j in range(blocks.shape[1]):
            top, left = rows[i], cols[j]
            for di in range(p):
                for dj in range(p):
                    r, c = top + di, left + dj
                    if not seen[r, c, 0]:
                        seen[r, c, 0] = True
                        for ch in range(channels):
                            reference[r, c, ch] = blocks[i, j, di, dj, ch]
                    for ch in range(channels):
                        deviation[r, c, ch] += blocks[i, j, di, dj, ch] - reference[r, c, ch]
                    count[r, c, 0] += 1


__all__ = ["BAND_VALUES", "BANDS", "PatchSum", "band_moments", "band_patches", "band_ranges", "map_ordered",
           "replaced_in_bands", "tile_parts"]
