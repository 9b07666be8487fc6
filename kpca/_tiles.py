"""Kernel blocks tile by tile: a GEMM into a cache-sized buffer, then a jitted map, on a few threads.

The machinery behind `kpca.kernels.kernel_block_into` and
`kpca.kernels.kernel_left_product_into` for the radial kernels (Gaussian,
Laplacian), and the jitted maps that turn a Gram matrix into kernel values
for the dot-product kernels (polynomial, tanh). `kpca.kernels.KERNELS` names
which map each kernel uses; nothing else here knows a kernel by name.

A tile is ``X[r:r1] @ Y[j:j1].T`` computed into a buffer small enough to stay
in a core's cache while a jitted map turns it into kernel values (distance,
the vectorisable exp of `kpca._fastexp`, the centring shifts of eq. 5) and
writes them once: the block crosses the memory bus once instead of three
times (GEMM write, map read and write), or never, when only its product with
a small matrix on the left is wanted (`run_panels`). The maps and BLAS
release the GIL, so plain Python threads share the tiles (numba's threading
layer must not be entered from several threads at once, as dask worker
threads would). The tile shapes were chosen by bench/kernel_rows.py and
bench/kha_speed.py (results in bench/results/).
"""

from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from kpca._fastexp import FASTMATH_FLAGS, exp_nonpositive
from kpca._threads import blas_limit

_TILE_BYTES = 2**19  # one GEMM tile, kept in a core's L2 cache while it is mapped
_TILE_ROWS = 128  # with _TILE_BYTES, the best of a sweep of shapes (bench/kernel_rows.py)
# Tiles of `run_panels`: all rows of a block (up to 1024) by 1 MiB, the fastest of the panel
# shapes swept by bench/kha_speed.py; fewer, larger panels also leave a thread less waiting
# for the last one of each data chunk.
_PANEL_ROWS = 1024
_PANEL_BYTES = 2**20
_pools: dict[int, ThreadPoolExecutor] = {}  # by the OS scheduling priority (niceness) of their threads
_pool_lock = threading.Lock()


