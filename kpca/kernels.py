"""Kernel functions evaluated in blocks: GEMM tiles, each mapped by a jitted function.

A block of ``b`` kernel rows against ``m`` points costs the matrix product
``X @ Y.T`` (``2 b m n`` flops, at the BLAS rate) plus ``O(b m)`` element-wise
work by numba kernels; for the radial kernels both are done tile by tile so
the block is written to memory once (`kernel_block_into`), or never, when
all that is wanted is its product with a small matrix on the left
(`kernel_left_product_into`, the solvers' update). Supported kernels
(``x, y`` in R^n):

==============  =============================================  ====================
type            k(x, y)                                        parameters
==============  =============================================  ====================
``gaussian``    exp(-||x - y||^2 / (2 sigma^2))                sigma > 0
``laplacian``   exp(-||x - y|| / sigma)   (Euclidean norm)     sigma > 0
``polynomial``  (gamma <x, y> + offset)^degree                 degree >= 1, offset >= 0, gamma > 0
``linear``      <x, y>                                         none
``tanh``        tanh(gamma <x, y> + offset)                    gamma > 0, offset
==============  =============================================  ====================

The Laplacian kernel uses the Euclidean (not the L1) distance so that it, too,
is one GEMM away; it is positive definite like the L1 form. ``tanh`` is not
positive semi-definite in general; kernel PCA then only sees the leading
positive part of its spectrum.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

import numba
import numpy as np

from kpca._fastexp import FASTMATH_FLAGS, exp_nonpositive
from kpca._threads import blas_limit, map_threads

KERNEL_TYPES = ("gaussian", "laplacian", "polynomial", "linear", "tanh")


@dataclass(frozen=True)
class KernelSpec:
    """A kernel and its parameters; ``from_dict``/``to_dict`` round-trip JSON.

    Only the parameters of the chosen ``type`` are meaningful; ``to_dict``
    drops the others.
    """

    type: str = "gaussian"
    sigma: float = 1.0
    degree: int = 2
    offset: float = 1.0
    gamma: float = 1.0

    _PARAMS = {
        "gaussian": ("sigma",),
        "laplacian": ("sigma",),
        "polynomial": ("degree", "offset", "gamma"),
        "linear": (),
        "tanh": ("gamma", "offset"),
    }

    def __post_init__(self):
        if self.type not in KERNEL_TYPES:
            raise ValueError(f"kernel.type: unknown kernel {self.type!r}; choose one of {KERNEL_TYPES}")
        if self.type in ("gaussian", "laplacian") and not self.sigma > 0:
            raise ValueError(f"kernel.sigma: must be > 0, got {self.sigma}")
        if self.type == "polynomial":
            if int(self.degree) != self.degree or self.degree < 1:
                raise ValueError(f"kernel.degree: must be an integer >= 1, got {self.degree}")
            if not self.offset >= 0:
                raise ValueError(f"kernel.offset: must be >= 0, got {self.offset}")
        if self.type in ("polynomial", "tanh") and not self.gamma > 0:
            raise ValueError(f"kernel.gamma: must be > 0, got {self.gamma}")

    @classmethod
    def from_dict(cls, spec: dict) -> "KernelSpec":
        """Build from ``{"type": "gaussian", "sigma": 3.0}``; unknown keys raise ValueError."""
        spec = dict(spec)
        kind = spec.pop("type", "gaussian")
        allowed = cls._PARAMS.get(kind)
        if allowed is None:
            raise ValueError(f"kernel.type: unknown kernel {kind!r}; choose one of {KERNEL_TYPES}")
        extra = set(spec) - set(allowed)
        if extra:
            raise ValueError(f"kernel.{sorted(extra)[0]}: not a parameter of the {kind} kernel")
        return cls(type=kind, **spec)

    def to_dict(self) -> dict:
        """JSON-able dict with ``type`` and the parameters this kernel uses."""
        values = asdict(self)
        return {"type": self.type, **{k: values[k] for k in self._PARAMS[self.type]}}

    @property
    def needs_norms(self) -> bool:
        """Whether the kernel needs the squared norms of its arguments."""
        return self.type in ("gaussian", "laplacian")


def squared_norms(X: np.ndarray) -> np.ndarray:
    """Row-wise squared Euclidean norms, shape (m,), in X's dtype. Cost O(m n)."""
    return np.einsum("ij,ij->i", X, X)


