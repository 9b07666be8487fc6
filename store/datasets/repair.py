"""A data set's damaged chunks: opened verified, marked corrupt, re-verified, repaired.

* `open_segment`: a committed segment as a row source; an uploaded segment
  with recorded zarr-chunk digests is wrapped in `store.datasets.integrity.VerifiedRows`,
  whose failure marks the set (``DatasetRecord.corrupt``) and raises
  `store.errors.Corrupt` naming the data set, the version and the upload
  chunks whose rows meet the damaged zarr chunk.
* `verify_version`: re-hash every upload chunk of a version (``GET
  .../verify``), mark what fails and unmark what passes.
* `repair_staged`: during a commit, rewrite the damaged zarr chunks from the
  original rows uploaded again (staged under their committed indices), then
  unmark them.

Marks are written under the set's exclusive lock (`mark`), atomically.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import zarr

from store.checksums import chunk_digest
from store.datasets.integrity import VerifiedRows, file_digest, rewrite_chunk, upload_chunks_of, verify_rows
from store.datasets.records import DatasetRecord, SegmentDigests, SegmentRecord, VersionRecord
from store.datasets.register import open_external
from store.datasets.sources import is_url, row_chunk_length
from store.errors import Conflict, Corrupt, Invalid, StoreError


def mark(folders, name: str, add=(), clear=()) -> DatasetRecord | None:
    """Set the ``corrupt`` marks of set ``name`` to (its marks - ``clear``) | ``add``; the new record.

    Takes the set's exclusive lock; returns None (writing nothing) if the set
    is gone. Cost: one small read, and a write if the list changes.
    """
    try:
        with folders.locked(name, shared=False):
            meta = DatasetRecord.read(folders, name)
            old = set(meta.corrupt)
            new = (old - {int(i) for i in clear}) | {int(i) for i in add}
            if new != old:
                meta.corrupt = sorted(new)
                meta.write(folders.path(name))
            return meta
    except (StoreError, FileNotFoundError):
        return None


class _Mismatch(Exception):
    """A segment's metadata differs from what was committed (the message says how)."""


def _open_stored(path: Path, meta: DatasetRecord, segment: SegmentRecord, doc: SegmentDigests):
    """The uploaded segment at ``path``, its ``zarr.json`` checked against the digest recorded at commit
    and its dtype, shape and row chunk against the records (`_Mismatch` saying what differs)."""
    try:
        digest = file_digest(path / "zarr.json") if doc.zarr_json_sha256 is not None else None
    except OSError as exc:  # missing, or a folder in its place
        raise _Mismatch(f"its zarr.json cannot be read: {type(exc).__name__}") from None
    if digest != doc.zarr_json_sha256:
        raise _Mismatch("its zarr.json (dtype, shape, chunks, codecs) differs from the one committed")
    array = zarr.open_array(str(path), mode="r")
    found = (str(np.dtype(array.dtype)), tuple(int(s) for s in array.shape), int(array.chunks[0]))
    expected = (meta.dtype, (segment.n_rows, meta.n_features), segment.chunk_rows)
    if found != expected:
        raise _Mismatch(f"its zarr.json reads {found[0]} {found[1]} in chunks of {found[2]} rows, committed as "
                        f"{expected[0]} {expected[1]} in chunks of {expected[2]}")
    return array


def _local_folder(location: str, array) -> Path | None:
    """The folder of a registered array whose row chunks are single local files (not remote, not sharded,
    one chunk across all columns), else None: reads of the others are hashed every time."""
    if is_url(location) or getattr(array, "shards", None) or int(array.chunks[1]) < int(array.shape[1]):
        return None
    return Path(location)


def open_segment(folders, meta: DatasetRecord, segment: SegmentRecord, version: int):
    """Segment ``segment`` of the set described by ``meta`` as a read-only row source (see module doc).

    An uploaded segment: its digest document and ``zarr.json`` are checked (digest, dtype, shape,
    chunks) before its rows are read through `VerifiedRows`. A registered array: opened as it was
    registered (`store.datasets.register.open_external`) and read through `VerifiedRows` against the
    row chunk digests taken at registration. Raises `Corrupt` (after marking the set) if a segment
    cannot be opened or its metadata differ from what was committed. Cost: reading the segment's
    metadata (one sha256 of its ``zarr.json``) and digest document.
    """
    name = meta.name
    folder = folders.path(name)
    chunks = range(segment.first_chunk, segment.first_chunk + segment.n_chunks)
    path = folder / segment.location
    try:
        doc = segment.read_digests(folder)
        array = open_external(meta, segment) if segment.external else _open_stored(path, meta, segment, doc)
    except (MemoryError, KeyboardInterrupt, StoreError):
        raise
    except Exception as exc:
        mark(folders, name, add=chunks)
        reason = str(exc) if isinstance(exc, _Mismatch) else f"cannot be opened: {type(exc).__name__}"
        raise Corrupt(name, version, chunks, f"segment {segment.segment}: {reason}") from None
    if segment.external:
        step = row_chunk_length(array)

        def on_corrupt_external(numbers: list[int], reason: str) -> None:
            damaged = [segment.first_chunk + n for n in numbers]
            mark(folders, name, add=damaged)
            raise Corrupt(name, version, damaged, f"the registered array changed since registration: {reason}")

        return VerifiedRows(array, _local_folder(segment.location, array), doc.chunk_sha256, on_corrupt_external,
                            dtype=meta.dtype, step=step)
    stored = doc.zarr_chunk_sha256
    if stored is None:  # committed before digests of stored chunks were kept: read unverified
        return array
    step, n_rows = int(array.chunks[0]), int(array.shape[0])

    def on_corrupt(numbers: list[int], reason: str) -> None:
        chunks = set()
        for number in numbers:
            chunks.update(upload_chunks_of(doc.chunk_rows, segment.first_chunk, number * step,
                                           min((number + 1) * step, n_rows)))
        mark(folders, name, add=chunks)
        files = ", ".join(f"{segment.location}/{array.metadata.encode_chunk_key((n, 0))}" for n in numbers[:5])
        raise Corrupt(name, version, chunks, f"stored file {files}: {reason}")

    return VerifiedRows(array, path, stored, on_corrupt)


