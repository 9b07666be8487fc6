"""A read-only row source over the zarr segments that make up one version of a data set.

A committed version is a list of segments (zarr arrays of rows, each written
once) that are concatenated along the rows; `SegmentedRows` presents them as
one array of shape (n_rows, n_features) that `kpca.rows.KernelRows` and the
workers can slice like a zarr or numpy array, casting to the data set's dtype
on read when a (registered) segment stores another dtype. `RowWindow` is a
read-only view of contiguous rows [first, stop) of any such row source: the
shard of a data set that one worker of a sharded fit reads.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np


class RowIndexing:
    """Numpy-style row indexing over ``_read(start, stop)`` (rows start..stop-1 as one array) and
    ``shape``: ``rows[i]``, ``rows[a:b]`` (any step: the rows between the first and last index are
    read, then subsampled), ``rows[a:b, cols]``, ``rows[...]``; anything else is a `TypeError`; ``len``,
    ``numpy.asarray`` (every row) and no assignment. What `SegmentedRows`, `RowWindow` and
    `store.datasets.integrity.VerifiedRows` share. Cost O(rows read)."""

    shape: tuple[int, ...]  # (rows, features), set by each subclass

    def _read(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start`` to ``stop - 1`` as one array (n, n_features): each subclass reads its own."""
        raise NotImplementedError

    def __len__(self) -> int:
        return self.shape[0]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        rows = self._read(0, self.shape[0])
        return rows if dtype is None else rows.astype(dtype, copy=False)

    def __setitem__(self, key, value) -> None:
        raise ValueError("this row source is read-only: committed data set versions never change")

    def __getitem__(self, key) -> np.ndarray:
        columns = None
        if isinstance(key, tuple):
            if len(key) == 1:
                key = key[0]
            elif len(key) == 2:
                key, columns = key
            else:
                raise TypeError(f"too many indices for a 2-D row source: {len(key)}")
        if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
            index = int(key)
            if index < 0:
                index += self.shape[0]
            if not 0 <= index < self.shape[0]:
                raise IndexError(f"row {int(key)} is out of range for {self.shape[0]} rows")
            rows = self._read(index, index + 1)[0]
        elif isinstance(key, slice):
            start, stop, step = key.indices(self.shape[0])
            if step == 1:
                rows = self._read(start, max(start, stop))
            else:
                picked = range(start, stop, step)
                if len(picked) == 0:
                    rows = self._read(0, 0)
                else:
                    low, high = min(picked[0], picked[-1]), max(picked[0], picked[-1])
                    rows = self._read(low, high + 1)[np.asarray(picked) - low]
        elif key is Ellipsis:
            rows = self._read(0, self.shape[0])
        else:
            raise TypeError(f"row sources are indexed by an integer or a slice, not {type(key).__name__}")
        if columns is None or (isinstance(columns, slice) and columns == slice(None)):
            return rows
        return rows[..., columns]