def kernel_block(
    X: np.ndarray,
    Y: np.ndarray,
    spec: KernelSpec,
    x_sqnorms: np.ndarray | None = None,
    y_sqnorms: np.ndarray | None = None,
    threads: int | None = None,
) -> np.ndarray:
    """Kernel matrix block ``K[i, j] = k(X[i], Y[j])``.

    Parameters
    ----------
    X : ndarray of shape (b, n)
    Y : ndarray of shape (m, n), same dtype as X
    spec : KernelSpec
    x_sqnorms, y_sqnorms : ndarray of shape (b,) and (m,), optional
        Precomputed squared norms (Gaussian and Laplacian only).
    threads : int, optional
        Threads sharing the tiles, default `map_threads`.

    Returns
    -------
    ndarray of shape (b, m), dtype of X. Cost: one GEMM (2 b m n flops) plus
    O(b m) element-wise work (see `kernel_block_into`).
    """
    out = np.empty((X.shape[0], Y.shape[0]), dtype=X.dtype)
    return kernel_block_into(out, 0, X, Y, spec, x_sqnorms, y_sqnorms, threads=threads)


def kernel_block_into(
    out: np.ndarray,
    col0: int,
    X: np.ndarray,
    Y: np.ndarray,
    spec: KernelSpec,
    x_sqnorms: np.ndarray | None = None,
    y_sqnorms: np.ndarray | None = None,
    row_shift: np.ndarray | None = None,
    col_shift: np.ndarray | None = None,
    threads: int | None = None,
) -> np.ndarray:
    """Write ``k(X[i], Y[j]) + row_shift[i] + col_shift[j]`` into ``out[i, col0 + j]``.

    ``out`` is a C-contiguous (b, >= col0 + m) float array, so that a caller
    assembling rows against a chunked data set writes each chunk's block in
    place; the optional shifts (shapes (b,) and (m,)) fold the centring of
    eq. 5 into the same pass. The kernel is computed in X's dtype and
    written in out's (float32 work into float64 rows costs nothing extra).
    Returns ``out``.

    Gaussian and Laplacian blocks are computed tile by tile: a GEMM into an
    L2-sized buffer, then a jitted map that turns the buffer into kernel
    values and writes them once to ``out``, so the block crosses the memory
    bus once instead of three times (GEMM write, map read and write). Tiles
    are shared among ``threads`` (default `map_threads`) threads, each
    calling a single-threaded BLAS. Cost: 2 b m n flops plus O(b m).
    """
    if not (out.flags.c_contiguous and out.dtype.kind == "f" and out.shape[0] == X.shape[0]
            and out.shape[1] >= col0 + Y.shape[0]):
        raise ValueError("out: expected a C-contiguous float array with room for the block")
    dtype = out.dtype
    kind = spec.type
    if kind in ("gaussian", "laplacian"):
        fn, args = _radial_arguments(X, Y, spec, dtype, x_sqnorms, y_sqnorms, row_shift, col_shift)
        _radial_tiles(fn, out, col0, X, Y, *args, _threads(threads))
        return out
    out[:, col0 : col0 + Y.shape[0]] = _gram_kernel(X, Y, spec, dtype, row_shift, col_shift)
    return out


