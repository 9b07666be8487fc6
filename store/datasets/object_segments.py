"""The committed segments of a data set on an object store, opened when first read and kept by the process.

A version committed by reference (`store.datasets.object_datasets`) is made of one segment per upload chunk:
opening each up front would cost a data set of a thousand chunks three thousand requests per `open_array`.
`LazySegment` opens its segment on its first read, and `open_segment` keeps what it opened (`_OPENED`, by the
store's URL and the segment's key: a segment is never rewritten under its name), so a process pays the opening
of a segment once. Opening reads the digest document and ``zarr.json``, checks the latter against its digest,
and wraps the array in `store.datasets.object_rows.CachedRows`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np
import zarr

from store.datasets.integrity import upload_chunks_of
from store.datasets.object_rows import CachedRows
from store.datasets.records import SegmentRecord
from store.datasets.segments import RowIndexing
from store.errors import Corrupt
from store.kept import KeptBySignature
from store.objects.interface import ObjectMissing, ObjectStore

#: the segments this process opened, by the store's URL and the segment's key (immutable: no signature to check)
_OPENED = KeptBySignature(8192)


def open_segment(objects: ObjectStore, prefix: str, name: str, segment: SegmentRecord, version: int,
                 load: Callable[[str], dict], damaged: Callable[[list[int]], None]) -> CachedRows:
    """Segment ``segment`` of data set ``name`` (under ``prefix``) as verified rows, opened once per process.
    ``load`` reads a document of the set; ``damaged(chunks)`` marks upload chunks corrupt. `Corrupt` (after
    marking) if the digest document is missing or damaged or ``zarr.json`` differs from the one committed; reads
    that meet a damaged chunk mark it and raise `Corrupt`. Cost: two reads and zarr's open, the first time."""
    key = (objects.url, prefix + segment.location)
    opened = _OPENED.get(key, ())
    if opened is not None:
        return opened
    chunks = list(range(segment.first_chunk, segment.first_chunk + segment.n_chunks))
    try:
        doc = segment.read_digests(load, name)
    except Corrupt as exc:
        damaged(chunks)
        raise Corrupt(name, version, chunks, exc.reason) from None
    try:
        stored_json = objects.get(f"{prefix}{segment.location}/zarr.json").data
    except ObjectMissing:
        stored_json = b""
    if hashlib.sha256(stored_json).hexdigest() != doc.zarr_json_sha256 or doc.zarr_chunk_sha256 is None:
        damaged(chunks)
        raise Corrupt(name, version, chunks, f"the zarr.json of segment {segment.segment} is missing or differs "
                                             "from the one committed")
    array = zarr.open_array(objects.zarr_store(prefix + segment.location), mode="r", zarr_format=3)

    def on_corrupt(numbers: list[int], reason: str) -> None:
        step = int(array.chunks[0])
        hit = sorted({c for n in numbers for c in upload_chunks_of(
            doc.chunk_rows, segment.first_chunk, n * step, min((n + 1) * step, segment.n_rows))})
        damaged(hit)
        raise Corrupt(name, version, hit, f"stored zarr chunk(s) {numbers[:5]} of segment {segment.segment}: "
                                          f"{reason}")

    rows = CachedRows(array, f"{objects.url}/{prefix}{segment.location}", doc.zarr_chunk_sha256, on_corrupt)
    _OPENED.put(key, (), rows)
    return rows


class LazySegment(RowIndexing):
    """A segment of known shape and dtype, opened (``opener()``) on its first read. Indexing as `RowIndexing`."""

    def __init__(self, opener: Callable[[], CachedRows], n_rows: int, n_features: int, dtype):
        self._opener = opener
        self._opened: CachedRows | None = None
        self.shape = (int(n_rows), int(n_features))
        self.n_features = int(n_features)
        self.dtype = np.dtype(dtype)
        self.ndim = 2

    def _read(self, start: int, stop: int) -> np.ndarray:
        opened = self._opened
        if opened is None:
            opened = self._opened = self._opener()
        return opened._read(start, stop)


__all__ = ["open_segment", "LazySegment"]