def run_tiles(fn, out, col0, X, Y, xn, yn, a, c, scale, threads) -> None:
    """Run the fused GEMM + map ``fn`` over the tiles of a (b, m) block, writing ``out[:, col0:]``.

    Tiles are (<= `_TILE_ROWS` rows) x (columns filling `_TILE_BYTES`);
    ``threads`` threads take the next tile in turn (`_shared`). Cost
    ``2 b m n`` flops plus O(b m).
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


def run_panels(fn, acc, col0, C, X, Y, xn, yn, a, c, scale, threads, T, start) -> None:
    """``acc[:, J] = T @ start[:, J] + C @ B[:, J]`` over the column panels J of a (b, m) radial block B.

    A panel is one tile width of columns; its row tiles are computed (GEMM),
    mapped into a second buffer in C's dtype (the map must not write over
    the GEMM tile it reads: in place the tiles were slower), and multiplied
    by C's columns while both buffers are in cache. Threads claim column
    panels (all row tiles of a panel, in order), so each column of ``acc`` is
    written by one thread and the result does not depend on the thread
    count. See `kpca.kernels.kernel_left_product_into`.

    For the maps of this module (Gaussian, Laplacian) the panels are jitted
    (`_panel`) and a thread claims a few at a time (`_panels`, about four
    claims per thread): no interpreter lock is held while they run. As numpy
    calls each took and gave the lock, so that any Python thread of the
    process (dask's event loop, a request) stalled the tiles: a pass took 21x
    its time beside one busy Python thread, and 16 threads of one process kept
    about 5 of 16 cores busy (bench/panel_threads.py, docs/scaling.md).
    Another map runs the same steps in Python, a panel at a time.
    """
    d, b, m = C.shape[0], X.shape[0], Y.shape[0]
    rows, width = _panel_shape(b, X.itemsize)
    kind = _PANEL_MAPS.get(fn)
    if kind is not None:
        X, Y, Ct = _read_only(np.ascontiguousarray(X)), _read_only(np.ascontiguousarray(Y)), np.ascontiguousarray(C.T)
        Tm = np.zeros((0, 0), acc.dtype) if T is None else np.ascontiguousarray(T, dtype=acc.dtype)  # T start: acc's
        copy_start = T is None and start is not acc

        count = -(-m // width)
        batch = max(1, count // (4 * max(1, threads)))  # panels per claim: each claim takes the lock once

        def run_batches(part):
            gram = np.empty(rows * width, dtype=X.dtype)
            values = np.empty(rows * width, dtype=C.dtype)
            product = np.empty(d * width, dtype=C.dtype)
            first = np.empty(2 * d * width, dtype=acc.dtype)  # start's panel and T times it, in acc's precision
            for k in part:
                _panels(kind, X, Y, k * batch, min(k * batch + batch, count), width, rows, xn, yn, a, c, scale, Ct,
                        Tm, start, copy_start, acc, col0, gram, values, product, first)

        _shared(-(-count // batch), run_batches, threads)
        return

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


def _read_only(array: np.ndarray) -> np.ndarray:
    """A read-only view of ``array``: numba types read-only arrays apart, so the panels see one type
    whether the data are in memory or mapped from a file (one compilation, not two). O(1)."""
    view = array.view()
    view.flags.writeable = False
    return view


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
    holding the whole block back. Meanwhile BLAS is held to one thread, with one
    tile thread too: each of ours already keeps a core busy. The pool is the one of the calling
    thread's scheduling priority (`_pool_of`): tiles run at their caller's priority.
    """
    threads = min(threads, n_items)
    if threads <= 1:  # BLAS on one thread here too: on two, a one-thread pass of small GEMMs took 2.0x as long
        with blas_limit(1):
            run(range(n_items))
        return
    pool = _pool_of(threads)
    shared = itertools.count()

    def claimed():  # one generator per thread over the shared counter
        while (k := next(shared)) < n_items:
            yield k

    with blas_limit(1):
        futures = [pool.submit(run, claimed()) for _ in range(threads)]
        for f in futures:
            f.result()


def thread_niceness() -> int:
    """The OS scheduling priority (niceness) of the calling thread: Linux keeps one per thread; 0 where
    the platform has no such call. O(1), one system call."""
    try:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    except (AttributeError, OSError):
        return 0


def _pool_of(threads: int) -> ThreadPoolExecutor:
    """The tile pool (at least ``threads`` threads) of the calling thread's niceness.

    A thread inherits the niceness of the thread that starts it and cannot lower it again without
    privileges, and an executor starts its threads from whichever thread submits first; so a fit that
    runs at a lowered priority (`workers.fit`) gets pool threads of its own priority, and a projection's
    tiles never wait behind a niced thread, nor a fit's tiles run at the projection's priority."""
    nice = thread_niceness()
    with _pool_lock:
        pool = _pools.get(nice)
        if pool is None or pool._max_workers < threads:
            if pool is not None:
                pool.shutdown(wait=False)
            pool = _pools[nice] = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"kpca-tiles-n{nice}")
        return pool


# Jitted tile maps (compiled per precision of the tile and of out), all with the signature
# map(T, out, r0, c0, xn, yn, a, c, scale): T holds the GEMM tile X[r0:] Y[j:]^T; each entry
# becomes a kernel value (distance, then the vectorisable exp of kpca._fastexp), is shifted by
# a[i] + c[j], and is written once to out[r0 + i, c0 + j]. Plain-numpy twins live in
# tests/naive.py. Rows are sliced inside so that numba sees contiguous arrays and vectorises.


@numba.njit(inline="always", fastmath=FASTMATH_FLAGS)
def _squared_distance(xi, yj, g, zero, rounding):
    """``|x|^2 + |y|^2 - 2 <x, y>``, or 0 where it is below its own rounding (``rounding`` times ``|x|^2 +
    |y|^2``, `_rounding`; negative values included): a point's distance to itself comes out 0, not the
    residue of the GEMM's rounding, whose square root the Laplacian kernel would turn into a distance."""
    d = xi + yj - (g + g)
    return d if d > rounding * (xi + yj) else zero


