"""Centred kernel rows on demand from any row source, memory bounded by the block.

A *row source* is anything with ``shape == (l, n)`` and row slicing
``source[a:b] -> ndarray`` (a numpy array, a read-only zarr array, ...).
`KernelRows` reads it chunk by chunk (keeping a bounded LRU cache of chunks),
so a block of ``b`` kernel rows costs one pass over the data and ``O(b l)``
memory; the ``l x l`` kernel matrix is never formed. Its product with a d x b
matrix on the left (`KernelRows.left_product`) costs the same pass and
``O(d l)`` memory: the rows themselves are not formed either.

The centring (seed 000 eq. 4-5) lives in `kpca.centering`; `Centering` and `center_block` are
imported here as well.

*An origin for translation-invariant kernels.* A radial kernel (Gaussian, Laplacian) depends on
``||x - y||`` only, and its tiles form ``||x||^2 + ||y||^2 - 2 <x, y>`` (one GEMM). Far from the
origin that is a difference of large numbers: rows at distance 3 from each other but 1e4 from 0
lose 14 of float64's 16 digits there, and every digit of float32's. `KernelRows` therefore keeps its
rows as ``x - o`` for an origin o near the data (`default_origin`: the mean of the first chunk;
the same distances, so the same kernel values, to rounding that is now relative to the data's spread).
Every kernel computed from its rows is computed from these *local* coordinates: its cached chunks,
`points`, `points_left_product`, and the tiles of `block`, `left_product` and the centring pass.
What it hands out as data (`take`, `chunks`, `sample`) and what it takes as new points
(`raw_block`, `transform_block`) are in the data's own coordinates, converted at that boundary
(`to_local`; float64 when there is an origin). Dot-product kernels have no such invariance and no
origin.
"""

from __future__ import annotations

import copy
import math
import os
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from kpca.centering import Centering, center_block
from kpca.kernels import (
    KernelSpec,
    kernel_block_into,
    kernel_diagonal,
    kernel_left_product_into,
    squared_norms,
)

AUTO_SAMPLE_ROWS = 1000  # rows sampled to resolve a kernel parameter "auto" (resolve_kernel)


def default_cache_bytes() -> int:
    """Default bound of the data-chunk cache: 1/16 of physical memory (at least 64 MiB)."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = 2**32
    return max(64 * 2**20, ram // 16)


ORIGIN_ROWS = 1024  # rows whose mean is the default origin (`default_origin`)


def default_origin(source, kernel: KernelSpec) -> np.ndarray | None:
    """The origin of `KernelRows`' local coordinates (module docstring): for a translation-invariant
    (radial) kernel, the float64 mean of the first `ORIGIN_ROWS` rows of ``source``, a point near the
    data that any process opening the same source finds again, however it chunks it; None for a
    dot-product kernel. Cost: those rows' reads, O(ORIGIN_ROWS n)."""
    if not kernel.kernel.radial or source.shape[0] == 0:
        return None
    rows, step = min(ORIGIN_ROWS, int(source.shape[0])), default_chunk_rows(source)  # read as the source is chunked
    first = np.concatenate([np.asarray(source[a : min(a + step, rows)], dtype=np.float64)
                            for a in range(0, rows, step)])
    # correctly rounded sums (math.fsum): the same origin, bit for bit, however the rows were read
    return np.array([math.fsum(column) for column in first.T]) / rows


def default_chunk_rows(source) -> int:
    """Rows per read: the source's own chunking along axis 0 if it has one, else 4096."""
    chunks = getattr(source, "chunks", None)
    if chunks and isinstance(chunks[0], int) and chunks[0] > 0:
        return int(chunks[0])
    return 4096