class SegmentedRows(RowIndexing):
    """Rows of several 2-D arrays stacked vertically, read lazily.

    Parameters
    ----------
    segments : sequence of array-like
        Each of shape (n_i, n_features), sliceable along rows
        (``segment[a:b]`` returns a numpy array): zarr arrays, numpy arrays.
    dtype : str or numpy dtype
        Dtype of the rows returned; segments stored in another dtype are
        converted with ``astype`` on read.
    chunk_rows : int
        Row chunk length reported in `chunks` (readers use it as their read
        size); normally the zarr row chunk of the segments.
    n_rows : sequence of int, optional
        Rows to use from each segment (its leading rows); defaults to each
        segment's full length.

    Attributes
    ----------
    shape : tuple of int
        ``(sum n_i, n_features)``.
    dtype : numpy.dtype
    chunks : tuple of int
        ``(chunk_rows, n_features)``.

    Notes
    -----
    Indexing: ``rows[i]`` (one row, shape (n_features,)), ``rows[a:b]`` and
    ``rows[a:b, cols]`` (any numpy column index). A slice with a step other
    than 1 reads the rows between its first and last index and then
    subsamples. A read touches only the segments that hold the requested rows;
    cost O(rows read) time and memory. Read-only: assignment raises
    `ValueError`.
    """

    def __init__(self, segments: Sequence, dtype, chunk_rows: int, n_rows: Sequence[int] | None = None):
        if not segments:
            raise ValueError("at least one segment is needed")
        widths = {int(segment.shape[1]) for segment in segments}
        if len(widths) != 1:
            raise ValueError(f"segments have different numbers of columns: {sorted(widths)}")
        self._segments = list(segments)
        lengths = [int(s.shape[0]) for s in segments] if n_rows is None else [int(n) for n in n_rows]
        self._starts = [0]
        for length in lengths:
            self._starts.append(self._starts[-1] + length)
        self.n_features = widths.pop()
        self.shape = (self._starts[-1], self.n_features)
        self.dtype = np.dtype(dtype)
        self.chunks = (max(1, int(chunk_rows)), self.n_features)
        self.ndim = 2

    def __repr__(self) -> str:
        return (f"SegmentedRows(shape={self.shape}, dtype={self.dtype}, chunks={self.chunks}, "
                f"segments={len(self._segments)})")

    def _read(self, start: int, stop: int) -> np.ndarray:
        """Rows start..stop-1 (0 <= start <= stop <= n_rows) as one C-contiguous array."""
        parts = []
        position = start
        segment = bisect.bisect_right(self._starts, start) - 1
        while position < stop and segment < len(self._segments):
            seg_start, seg_stop = self._starts[segment], self._starts[segment + 1]
            upto = min(stop, seg_stop)
            if upto > position:
                block = self._segments[segment][position - seg_start: upto - seg_start]
                parts.append(np.asarray(block).astype(self.dtype, copy=False))
                position = upto
            segment += 1
        if not parts:
            return np.empty((0, self.n_features), dtype=self.dtype)
        if len(parts) == 1:
            return np.ascontiguousarray(parts[0])
        return np.concatenate(parts)


_DEFAULT_CHUNK_ROWS = 4096


class RowWindow(RowIndexing):
    """A read-only view of rows ``first..stop-1`` of a row source, indexed from 0.

    A sharded fit gives each worker the contiguous rows [first, stop) of a
    data set; the window lets it slice them as if they were the whole array.

    Parameters
    ----------
    source : array-like of shape (n_rows, n_features)
        Anything with ``.shape`` and ``.dtype`` whose ``source[a:b]`` (and
        ``source[a:b, cols]``) returns numpy: a zarr array, `SegmentedRows`,
        a numpy array. ``.chunks`` is optional.
    first, stop : int
        The window's rows, ``0 <= first < stop <= n_rows``.

    Attributes
    ----------
    first, stop : int
    shape : tuple of int
        ``(stop - first, n_features)``.
    dtype : numpy.dtype
        The source's dtype.
    chunks : tuple of int
        ``(chunk_rows, n_features)``: the source's row chunk, or 4096 rows if
        the source has no ``.chunks``.

    Raises
    ------
    ValueError
        ``first`` or ``stop`` out of range (both are named in the message).

    Notes
    -----
    Indexing as `RowIndexing` (``window[i]``, negative ``i`` counting from
    ``stop``; ``window[a:b]``, ``window[a:b, cols]``, bounds as numpy's). A read is ``source[first + a : first +
    b]``, so it
    costs what the source charges for those rows: O(rows read) time and
    memory, no copy beyond the source's own. Creating a window is O(1).
    """

    def __init__(self, source, first: int, stop: int):
        n_rows = int(source.shape[0])
        for label, value in (("first", first), ("stop", stop)):
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{label} must be an integer, got {type(value).__name__}")
        first, stop = int(first), int(stop)
        if not 0 <= first < stop <= n_rows:
            raise ValueError(
                f"row window first={first}, stop={stop} must satisfy 0 <= first < stop <= n_rows={n_rows}"
            )
        self._source = source
        self.first = first
        self.stop = stop
        self.n_features = int(source.shape[1])
        self.shape = (stop - first, self.n_features)
        self.dtype = np.dtype(source.dtype)
        source_chunks = getattr(source, "chunks", None)
        chunk_rows = int(source_chunks[0]) if source_chunks else _DEFAULT_CHUNK_ROWS
        self.chunks = (max(1, chunk_rows), self.n_features)
        self.ndim = 2

    def __repr__(self) -> str:
        return f"RowWindow(first={self.first}, stop={self.stop}, shape={self.shape}, dtype={self.dtype})"

    def __setitem__(self, key, value) -> None:
        raise ValueError("a row window is read-only")

    def _read(self, start: int, stop: int) -> np.ndarray:
        """Rows start..stop-1 of the window: ``source[first + start : first + stop]``."""
        return np.asarray(self._source[self.first + start : self.first + stop])