def kernel_left_product_into(
    acc: np.ndarray,
    col0: int,
    C: np.ndarray,
    X: np.ndarray,
    Y: np.ndarray,
    spec: KernelSpec,
    x_sqnorms: np.ndarray | None = None,
    y_sqnorms: np.ndarray | None = None,
    row_shift: np.ndarray | None = None,
    col_shift: np.ndarray | None = None,
    threads: int | None = None,
    T: np.ndarray | None = None,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """``acc[:, J] = T @ start[:, J] + C @ B`` for the columns ``J = col0 .. col0 + m``, with
    ``B[i, j] = k(X[i], Y[j]) + row_shift[i] + col_shift[j]`` never stored.

    ``acc`` is a C-contiguous (d, >= col0 + m) float array and ``C`` (d, b);
    ``T`` (d, d) defaults to the identity and ``start`` (shaped as ``acc``)
    to ``acc`` itself, so by default C @ B is added to ``acc``. The kernel is
    computed in X's dtype and multiplied with C in C's dtype (float32 C: a
    float32 GEMM, accumulated into ``acc``'s dtype). Returns ``acc``.

    Gaussian and Laplacian blocks go tile by tile as in `kernel_block_into`,
    but each tile, once mapped into a second buffer, is multiplied by its
    columns of C there and then: B never reaches memory, and neither the
    kernel values nor the product stream through it; ``T @ start`` is
    formed panel by panel too. Threads claim column panels (all row tiles
    of a panel, in order), so each column of ``acc`` is written by one
    thread, and the result does not depend on the thread count. Cost:
    ``2 b m (n + d)`` (+ ``2 d^2 m`` with T) flops plus O(b m) element-wise
    work; memory O(d m) besides the tiles. (Measured at l = 20,000, n = 64,
    r = 16: a kha-smd pass, whose update is this product with d = 32 plus
    small-matrix work, took 1.22-1.41x (median 1.33) the time of the pass's
    kernel rows formed alone, against 1.45-1.95x (median 1.73) with the rows
    formed and then multiplied; bench/kha_speed.py.)
    """
    d, b, m = C.shape[0], X.shape[0], Y.shape[0]
    if not (acc.flags.c_contiguous and acc.dtype.kind == "f" and acc.shape[0] == d and acc.shape[1] >= col0 + m
            and C.shape[1] == b):
        raise ValueError(f"acc: expected a C-contiguous float array of {d} rows with room for {m} columns "
                         f"from column {col0}, and C of shape ({d}, {b})")
    start = acc if start is None else start
    if start.shape != acc.shape or (T is not None and T.shape != (d, d)):
        raise ValueError(f"T, start: expected shapes ({d}, {d}) and {acc.shape}")
    dtype = C.dtype
    if spec.type in ("gaussian", "laplacian"):
        fn, args = _radial_arguments(X, Y, spec, dtype, x_sqnorms, y_sqnorms, row_shift, col_shift)
        _radial_panels(fn, acc, col0, np.ascontiguousarray(C), X, Y, *args, _threads(threads), T, start)
        return acc
    cols = slice(col0, col0 + m)
    first = start[:, cols] if T is None else T @ start[:, cols]
    acc[:, cols] = first + C @ _gram_kernel(X, Y, spec, dtype, row_shift, col_shift)
    return acc


def _threads(threads: int | None) -> int:
    """Threads for the tiles: ``threads`` if given, else `map_threads`."""
    return map_threads() if threads is None else max(1, int(threads))


def _radial_arguments(X, Y, spec, dtype, x_sqnorms, y_sqnorms, row_shift, col_shift):
    """The jitted tile map of a radial kernel and its arguments after the tile:
    norms in X's dtype, shifts in ``dtype`` (zeros where not given), the scale."""
    work = X.dtype
    xn = squared_norms(X) if x_sqnorms is None else x_sqnorms
    yn = squared_norms(Y) if y_sqnorms is None else y_sqnorms
    a = np.zeros(X.shape[0], dtype) if row_shift is None else row_shift
    c = np.zeros(Y.shape[0], dtype) if col_shift is None else col_shift
    norms = [np.ascontiguousarray(v, dtype=work) for v in (xn, yn)]
    shifts = [np.ascontiguousarray(v, dtype=dtype) for v in (a, c)]
    scale = -0.5 / spec.sigma**2 if spec.type == "gaussian" else -1.0 / spec.sigma
    return _RADIAL_TILES[spec.type], (*norms, *shifts, work.type(scale))


def _gram_kernel(X, Y, spec, dtype, row_shift, col_shift) -> np.ndarray:
    """The (b, m) block of a kernel of ``<x, y>`` (linear, polynomial, tanh) in ``dtype``, shifted."""
    work = X.dtype
    kind = spec.type
    G = X @ Y.T
    if kind == "polynomial":
        _polynomial_from_gram(G, work.type(spec.gamma), work.type(spec.offset), int(spec.degree))
    elif kind == "tanh":
        _tanh_from_gram(G, work.type(spec.gamma), work.type(spec.offset))
    G = G.astype(dtype, copy=False)
    if row_shift is not None:
        G += np.asarray(row_shift, dtype)[:, None]
    if col_shift is not None:
        G += np.asarray(col_shift, dtype)[None, :]
    return G


_TILE_BYTES = 2**19  # one GEMM tile, kept in a core's L2 cache while it is mapped
_TILE_ROWS = 128  # with _TILE_BYTES, the best of a sweep on a 2-core Zen 3 (bench/kernel_rows.py)
# Tiles of `_radial_panels`: all rows of a block (up to 1024) by 1 MiB. Of 128 x 512, 256 x 256,
# 256 x 512 and 1024 rows by 2^18-2^21 bytes, this was fastest at l = 20,000, n = 64, b = 838
# (a pass of products at 0.82-1.01x the time of forming its rows; fewer, larger panels also
# leave a thread less waiting for the last one of each data chunk).
_PANEL_ROWS = 1024
_PANEL_BYTES = 2**20
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _radial_tiles(fn, out, col0, X, Y, xn, yn, a, c, scale, threads) -> None:
    """Run the fused GEMM + map ``fn`` over the tiles of a (b, m) block.

    Tiles are (<= `_TILE_ROWS` rows) x (columns filling `_TILE_BYTES`); threads
    take the next tile in turn. The maps and BLAS release the GIL, so
    plain Python threads run in parallel without numba's threading layer
    (which must not be entered from several threads at once, as dask worker
    threads would). With more than one thread BLAS is held to one thread
    meanwhile: each of ours already keeps a core busy.
    """
    b, m = X.shape[0], Y.shape[0]
    rows, width = _tile_shape(b, X.itemsize)
    tiles = [(r, j) for j in range(0, m, width) for r in range(0, b, rows)]

    def run(part):
        buf = np.empty(rows * width, dtype=X.dtype)
        for k in part:
            r, j = tiles[k]
            r1, j1 = min(r + rows, b), min(j + width, m)
            tile = buf[: (r1 - r) * (j1 - j)].reshape(r1 - r, j1 - j)
            np.matmul(X[r:r1], Y[j:j1].T, out=tile)
            fn(tile, out, r, col0 + j, xn[r:r1], yn[j:j1], a[r:r1], c[j:j1], scale)

    _shared(len(tiles), run, threads)


def _radial_panels(fn, acc, col0, C, X, Y, xn, yn, a, c, scale, threads, T, start) -> None:
    """``acc[:, J] = T @ start[:, J] + C @ B[:, J]`` over the column panels J of a (b, m) radial block B.

    A panel is one tile width of columns; its row tiles are computed (GEMM),
    mapped into a second buffer in C's dtype (the map must not write over
    the GEMM tile it reads: in place the tiles took 1.3-1.5x as long), and
    multiplied by C's columns while both buffers are in cache. See
    `kernel_left_product_into`.
    """
    d, b, m = C.shape[0], X.shape[0], Y.shape[0]
    rows, width = _panel_shape(b, X.itemsize)

    def run(part):
        gram = np.empty(rows * width, dtype=X.dtype)
        values = np.empty(rows * width, dtype=C.dtype)
        product = np.empty(d * width, dtype=C.dtype)
        for k in part:
            j = k * width
            j1 = min(j + width, m)
            w = j1 - j
            prod = product[: d * w].reshape(d, w)
            panel = slice(col0 + j, col0 + j1)
            if T is not None:
                np.matmul(T, start[:, panel], out=acc[:, panel])
            elif start is not acc:
                acc[:, panel] = start[:, panel]
            for r in range(0, b, rows):
                r1 = min(r + rows, b)
                tile = gram[: (r1 - r) * w].reshape(r1 - r, w)
                mapped = values[: (r1 - r) * w].reshape(r1 - r, w)
                np.matmul(X[r:r1], Y[j:j1].T, out=tile)
                fn(tile, mapped, 0, 0, xn[r:r1], yn[j:j1], a[r:r1], c[j:j1], scale)
                np.matmul(C[:, r:r1], mapped, out=prod)
                acc[:, panel] += prod

    _shared(-(-m // width), run, threads)


def _tile_shape(b: int, itemsize: int) -> tuple[int, int]:
    """(rows, columns) of a GEMM tile: <= `_TILE_ROWS` rows, columns filling `_TILE_BYTES`."""
    rows = max(1, min(b, _TILE_ROWS))  # b = 0: no row tiles (and no division by zero)
    return rows, max(64, _TILE_BYTES // (rows * itemsize))


def _panel_shape(b: int, itemsize: int) -> tuple[int, int]:
    """(rows, columns) of a tile of `_radial_panels`."""
    rows = max(1, min(b, _PANEL_ROWS))
    return rows, max(16, _PANEL_BYTES // (rows * itemsize))


def _shared(n_items: int, run, threads: int) -> None:
    """``run(items)`` on up to ``threads`` threads of a shared pool, items 0 .. n_items-1 split among them.

    Items are handed out one at a time (a shared counter; next() on it is
    atomic under the GIL), so a thread slowed down by other work on its core
    -- a solver update running alongside -- takes fewer of them instead of
    holding the whole block back. Meanwhile BLAS is held to one thread: each
    of ours already keeps a core busy.
    """
    global _pool
    threads = min(threads, n_items)
    if threads <= 1:
        run(range(n_items))
        return
    with _pool_lock:
        if _pool is None or _pool._max_workers < threads:
            _pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kpca-tiles")
    shared = itertools.count()

    def claimed():  # one generator per thread over the shared counter
        while (k := next(shared)) < n_items:
            yield k

    with blas_limit(1):
        futures = [_pool.submit(run, claimed()) for _ in range(threads)]
        for f in futures:
            f.result()


def kernel_diagonal(X: np.ndarray, spec: KernelSpec) -> np.ndarray:
    """``k(x_i, x_i)`` for every row of X, shape (m,). Cost O(m n)."""
    if spec.type in ("gaussian", "laplacian"):
        return np.ones(X.shape[0], dtype=X.dtype)
    sq = squared_norms(X)
    if spec.type == "linear":
        return sq
    if spec.type == "polynomial":
        return (spec.gamma * sq + spec.offset) ** spec.degree
    return np.tanh(spec.gamma * sq + spec.offset)


# Jitted tile maps (compiled per precision of the tile and of out): T holds the
# GEMM tile X[r0:] Y[j:]^T; each entry becomes a kernel value (distance, then
# the vectorisable exp of kpca._fastexp), is shifted, and is written once to
# out[r0 + i, c0 + j]. Plain-numpy twins live in tests/naive.py. Rows are
# sliced inside so that numba sees contiguous arrays and vectorises the loops.


@numba.njit(inline="always", fastmath=FASTMATH_FLAGS)
def _squared_distance(xi, yj, g, zero):
    """``max(|x|^2 + |y|^2 - 2 <x, y>, 0)``: clipped, as rounding can make it negative."""
    return max(xi + yj - (g + g), zero)


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH_FLAGS)
def _gaussian_tile(T, out, r0, c0, xn, yn, a, c, scale):
    zero = scale - scale  # in the tile's precision
    for i in range(T.shape[0]):
        t, o, xi, ai = T[i], out[r0 + i, c0 : c0 + T.shape[1]], xn[i], a[i]
        for j in range(t.shape[0]):
            o[j] = exp_nonpositive(scale * _squared_distance(xi, yn[j], t[j], zero)) + (ai + c[j])


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH_FLAGS)
def _laplacian_tile(T, out, r0, c0, xn, yn, a, c, scale):
    zero = scale - scale
    for i in range(T.shape[0]):
        t, o, xi, ai = T[i], out[r0 + i, c0 : c0 + T.shape[1]], xn[i], a[i]
        for j in range(t.shape[0]):
            o[j] = exp_nonpositive(scale * np.sqrt(_squared_distance(xi, yn[j], t[j], zero))) + (ai + c[j])


_RADIAL_TILES = {"gaussian": _gaussian_tile, "laplacian": _laplacian_tile}


@numba.njit(nogil=True, cache=True)
def _polynomial_from_gram(G, gamma, offset, degree):
    b, m = G.shape
    for i in range(b):
        for j in range(m):
            G[i, j] = (gamma * G[i, j] + offset) ** degree


@numba.njit(nogil=True, cache=True)
def _tanh_from_gram(G, gamma, offset):
    b, m = G.shape
    for i in range(b):
        for j in range(m):
            G[i, j] = np.tanh(gamma * G[i, j] + offset)