@numba.njit(inline="always")
def _rounding(T, zero):
    """64 machine epsilons of the tile's precision, in that precision (`_squared_distance`)."""
    return zero + np.float32(64.0) * np.finfo(T.dtype).eps


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH_FLAGS)
def gaussian_tile(T, out, r0, c0, xn, yn, a, c, scale):
    zero = scale - scale  # in the tile's precision
    rounding = _rounding(T, zero)
    for i in range(T.shape[0]):
        t, o, xi, ai = T[i], out[r0 + i, c0 : c0 + T.shape[1]], xn[i], a[i]
        for j in range(t.shape[0]):
            o[j] = exp_nonpositive(scale * _squared_distance(xi, yn[j], t[j], zero, rounding)) + (ai + c[j])


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH_FLAGS)
def laplacian_tile(T, out, r0, c0, xn, yn, a, c, scale):
    zero = scale - scale
    rounding = _rounding(T, zero)
    for i in range(T.shape[0]):
        t, o, xi, ai = T[i], out[r0 + i, c0 : c0 + T.shape[1]], xn[i], a[i]
        for j in range(t.shape[0]):
            o[j] = exp_nonpositive(scale * np.sqrt(_squared_distance(xi, yn[j], t[j], zero, rounding))) + (ai + c[j])


@numba.njit(nogil=True, cache=True)
def polynomial_from_gram(G, gamma, offset, degree):
    """``G <- (gamma G + offset)^degree`` in place."""
    b, m = G.shape
    for i in range(b):
        for j in range(m):
            G[i, j] = (gamma * G[i, j] + offset) ** degree


@numba.njit(nogil=True, cache=True)
def tanh_from_gram(G, gamma, offset):
    """``G <- tanh(gamma G + offset)`` in place."""
    b, m = G.shape
    for i in range(b):
        for j in range(m):
            G[i, j] = np.tanh(gamma * G[i, j] + offset)


#: The maps `_panel` runs without the interpreter (its ``kind``).
_PANEL_MAPS = {gaussian_tile: 0, laplacian_tile: 1}


@numba.njit(nogil=True, cache=True)
def _panels(kind, X, Y, k0, k1, width, rows, xn, yn, a, c, scale, Ct, T, start, copy_start, acc, col0, gram,
            values, product, first):
    """Column panels ``k0 .. k1-1`` of `run_panels` (each `_panel`, ``width`` columns), in one call."""
    m = Y.shape[0]
    for k in range(k0, k1):
        _panel(kind, X, Y, k * width, min(k * width + width, m), rows, xn, yn, a, c, scale, Ct, T, start, copy_start,
               acc, col0, gram, values, product, first)


@numba.njit(nogil=True, cache=True)
def _panel(kind, X, Y, j, j1, rows, xn, yn, a, c, scale, Ct, T, start, copy_start, acc, col0, gram, values,
           product, first):
    """One column panel ``J = [j, j1)`` of `run_panels`, all of it without the interpreter lock:
    ``acc[:, col0 + J] = T start[:, col0 + J]`` in acc's precision (in ``first``; ``start`` copied where T
    is empty and ``copy_start``, left where it is ``acc``), then per row tile the GEMM ``X[r:r1] Y[J]^T`` into
    ``gram``, the radial
    map ``kind`` (0 Gaussian, 1 Laplacian) into ``values`` and ``acc[:, col0 + J] += C[:, r:r1] values``
    (``Ct`` is C transposed, contiguous). Cost ``2 (j1 - j) b (n + d)`` flops (+ ``2 d^2 (j1 - j)`` with T)."""
    d, b, w = Ct.shape[1], X.shape[0], j1 - j
    p0, p1 = col0 + j, col0 + j1
    if T.shape[0] > 0:
        source = first[: d * w].reshape((d, w))
        source[:, :] = start[:, p0:p1]
        out = first[d * w : 2 * d * w].reshape((d, w))
        np.dot(T, source, out)
        acc[:, p0:p1] = out
    elif copy_start:
        acc[:, p0:p1] = start[:, p0:p1]
    prod = product[: d * w].reshape((d, w))
    for r in range(0, b, rows):
        r1 = min(r + rows, b)
        tile = gram[: (r1 - r) * w].reshape((r1 - r, w))
        mapped = values[: (r1 - r) * w].reshape((r1 - r, w))
        np.dot(X[r:r1], Y[j:j1].T, tile)
        if kind == 0:
            gaussian_tile(tile, mapped, 0, 0, xn[r:r1], yn[j:j1], a[r:r1], c[j:j1], scale)
        else:
            laplacian_tile(tile, mapped, 0, 0, xn[r:r1], yn[j:j1], a[r:r1], c[j:j1], scale)
        np.dot(Ct[r:r1].T, mapped, prod)
        acc[:, p0:p1] += prod