def refuse_marked(meta: DatasetRecord, record: VersionRecord) -> None:
    """Raise `Corrupt` if chunks of version ``record`` are marked corrupt in ``meta``. Cost O(marks)."""
    marked = meta.marked_in(record)
    if marked:
        raise Corrupt(meta.name, record.version, marked, "found damaged earlier and not yet repaired")


def verify_version(folders, name: str, version: int | None = None) -> dict:
    """Re-hash every chunk of ``version`` (default the latest) of set ``name``; mark and unmark.

    Returns ``{"ok", "version", "chunks_checked", "corrupt_chunks"}``.
    Cost O(version bytes) read and hashed, memory one upload chunk; no lock
    is held while reading.
    """
    meta = DatasetRecord.read(folders, name)
    if meta.status != "ready":
        raise Conflict(f"data set {name!r} has no committed version to verify; commit it first", field="name")
    record = meta.find_version(version)
    bad: list[int] = []
    checked = 0
    for segment in meta.segments_of(record):
        first = segment.first_chunk
        try:
            doc = segment.read_digests(folders.path(name))
            array = (open_external(meta, segment) if segment.external
                     else _open_stored(folders.path(name) / segment.location, meta, segment, doc))
        except StoreError:
            raise
        except Exception:
            bad.extend(range(first, first + segment.n_chunks))
            checked += segment.n_chunks
            continue
        failures = verify_rows(array, meta.dtype, doc.chunk_sha256, doc.chunk_rows)
        bad.extend(first + offset for offset, _why in failures)
        checked += len(doc.chunk_sha256)
    mark(folders, name, add=bad, clear=range(record.n_chunks))
    return {"ok": not bad, "version": record.version, "chunks_checked": checked,
            "corrupt_chunks": sorted(bad)}


def repair_staged(folder: Path, meta: DatasetRecord, uploads: dict[int, np.ndarray]) -> list[int]:
    """Rewrite the damaged zarr chunks of the set in ``folder`` from ``uploads`` (committed index ->
    the original rows, uploaded again); the indices repaired. The caller holds the exclusive lock
    and writes ``meta`` (updated in place: repaired indices unmarked).

    A damaged zarr chunk is rewritten when the rows of every upload chunk it
    holds are known: uploaded again, or read back from the segment and
    matching their digest. `Invalid` (field ``"chunks"``) names the chunks
    still needed otherwise. Cost O(rows of the damaged zarr chunks).
    """
    marked = set(meta.corrupt)
    repaired: set[int] = set()
    for segment in meta.segments:
        first = segment.first_chunk
        wanted = sorted(i for i in marked if segment.holds(i) and i in uploads)
        if not wanted or segment.external:
            continue
        path = folder / segment.location
        doc = segment.read_digests(folder)
        array = zarr.open_array(str(path), mode="r+")
        starts = np.concatenate([[0], np.cumsum(doc.chunk_rows)]).astype(int)
        step, n_rows = int(array.chunks[0]), int(array.shape[0])
        numbers = sorted({z for i in wanted for z in range(starts[i - first] // step,
                                                           (starts[i - first + 1] - 1) // step + 1)})
        for number in numbers:
            low, high = number * step, min((number + 1) * step, n_rows)
            pieces = []
            for index in upload_chunks_of(doc.chunk_rows, first, low, high):
                a, b = starts[index - first], starts[index - first + 1]
                rows = uploads.get(index)
                if rows is None:
                    rows = _read_known(array, a, b, doc.chunk_sha256[index - first])
                if rows is None:
                    raise Invalid("chunks", f"chunk {index} of data set {meta.name!r} is damaged too "
                                            f"(it shares stored rows with chunk(s) {wanted}); upload chunk "
                                            f"{index} again with its original rows and commit")
                pieces.append(rows[max(low, a) - a: min(high, b) - a])
            rewrite_chunk(path, array, number, np.concatenate(pieces))
        stored = doc.zarr_chunk_sha256
        for number in numbers:
            low, high = number * step, min((number + 1) * step, n_rows)
            if stored is not None and chunk_digest(np.asarray(array[low:high])) != stored[number]:
                raise Invalid("chunks", f"stored chunk rows {low}..{high - 1} still differ after the repair")
        repaired.update(wanted)
    if repaired:
        meta.corrupt = sorted(marked - repaired)
    return sorted(repaired)


def _read_known(array, start: int, stop: int, digest: str) -> np.ndarray | None:
    """Rows start..stop-1 of ``array`` if they decode and match ``digest``, else None."""
    try:
        rows = np.asarray(array[start:stop])
    except (MemoryError, KeyboardInterrupt):
        raise
    except Exception:
        return None
    return rows if chunk_digest(rows) == digest else None
