"""A read-only row source over the zarr segments that make up one version of a data set.

A committed version is a list of segments (zarr arrays of rows, each written
once) that are concatenated along the rows; `SegmentedRows` presents them as
one array of shape (n_rows, n_features) that `kpca.rows.KernelRows` and the
workers can slice like a zarr or numpy array, casting to the data set's dtype
on read when a (registered) segment stores another dtype.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np


class SegmentedRows:
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

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return (f"SegmentedRows(shape={self.shape}, dtype={self.dtype}, chunks={self.chunks}, "
                f"segments={len(self._segments)})")

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
                raise IndexError(f"too many indices for a 2-D row source: {len(key)}")
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
