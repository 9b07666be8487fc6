"""Integrity of committed rows: each stored zarr chunk verified against its digest when read.

At commit every zarr chunk of a new segment gets a sha256 of its rows as
stored (`store.checksums.chunk_digest` of the decoded chunk, in the set's
dtype), kept with the upload chunks' digests in the segment's digest document
(``zarr_chunk_sha256``), and so does the segment's ``zarr.json``
(``zarr_json_sha256``: the dtype, shape, chunking and codecs that say how the
bytes are read; checked on every open, `store.datasets.repair.open_segment`).
`VerifiedRows` is the row source `DatasetStore.open_array` hands out for such a
segment, and for a registered array (its row chunks' digests, taken at
registration, of the rows cast to the set's dtype): the first read of a zarr
chunk decodes the whole chunk, hashes it and compares. Later reads skip the
hash while the chunk file is provably unchanged: same path, device and
inode (after symlinks), size, mtime *and ctime* (nanoseconds). ``os.utime`` can put an mtime
back but not a ctime, which the kernel sets to "now" on any write, rename or
``utime``; so a flipped byte whose mtime was restored is hashed again and
caught. (Only a clock set back to the exact nanosecond, or a write within the
same ctime tick as the verification, could slip through.) Arrays whose row
chunks are not single local files (remote, sharded, or chunked across
columns) are hashed on every read. A mismatch, or a chunk zarr cannot decode,
calls ``on_corrupt`` (which marks the data set and raises
`store.errors.Corrupt`).

Cost: one sha256 per zarr chunk per process while its file is unchanged
(O(chunk bytes)), plus one ``stat`` per zarr chunk per read, plus one sha256 of ``zarr.json`` (a few hundred bytes)
per open; an
array hashed on every read pays one sha256 of the rows read per read.

`verify_rows` re-hashes a version's rows by upload chunk (the unit a user
re-uploads); `rewrite_chunk` replaces one damaged zarr chunk file atomically
(repair, see `store.datasets.repair`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from store.atomic import fsync_dir, temp_path
from store.checksums import chunk_digest
from store.datasets.segments import RowIndexing

_VERIFIED: dict[tuple, None] = {}
_VERIFIED_MAX = 1 << 18
_LOCK = threading.Lock()


def _remember(key: tuple) -> None:
    with _LOCK:
        if len(_VERIFIED) >= _VERIFIED_MAX:
            _VERIFIED.clear()
        _VERIFIED[key] = None


class VerifiedRows(RowIndexing):
    """A read-only row source over one zarr array that checks each row chunk's digest.

    Parameters
    ----------
    array : zarr.Array
        The segment (or registered array), shape (n_rows, n_features).
    path : Path or None
        Its local folder, whose chunk files (``path / array.metadata.encode_chunk_key((c, 0))``)
        identify what was verified; None (a remote array, or a layout where one row chunk is not one
        file) verifies every read.
    digests : list of str
        sha256 of each row chunk's rows (cast to ``dtype``), in order.
    on_corrupt : callable(list of int, str)
        Called with the damaged row chunk numbers and a reason; must raise.
    dtype : numpy dtype, optional
        The rows' dtype when read (and hashed): default the array's; a registered array of another
        dtype is cast on read.
    step : int, optional
        Rows per digest: default the array's row chunk length.

    Notes
    -----
    Indexing as `store.datasets.segments.RowIndexing`; ``shape``, ``dtype``,
    ``chunks``, ``ndim`` as the zarr array's. Cost O(rows read); the first read of a chunk file
    reads and hashes its whole row chunk (see the module docstring for what makes a later read skip
    the hash).
    """

    def __init__(self, array, path: Path | None, digests: list[str], on_corrupt: Callable[[list[int], str], None],
                 dtype=None, step: int | None = None):
        self._array = array
        self._path = None if path is None else Path(path)
        self._digests = list(digests)
        self._on_corrupt = on_corrupt
        self.shape = tuple(int(s) for s in array.shape)
        self.n_features = self.shape[1]
        self.dtype = np.dtype(array.dtype if dtype is None else dtype)
        self.chunks = (int(step or array.chunks[0]), self.n_features)
        self.ndim = 2
        expected = -(-self.shape[0] // self.chunks[0])
        if len(self._digests) != expected:
            on_corrupt(list(range(expected)), f"{len(self._digests)} digests recorded for {expected} stored chunks")

    def __repr__(self) -> str:
        return f"VerifiedRows(shape={self.shape}, dtype={self.dtype}, chunks={self.chunks})"

    def _key(self, chunk: int) -> tuple | None:
        """What identifies the verified contents of row chunk ``chunk``'s file: its path, the device and
        inode it leads to (after symlinks), size, and modification and change times in ns. The change time (ctime)
        is set by the
        kernel on every write, rename and ``utime``, and cannot be set from user space, so a file
        changed in place and given its old mtime back gets a new key (and a new hash)."""
        if self._path is None:
            return None
        path = self._path / self._array.metadata.encode_chunk_key((chunk, 0))
        try:
            info = os.stat(path)
        except OSError:
            return None
        return (str(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns,
                self._digests[chunk], self.dtype.str)

    def _raw(self, start: int, stop: int, chunks: list[int]) -> np.ndarray:
        try:
            return np.asarray(self._array[start:stop]).astype(self.dtype, copy=False)
        except (MemoryError, KeyboardInterrupt):
            raise
        except Exception as exc:  # any codec or format failure of stored bytes
            self._on_corrupt(chunks, f"cannot decode: {type(exc).__name__}: {exc}")
            raise  # pragma: no cover - on_corrupt raises

    def _read(self, start: int, stop: int) -> np.ndarray:
        """Rows start..stop-1, each row chunk they touch verified (once per unchanged file)."""
        if stop <= start:
            return np.empty((0, self.n_features), dtype=self.dtype)
        step = self.chunks[0]
        numbers = list(range(start // step, (stop - 1) // step + 1))
        keys = [self._key(c) for c in numbers]
        if all(key is not None and key in _VERIFIED for key in keys):
            return np.ascontiguousarray(self._raw(start, stop, numbers))
        parts = []
        for chunk, key in zip(numbers, keys):
            low, high = chunk * step, min((chunk + 1) * step, self.shape[0])
            if key is not None and key in _VERIFIED:
                parts.append(self._raw(max(start, low), min(stop, high), [chunk]))
                continue
            rows = self._raw(low, high, [chunk])
            if chunk_digest(rows) != self._digests[chunk]:
                self._on_corrupt([chunk], "its rows do not match the sha256 recorded at commit")
            if key is not None:
                _remember(key)
            parts.append(rows[max(start, low) - low: min(stop, high) - low])
        return np.ascontiguousarray(parts[0]) if len(parts) == 1 else np.concatenate(parts)


def file_digest(path: Path) -> str:
    """sha256 hex digest of the bytes of the file at ``path`` (a segment's ``zarr.json``). Cost O(file bytes)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def upload_chunks_of(counts: list[int], first_chunk: int, row_low: int, row_high: int) -> list[int]:
    """Global upload chunk indices whose rows (``counts`` per chunk, from ``first_chunk``) meet the
    segment rows [row_low, row_high). Cost O(chunks of the segment)."""
    found, start = [], 0
    for offset, count in enumerate(counts):
        stop = start + int(count)
        if start < row_high and stop > row_low:
            found.append(first_chunk + offset)
        start = stop
    return found


def verify_rows(array, dtype, digests: list[str], counts: list[int]) -> list[tuple[int, str]]:
    """Re-hash each upload chunk of one segment; the local chunk numbers that fail, with the reason.

    ``array`` is read in the row ranges given by ``counts`` (cast to ``dtype``);
    a read that fails is a failure of that chunk. Cost O(segment bytes) time,
    memory one upload chunk.
    """
    bad, start = [], 0
    for offset, (digest, count) in enumerate(zip(digests, counts)):
        stop = start + int(count)
        try:
            rows = np.asarray(array[start:stop]).astype(dtype, copy=False)
        except (MemoryError, KeyboardInterrupt):
            raise
        except Exception as exc:
            bad.append((offset, f"cannot decode: {type(exc).__name__}"))
        else:
            if chunk_digest(rows) != digest:
                bad.append((offset, "digest mismatch"))
        start = stop
    return bad


def rewrite_chunk(path: Path, array, chunk: int, rows: np.ndarray) -> None:
    """Replace zarr chunk ``chunk`` of the segment at ``path`` with ``rows`` (its whole rows), atomically.

    The chunk is encoded by writing it into a temporary array of the same
    shape, chunking and codecs beside the segment, whose chunk file is then
    renamed over the segment's. Cost O(chunk bytes).
    """
    from store.datasets.zarr_rows import create_row_array  # local: zarr_rows is a leaf module, keep imports one-way

    step = int(array.chunks[0])
    low = chunk * step
    tmp = temp_path(path)
    try:
        scratch = create_row_array(tmp, int(array.shape[0]), int(array.shape[1]), str(array.dtype), step)
        scratch[low: low + rows.shape[0]] = rows
        key = array.metadata.encode_chunk_key((chunk, 0))
        target = path / key
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp / key, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp / key, target)
        fsync_dir(target.parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
