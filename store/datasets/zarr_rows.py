"""The committed form of a data set: a zarr v3 array of rows, written chunk-aligned."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import zarr

from store.checksums import chunk_digest

TARGET_CHUNK_BYTES = 1 << 20
"""Uncompressed size aimed at for one zarr chunk (1 MiB)."""


def zarr_chunk_rows(n_rows: int, n_features: int, itemsize: int) -> int:
    """Rows per zarr chunk: the largest power of two whose rows fit in 1 MiB, capped at ``n_rows``.

    Always at least 1 (a single row wider than 1 MiB is one chunk). Cost O(1).
    """
    fitting = max(1, TARGET_CHUNK_BYTES // (n_features * itemsize))
    power_of_two = 1 << (fitting.bit_length() - 1)
    return max(1, min(n_rows, power_of_two))


def create_row_array(path, n_rows: int, n_features: int, dtype: str, chunk_rows: int) -> zarr.Array:
    """Create an empty zarr v3 array of shape (n_rows, n_features) at folder ``path`` (or in a zarr store: an
    object store's, `store.objects.interface.ObjectStore.zarr_store`).

    Chunks are (chunk_rows, n_features) with zarr's default codecs (bytes +
    zstd); every chunk is stored, even an all-zero one, so the stored bytes are
    exactly the rows written (``-0.0`` stays ``-0.0``). Cost O(1) (metadata only).
    """
    return zarr.create_array(
        store=str(path) if isinstance(path, (str, Path)) else path,
        shape=(n_rows, n_features),
        dtype=dtype,
        chunks=(chunk_rows, n_features),
        zarr_format=3,
        fill_value=0,
        config={"write_empty_chunks": True},
    )


class AlignedRowWriter:
    """Append blocks of rows to a zarr array so that each zarr chunk is written exactly once.

    Rows are buffered until they fill a whole zarr chunk; runs of whole chunks
    inside a block are written directly. Memory: at most one zarr chunk of
    buffered rows beyond the block being appended.

    Parameters
    ----------
    array : zarr.Array
        Destination of shape (n_rows, n_features), chunked along rows only.
    """

    def __init__(self, array: zarr.Array):
        self.array = array
        self.chunk_rows = array.chunks[0]
        self.written = 0  # rows stored so far; always a multiple of chunk_rows until close()
        self._pending: list[np.ndarray] = []
        self._pending_rows = 0
        self.digests: list[str] = []

    def append(self, block: np.ndarray) -> None:
        """Add ``block`` (shape (m, n_features)) after the rows appended so far. Cost O(block bytes)."""
        if self._pending_rows:
            take = min(self.chunk_rows - self._pending_rows, block.shape[0])
            self._pending.append(block[:take])
            self._pending_rows += take
            block = block[take:]
            if self._pending_rows < self.chunk_rows:
                return
            self._flush_pending()
        whole = (block.shape[0] // self.chunk_rows) * self.chunk_rows
        if whole:
            self._store(block[:whole])
        if whole < block.shape[0]:
            self._pending = [block[whole:]]
            self._pending_rows = block.shape[0] - whole

    def close(self) -> int:
        """Write the last, partial chunk; return the number of rows written. Cost O(chunk bytes)."""
        if self._pending_rows:
            self._flush_pending()
        if self.written != self.array.shape[0]:
            raise ValueError(f"wrote {self.written} rows into an array of {self.array.shape[0]}")
        return self.written

    def _flush_pending(self) -> None:
        rows = self._pending[0] if len(self._pending) == 1 else np.concatenate(self._pending)
        self._pending, self._pending_rows = [], 0
        self._store(rows)

    def _store(self, rows: np.ndarray) -> None:
        stop = self.written + rows.shape[0]
        for low in range(0, rows.shape[0], self.chunk_rows):
            self.digests.append(chunk_digest(rows[low: low + self.chunk_rows]))
        self.array[self.written:stop] = rows
        self.written = stop