class KernelRows:
    """Produce (centred) kernel rows of a data set block by block.

    Parameters
    ----------
    source : array-like of shape (l, n)
        Training data; read with ``source[a:b]`` only.
    kernel : KernelSpec
    dtype : numpy dtype, default float64
        Precision of the kernel rows returned.
    compute_dtype : numpy dtype, optional (default: ``dtype``)
        Precision of the data and of the GEMM tiles that make the rows (data
        is cast to it chunk by chunk). float32 here with float64 rows runs
        the kernel at the float32 GEMM rate and still hands float64 rows to
        the solver, without a separate conversion pass.
    chunk_rows : int, optional
        Rows per read; defaults to the source's chunking.
    cache_bytes : int, optional
        Bound on data chunks kept in memory (least recently used dropped);
        default `default_cache_bytes` (1/16 of RAM). If the whole set fits,
        every pass after the first reads nothing.
    prefetch : bool, default True
        While one chunk's kernel block is computed, read the next chunk in a
        background thread (zarr decompression releases the GIL).
    origin : ndarray of shape (n,), None or "auto" (default)
        Origin of the local coordinates (module docstring): "auto" is
        `default_origin`; None keeps the data's coordinates. The shards of one
        fit are given the same origin (`kpca.sharded.shards.make_group`), since they
        exchange points in local coordinates.

    Cost: `block` of b rows is ``2 b l n`` flops (GEMMs) plus ``O(b l)``;
    `fit_centering` is one pass of all l rows, ``2 l^2 n`` flops.
    """

    def __init__(self, source, kernel: KernelSpec, dtype=np.float64, chunk_rows: int | None = None,
                 cache_bytes: int | None = None, prefetch: bool = True, compute_dtype=None, origin="auto"):
        if len(source.shape) != 2:
            raise ValueError(f"data: expected a 2-D array, got shape {source.shape}")
        self.source = source
        self.kernel = kernel
        self.dtype = np.dtype(dtype)
        self.compute_dtype = self.dtype if compute_dtype is None else np.dtype(compute_dtype)
        self.n_rows, self.n_features = (int(s) for s in source.shape)
        self.chunk_rows = int(chunk_rows or default_chunk_rows(source))
        self.cache_bytes = int(default_cache_bytes() if cache_bytes is None else cache_bytes)
        self.prefetch = prefetch
        self._reader: ThreadPoolExecutor | None = None
        self.reads = 0  # chunks read from the source (cache misses), for monitoring
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()
        self._cached_bytes = 0
        self.centering: Centering | None = None
        if isinstance(origin, str) and origin == "auto":
            origin = default_origin(source, kernel)
        self.origin = None if origin is None else np.ascontiguousarray(origin, dtype=np.float64)
        if self.origin is not None and self.origin.shape != (self.n_features,):
            raise ValueError(f"origin: expected shape ({self.n_features},), got {self.origin.shape}")
        self._sqnorms = None
        if kernel.needs_norms:
            self._sqnorms = np.concatenate([squared_norms(c) for _, c in self.chunks(local=True)])

    # -- data access -------------------------------------------------------
    @property
    def n_chunks(self) -> int:
        return -(-self.n_rows // self.chunk_rows)

    def _read(self, c: int) -> np.ndarray:
        """Chunk c from the source in local coordinates, converted to ``compute_dtype`` (no caching;
        thread-safe)."""
        a = c * self.chunk_rows
        return self.to_local(self.source[a : min(a + self.chunk_rows, self.n_rows)])

    def to_local(self, X, dtype=None) -> np.ndarray:
        """Points X (b, n) of the data's coordinates in local ones (``X - origin``, module docstring),
        C-contiguous in ``dtype`` (default ``compute_dtype``); the subtraction is done in float64.
        O(b n)."""
        dtype = self.compute_dtype if dtype is None else np.dtype(dtype)
        if self.origin is None:
            return np.ascontiguousarray(X, dtype=dtype)
        return np.ascontiguousarray(np.asarray(X, dtype=np.float64) - self.origin, dtype=dtype)

    def from_local(self, X) -> np.ndarray:
        """Local points back in the data's coordinates: float64 ``X + origin`` (X itself, as it is,
        without an origin). O(b n)."""
        return X if self.origin is None else np.asarray(X, dtype=np.float64) + self.origin

    def _remember(self, c: int, data: np.ndarray) -> np.ndarray:
        self.reads += 1
        if data.nbytes <= self.cache_bytes:
            self._cache[c] = data
            self._cached_bytes += data.nbytes
            while self._cached_bytes > self.cache_bytes:
                _, old = self._cache.popitem(last=False)
                self._cached_bytes -= old.nbytes
        return data

    def _chunk(self, c: int) -> np.ndarray:
        hit = self._cache.get(c)
        if hit is not None:
            self._cache.move_to_end(c)
            return hit
        return self._remember(c, self._read(c))

    def chunks(self, local: bool = False):
        """Yield ``(start, rows)`` for every chunk of the source, in order: in the data's coordinates
        (`from_local`), or with ``local`` in local ones as the kernels see them (``compute_dtype``).

        With ``prefetch``, the next uncached chunk is read in a background
        thread while the caller works on the current one.
        """
        if not local and self.origin is not None:
            for start, data in self.chunks(local=True):
                yield start, self.from_local(data)
            return
        pending = None
        for c in range(self.n_chunks):
            if pending is not None:
                data = self._remember(c, pending.result())
                pending = None
            else:
                data = self._chunk(c)
            nxt = c + 1
            if self.prefetch and nxt < self.n_chunks and nxt not in self._cache:
                if self._reader is None:
                    self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kpca-prefetch")
                pending = self._reader.submit(self._read, nxt)
            yield c * self.chunk_rows, data

    def close(self) -> None:
        """Stop the prefetch thread and drop the cache."""
        if self._reader is not None:
            self._reader.shutdown(wait=True)
            self._reader = None
        self._cache.clear()
        self._cached_bytes = 0

    def sample(self, size: int = AUTO_SAMPLE_ROWS, seed: int = 0) -> np.ndarray:
        """A fixed-seed sample of ``min(size, l)`` data rows, read from as few chunks as possible: whole
        chunks in a random order until ``size`` rows are at hand, then ``size`` of them at random.
        Cost: about ``size / chunk_rows`` chunk reads."""
        rng = np.random.default_rng([seed, 2**31 + 2])
        size = min(int(size), self.n_rows)
        picked, held = [], 0
        for c in rng.permutation(self.n_chunks):
            if held >= size:
                break
            data = self._chunk(int(c))
            picked.append(data)
            held += data.shape[0]
        rows = np.concatenate(picked)
        return self.from_local(rows[np.sort(rng.choice(rows.shape[0], size=size, replace=False))])

    def resolve_kernel(self, size: int = AUTO_SAMPLE_ROWS, seed: int = 0) -> KernelSpec:
        """Set every ``"auto"`` kernel parameter from a fixed-seed `sample` of the data
        (`kpca.kernels.KernelSpec.resolved`: a width is the median distance between the sampled
        rows) and return the kernel. Cost: the sample's reads plus O(size^2 n)."""
        if self.kernel.unresolved:
            self.kernel = self.kernel.resolved(self.sample(size, seed))
        return self.kernel

    def take(self, indices: np.ndarray) -> np.ndarray:
        """Data rows ``source[indices]`` of shape (b, n) in the data's coordinates: ``compute_dtype``, or
        float64 where there is an origin (`from_local`)."""
        return self.from_local(self.take_local(indices))

    def take_local(self, indices: np.ndarray) -> np.ndarray:
        """Data rows ``source[indices]`` (b, n) in local coordinates and ``compute_dtype``: what the kernel
        tiles take."""
        indices = np.asarray(indices)
        out = np.empty((indices.size, self.n_features), dtype=self.compute_dtype)
        chunk_of = indices // self.chunk_rows
        for c in np.unique(chunk_of):
            sel = chunk_of == c
            out[sel] = self._chunk(int(c))[indices[sel] - c * self.chunk_rows]
        return out

    # -- kernel rows --------------------------------------------------------
    def raw_block(self, X: np.ndarray) -> np.ndarray:
        """Kernel rows ``K(X, data)`` of shape (b, l) of points X (b, n) in the data's coordinates. One
        pass over the data (`local_block`)."""
        return self.local_block(self.to_local(X))

    def local_block(self, X: np.ndarray, x_sqnorms: np.ndarray | None = None,
                    row_shift: np.ndarray | None = None, col_shift: np.ndarray | None = None) -> np.ndarray:
        """Kernel rows ``K(X, data)`` of shape (b, l) of points X in local coordinates, plus ``row_shift[i]
        + col_shift[j]`` if given (shapes (b,) and (l,)). One pass over the data; each chunk's block is
        written in place (`kpca.kernels.kernel_block_into`)."""
        X = np.ascontiguousarray(X, dtype=self.compute_dtype)
        if self.kernel.needs_norms and x_sqnorms is None:
            x_sqnorms = squared_norms(X)
        out = np.empty((X.shape[0], self.n_rows), dtype=self.dtype)
        for start, Y, yn in self._chunks_with_norms():
            cs = None if col_shift is None else col_shift[start : start + Y.shape[0]]
            kernel_block_into(out, start, X, Y, self.kernel, x_sqnorms, yn, row_shift, cs)
        return out

    def float64_block(self, indices: np.ndarray) -> np.ndarray:
        """Raw kernel rows ``K[indices, :]`` (b, l) in float64 computed from the source's data read in float64,
        whatever the rows' precision: what a float32 pass is checked against (`kpca.solvers._rounding`).
        Reads the chunks holding ``indices``, then every chunk once, none kept. Cost ``2 b l n`` flops, and
        one read of the source."""
        return self.float64_kernel(self.float64_points(indices))

    def float64_points(self, indices: np.ndarray) -> np.ndarray:
        """Data rows ``source[indices]`` (b, n) in float64 local coordinates, read from the source (not
        the rows' cache, which holds them in the rows' precision). Reads the chunks holding them."""
        indices = np.asarray(indices)
        X = np.empty((indices.size, self.n_features))
        chunk_of = indices // self.chunk_rows
        for c in np.unique(chunk_of):
            sel = chunk_of == c
            X[sel] = self._source_chunk(int(c))[indices[sel] - c * self.chunk_rows]
        return X

    def float64_kernel(self, points: np.ndarray) -> np.ndarray:
        """Raw kernel rows ``K(points, data)`` (b, l) in float64 for float64 points in local coordinates
        (`float64_points`, or another shard's with the same origin), the data read in float64 from the
        source, none kept. Cost ``2 b l n`` flops and one read of the source."""
        out = np.empty((points.shape[0], self.n_rows))
        for c in range(self.n_chunks):
            kernel_block_into(out, c * self.chunk_rows, points, self._source_chunk(c), self.kernel)
        return out

    def _source_chunk(self, c: int) -> np.ndarray:
        """Chunk c read from the source in float64 local coordinates (not cached)."""
        a = c * self.chunk_rows
        return self.to_local(self.source[a : min(a + self.chunk_rows, self.n_rows)], np.float64)

    def _chunks_with_norms(self):
        """`chunks` in local coordinates, each with its rows' squared norms (None if the kernel needs none)."""
        for start, Y in self.chunks(local=True):
            yield start, Y, None if self._sqnorms is None else self._sqnorms[start : start + Y.shape[0]]

    def restore_centering(self, entries) -> Centering:
        """Set and return the centring whose entries (`Centering.to_state`) a solver state carries
        (`kpca.solvers.SolverState.centering`; a checkpoint's entries hold them too): what a resumed fit
        or a served model uses instead of `fit_centering`. Row sources with a centring of their own
        (`kpca.affinity.AffinityRows`) restore theirs. O(l)."""
        self.centering = Centering.from_state(entries)
        return self.centering

    def fit_centering(self, block_size: int = 1024) -> Centering:
        """One pass over all kernel rows: column means, their mean, mean of diag(K').

        The column sums are accumulated as ``1^T K[block, :]`` block by block
        (`kpca.kernels.kernel_left_product_into` with a row of ones), so no
        row is formed. Cost ``2 l^2 n`` flops, O(l + block_size n) memory.
        """
        self._centring_pass(np.ones((1, self.n_rows)), block_size)
        assert self.centering is not None  # the pass sets it
        return self.centering

    def fit_centering_times(self, C: np.ndarray, block_size: int = 1024) -> np.ndarray:
        """The centring pass (`fit_centering`) and ``C K'`` (d, l) for C (d, l) from the same kernel
        tiles: one pass instead of two. The raw product ``C K`` and the column sums come out of one
        left product with ``[1; C]``; eq. 5 then gives ``C K' = C K - (C m) 1^T - (C 1) m^T + m_bar
        (C 1) 1^T``. Sets the centring; returns ``C K'`` (float64). Cost ``2 l^2 (n + d + 1)`` flops,
        O(d l) memory."""
        C = np.ascontiguousarray(C, dtype=np.float64)
        products = self._centring_pass(np.vstack([np.ones((1, self.n_rows)), C]), block_size)[1:]
        centering = self.centering
        assert centering is not None  # the pass sets it
        return centering.centre_products(products, C @ centering.column_means, C.sum(axis=1))

    def _centring_pass(self, left: np.ndarray, block_size: int) -> np.ndarray:
        """``left K`` (raw kernel) for ``left`` (d, l) whose first row is ones, in one pass, and the
        centring it gives (set here). ``left`` is multiplied in the rows' precision, as a pass's
        `left_product` is (float32 rows: a float32 GEMM per tile, summed into float64 products: the
        column means then agree with float64 sums to about 1e-7, the float32 kernel values' own
        precision, and the pass costs what a Rayleigh-Ritz pass does instead of 1.2x). Returns the (d, l)
        float64 products."""
        out = np.zeros((left.shape[0], self.n_rows), dtype=np.float64)
        diag_sum = 0.0
        for a in range(0, self.n_rows, block_size):
            idx = np.arange(a, min(a + block_size, self.n_rows))
            X = self.take_local(idx)
            xn = None if self._sqnorms is None else self._sqnorms[idx]
            C = np.ascontiguousarray(left[:, idx], dtype=self.dtype)
            for start, Y, yn in self._chunks_with_norms():
                kernel_left_product_into(out, start, C, X, Y, self.kernel, xn, yn)
            diag_sum += float(kernel_diagonal(X, self.kernel).sum(dtype=np.float64))
        column_means = out[0] / self.n_rows
        grand_mean = float(column_means.mean())
        self.centering = Centering(
            column_means=column_means,  # float64 whatever the rows' dtype: it is l numbers
            grand_mean=grand_mean,
            mean_diagonal=diag_sum / self.n_rows - grand_mean,
        )
        return out

    def block(self, indices: np.ndarray) -> np.ndarray:
        """Centred training kernel rows ``K'[indices, :]`` of shape (b, l). Eq. 5."""
        X, xn, row_shift = self._training_points(indices)
        return self.local_block(X, xn, row_shift, -self._require_centering().column_means)

    def points(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Data rows ``source[indices]`` (b, n) in local coordinates and ``compute_dtype``, and their squared
        norms (b,), None if the kernel needs none: what `points_left_product` takes."""
        indices = np.asarray(indices)
        return self.take_local(indices), None if self._sqnorms is None else self._sqnorms[indices]

    def _training_points(self, indices: np.ndarray):
        """Data rows ``source[indices]`` in local coordinates, their squared norms (or None) and the row shifts
        ``m_bar - m[i]`` that fold eq. 5 into the kernel pass: ``K'[i, j] = K[i, j] + (m_bar - m[i]) - m[j]``."""
        c = self._require_centering()
        indices = np.asarray(indices)
        xn = None if self._sqnorms is None else self._sqnorms[indices]
        return self.take_local(indices), xn, (c.grand_mean - c.column_means[indices]).astype(self.dtype)

    def left_product(self, indices: np.ndarray, C: np.ndarray, out: np.ndarray, T: np.ndarray | None = None,
                     start: np.ndarray | None = None) -> np.ndarray:
        """``out = T start + C K'[indices, :]`` (default ``out += C K'[indices, :]``) without
        forming the rows: each kernel tile is multiplied by C while it is in cache
        (`kpca.kernels.kernel_left_product_into`, which also forms ``T start`` panel by panel).

        ``C`` (d, b) is cast to the rows' dtype, so float32 rows give a float32
        GEMM accumulated into ``out`` (d, l). Eq. 5 is folded in as in `block`.
        Cost ``2 b l (n + d)`` flops; memory O(d l) besides the tiles (a block
        of rows would take b l). Returns ``out``.
        """
        X, xn, row_shift = self._training_points(indices)
        return self.points_left_product(X, xn, row_shift, np.ascontiguousarray(C, dtype=self.dtype), out, T=T,
                                        start=start)

    def points_left_product(self, X: np.ndarray, x_sqnorms: np.ndarray | None, row_shift: np.ndarray | None,
                            C: np.ndarray, out: np.ndarray, T: np.ndarray | None = None,
                            start: np.ndarray | None = None, centred: bool = True) -> np.ndarray:
        """`left_product` for given points instead of training indices: ``out = T start + C B`` with
        ``B[i, j] = k(X[i], x_j) + row_shift[i] - m[j]`` over this source's rows x_j (without ``- m[j]``
        if not ``centred``, and without any shift when ``row_shift`` is None).

        ``X`` (b, n) in local coordinates (`points`, `to_local`) and ``compute_dtype`` with squared norms
        ``x_sqnorms`` (b,) where the kernel needs
        them; ``C`` (d, b) is used in its own dtype (`left_product` casts it to the rows'). A shard of a
        sharded fit (`kpca.sharded.shards`) multiplies the block's points, rows of other shards, against its
        own rows with it. Cost as `left_product`. Returns ``out``.
        """
        C = np.ascontiguousarray(C)
        if out.shape != (C.shape[0], self.n_rows) or C.shape[1] != X.shape[0]:
            raise ValueError(f"out, C: expected shapes ({C.shape[0]}, {self.n_rows}) and ({C.shape[0]}, "
                             f"{X.shape[0]}), got {out.shape} and {C.shape}")
        m = self._require_centering().column_means if centred else None
        for first, Y, yn in self._chunks_with_norms():
            col_shift = None if m is None else -m[first : first + Y.shape[0]]
            kernel_left_product_into(out, first, C, X, Y, self.kernel, x_sqnorms, yn, row_shift, col_shift,
                                     T=T, start=start)
        return out

    def times(self, C: np.ndarray, block_size: int = 1024) -> np.ndarray:
        """``C K'`` (d, l) for C (d, l), float64: one pass of `left_product` over blocks of rows (a
        device's row source, `kpca.array_rows.ArrayRows`, runs it there). Cost ``2 l^2 (n + d)`` flops,
        memory O(d l)."""
        C = np.ascontiguousarray(C, dtype=np.float64)
        out = np.zeros_like(C)
        for a in range(0, self.n_rows, block_size):
            idx = np.arange(a, min(a + block_size, self.n_rows))
            self.left_product(idx, C[:, idx], out)
        return out

    def square(self, indices: np.ndarray) -> np.ndarray:
        """``K'[indices][:, indices]`` of shape (b, b), computed from the b points alone.
        Eq. 5. Cost ``2 b^2 n`` flops, no pass over the data."""
        X, xn, row_shift = self._training_points(indices)
        out = np.empty((X.shape[0], X.shape[0]), dtype=self.dtype)
        return kernel_block_into(out, 0, X, X, self.kernel, xn, xn, row_shift,
                                 -self._require_centering().column_means[indices])

    def transform_block(self, X: np.ndarray) -> np.ndarray:
        """Centred kernel rows ``k'(x)`` of new points, shape (b, l), training centring (weighted where
        the centring has weights: `Centering.row_means`)."""
        return self.centre_raw(self.raw_block(X))

    def centre_raw(self, K: np.ndarray) -> np.ndarray:
        """Raw kernel rows K (b, l) of new points (`raw_block`) centred in place as `transform_block`
        centres them, and returned. O(b l)."""
        c = self._require_centering()
        return center_block(K, c.row_means(K), c)

    def dense(self) -> np.ndarray:
        """The whole centred kernel matrix K' (l, l) in float64, whatever the rows' precision (a figure
        or a dense solver measures against it). Only for small l: O(l^2) memory."""
        if self.dtype == np.float64 and self.compute_dtype == np.float64:
            return self.block(np.arange(self.n_rows))
        twin = copy.copy(self)
        twin.use_precision(np.float64)
        return twin.block(np.arange(self.n_rows))

    def use_precision(self, dtype) -> None:
        """Compute the kernel tiles, and hand the rows, in ``dtype`` (float64 or float32) from now on:
        `kpca.fitting.prepare_fit` sets a fit's resolved ``kernel_precision`` on the rows it was given.
        The data chunks kept are dropped (they are kept in the tiles' precision); the centring and the
        kernel stay. O(l) for the squared norms (a read of the data, O(l n), for a finer precision)."""
        dtype = np.dtype(dtype)
        if dtype == self.dtype and dtype == self.compute_dtype:
            return
        finer = dtype.itemsize > self.compute_dtype.itemsize
        self.dtype = self.compute_dtype = dtype
        self._cache, self._cached_bytes = OrderedDict(), 0
        if self._sqnorms is not None:  # a finer precision needs the norms of its own rows, not rounded ones
            self._sqnorms = (np.concatenate([squared_norms(c) for _, c in self.chunks(local=True)]) if finer
                             else self._sqnorms.astype(dtype))

    def _require_centering(self) -> Centering:
        if self.centering is None:
            raise RuntimeError("call fit_centering() (or set .centering) before asking for centred rows")
        return self.centering
