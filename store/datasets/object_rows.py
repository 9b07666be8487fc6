"""Rows of a data set segment kept on an object store, read through a per-process cache of verified chunks.

A pass of a fit reads every row of its data set (or of its shard) once per pass; from an object store each
read is a download. `CachedRows` reads a segment one whole zarr chunk at a time, checks the chunk's rows
against the sha256 recorded at commit (`store.datasets.records.SegmentDigests.zarr_chunk_sha256`) and keeps
the verified rows in `CHUNK_CACHE`, a least-recently-used cache of this process (a dask worker's) bounded in
bytes: a second pass over a shard that fits reads nothing from the store. A segment is written once under a
name of its own (`store.datasets.object_datasets`) and never rewritten, so the name and the chunk number say
what the cached rows are; only verified rows enter the cache.

The budget is `DEFAULT_CACHE_MB` per process unless the process's settings say otherwise (the workers'
``read_cache_mb``, set through `store.places.tune`); 0 turns the cache off (every read downloads and hashes).
Cost: a miss reads, decodes and hashes one zarr chunk (O(chunk bytes)); a hit is a copy of the rows asked for.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from store.checksums import chunk_digest
from store.datasets.segments import RowIndexing
from store.objects.interface import StoreUnavailable

DEFAULT_CACHE_MB = 1024


class ChunkCache:
    """Arrays by key, least recently used first out, holding at most ``budget`` bytes. Thread-safe."""

    def __init__(self, budget: int):
        self.budget = int(budget)
        self.held = 0
        self.hits = self.misses = 0
        self._items: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple) -> np.ndarray | None:
        """The array kept under ``key`` (read-only), None if none. O(1)."""
        with self._lock:
            found = self._items.get(key)
            if found is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return found

    def put(self, key: tuple, array: np.ndarray) -> None:
        """Keep ``array`` under ``key`` (made read-only), dropping the least recently used to fit; an array
        larger than the budget is not kept. O(arrays dropped)."""
        size = int(array.nbytes)
        if size > self.budget:
            return
        array.setflags(write=False)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.held -= int(old.nbytes)
            while self._items and self.held + size > self.budget:
                _, dropped = self._items.popitem(last=False)
                self.held -= int(dropped.nbytes)
            self._items[key] = array
            self.held += size

    def resize(self, budget: int) -> None:
        """Hold at most ``budget`` bytes from now on (dropping the least recently used to fit). O(arrays dropped)."""
        with self._lock:
            self.budget = int(budget)
            while self._items and self.held > self.budget:
                _, dropped = self._items.popitem(last=False)
                self.held -= int(dropped.nbytes)

    def clear(self) -> None:
        """Forget everything kept. O(arrays)."""
        with self._lock:
            self._items.clear()
            self.held = 0


CHUNK_CACHE = ChunkCache(DEFAULT_CACHE_MB * 2**20)


class CachedRows(RowIndexing):
    """A read-only row source over one zarr array on an object store, each zarr chunk verified once per process.

    Parameters
    ----------
    array : zarr.Array
        The segment, shape (n_rows, n_features), chunked along rows only.
    identity : str
        What names the segment uniquely and for good (its store's URL and key); the cache's key with a chunk.
    digests : list of str
        sha256 of each zarr chunk's rows, in order.
    on_corrupt : callable(list of int, str)
        Called with the damaged zarr chunk numbers and a reason; must raise.
    cache : ChunkCache, optional
        Default `CHUNK_CACHE`, the process's.

    Notes
    -----
    Indexing as `store.datasets.segments.RowIndexing`. Cost: O(rows read) for a hit; a miss reads and hashes
    whole zarr chunks.
    """

    def __init__(self, array, identity: str, digests: list[str], on_corrupt: Callable[[list[int], str], None],
                 cache: ChunkCache | None = None):
        self._array = array
        self._identity = identity
        self._digests = list(digests)
        self._on_corrupt = on_corrupt
        self._cache = CHUNK_CACHE if cache is None else cache
        self.shape = tuple(int(s) for s in array.shape)
        self.n_features = self.shape[1]
        self.dtype = np.dtype(array.dtype)
        self.chunks = (int(array.chunks[0]), self.n_features)
        self.ndim = 2
        expected = -(-self.shape[0] // self.chunks[0])
        if len(self._digests) != expected:
            on_corrupt(list(range(expected)), f"{len(self._digests)} digests recorded for {expected} stored chunks")

    def __repr__(self) -> str:
        return f"CachedRows({self._identity!r}, shape={self.shape}, dtype={self.dtype}, chunks={self.chunks})"

    def _chunk(self, number: int) -> np.ndarray:
        """The verified rows of zarr chunk ``number``, from the cache or the store."""
        key = (self._identity, number)
        rows = self._cache.get(key)
        if rows is not None:
            return rows
        step = self.chunks[0]
        try:
            rows = np.ascontiguousarray(self._array[number * step: min((number + 1) * step, self.shape[0])])
        except (MemoryError, KeyboardInterrupt):
            raise
        except Exception as exc:  # a codec failure of stored bytes; the store not answering is not damage
            if isinstance(exc, OSError) or type(exc).__module__.startswith("obstore"):
                raise StoreUnavailable(f"{self._identity}: chunk {number} could not be read ({type(exc).__name__}: "
                                       f"{str(exc)[:200]}); the store's retry time passed: check the store, then "
                                       "try again") from exc
            self._on_corrupt([number], f"cannot decode: {type(exc).__name__}: {str(exc)[:200]}")
            raise  # pragma: no cover - on_corrupt raises
        if chunk_digest(rows) != self._digests[number]:
            self._on_corrupt([number], "its rows do not match the sha256 recorded at commit")
        self._cache.put(key, rows)
        return rows

    def _read(self, start: int, stop: int) -> np.ndarray:
        """Rows start..stop-1 (a new, writable array)."""
        if stop <= start:
            return np.empty((0, self.n_features), dtype=self.dtype)
        step = self.chunks[0]
        parts = []
        for number in range(start // step, (stop - 1) // step + 1):
            low = number * step
            parts.append(self._chunk(number)[max(start, low) - low: min(stop, low + step) - low])
        return parts[0].copy() if len(parts) == 1 else np.concatenate(parts)


__all__ = ["CachedRows", "ChunkCache", "CHUNK_CACHE", "DEFAULT_CACHE_MB"]
