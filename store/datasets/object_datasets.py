"""Data sets on an `ObjectStore` (an S3 bucket, or a folder through the same interface): the folder store's
behaviour and documents (`store.datasets.dataset_store`) with create-once writes and compare-and-swap where the
folder store takes ``flock``, hard links and renames, so that machines sharing nothing but the store can upload,
commit and read (issue 57).

Keys under ``datasets/{name}/``::

    meta.json                               the set's document (`DatasetRecord`): created once; every later
                                            write a compare-and-swap on the version read, the commit point
    staging/...                             uploaded chunks not yet committed (`store.datasets.object_staging`)
    segments/{seg:04d}-{token}.zarr/...     zarr v3 array of the rows one commit added, under a fresh token
    segments/{seg:04d}-{token}.json         its digests (`SegmentDigests`)
    deleting                                a delete in progress

* **upload**: a chunk is created once at its index; a second upload of the index with the same rows is a no-op
  and with other rows a `Conflict`, as on the folder. An upload that finds, once written, that a commit has
  meanwhile taken its index in with other rows withdraws and says so.
* **commit**: the staged chunks' rows are written as a zarr array under a name no other commit uses, then their
  digests, then ``meta.json`` is replaced by compare-and-swap. Of two racing commits one wins; the other
  removes its array and finds its chunks committed. A commit that died leaves an array no record names: the
  next commit removes it. Readers only open what ``meta.json`` names.
* **delete**: a ``deleting`` marker, ``meta.json``, every other object, the marker; a create meanwhile is a
  `Conflict` ("being deleted; try again"); a marker older than `STALE_DELETE_S` is a delete that died.
* **reads** go through `store.datasets.object_rows.CachedRows`: each zarr chunk verified against its digest
  once per process and kept in the process's read cache, so a fit's later passes read nothing from the store.

Left to the folder store: registering an external zarr array (`DatasetStore.register`) and repairing damaged
committed chunks by uploading them again; here a damaged chunk is marked and named (`Corrupt`), and the way
out is to delete the set and upload it again.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import json
import time
import uuid

import numpy as np
import zarr

from store.atomic import dump_json, parse_json
from store.checksums import chunk_digest, version_checksum
from store.datasets.commit import refuse_gaps
from store.datasets.dataset_store import MAX_CHUNK_INDEX
from store.datasets.integrity import upload_chunks_of, verify_rows
from store.datasets.object_rows import CachedRows
from store.datasets.object_staging import Staged, chunk_key, mark, npy_bytes, read_checked, rows_of, staged_listing
from store.datasets.records import (
    DTYPES,
    MAX_FEATURES,
    META,
    DatasetInfo,
    DatasetRecord,
    SegmentDigests,
    SegmentRecord,
    VersionRecord,
    ready_info,
)
from store.datasets.repair import refuse_marked
from store.datasets.rows import prepare_rows
from store.datasets.staging import damaged_message, same_rows
from store.datasets.zarr_rows import AlignedRowWriter, create_row_array, zarr_chunk_rows
from store.errors import Conflict, Corrupt, Damaged, Invalid, NotFound
from store.folders import page_of
from store.names import validate_name
from store.npy import DAMAGED
from store.objects.interface import ObjectExists, ObjectMissing, ObjectStore, VersionMismatch, child_names
from store.timestamps import utc_now

STALE_DELETE_S = 60.0
DELETING = "deleting"
_ATTEMPTS = 20


class ObjectDatasetStore:
    """Data sets under ``datasets/`` of an object store; the public methods and errors of
    `store.datasets.dataset_store.DatasetStore` (module docstring for what differs). Thread- and process-safe,
    across machines."""

    def __init__(self, objects: ObjectStore):
        self.objects = objects

    # ------------------------------------------------------------------ keys
    @staticmethod
    def _prefix(name: str) -> str:
        return f"datasets/{validate_name(name)}/"

    def _load(self, name: str):
        """A reader of the set's documents by path relative to it (what `SegmentRecord.read_digests` takes)."""
        prefix = self._prefix(name)
        return lambda path: parse_json(self.objects.get(prefix + path).data, prefix + path)

    # --------------------------------------------------------------- metadata
    def create(self, name: str, n_features: int, dtype: str) -> DatasetInfo:
        """Create an empty, open data set (as `DatasetStore.create`): `Invalid` for a bad name, n_features or
        dtype, `Conflict` on ``name`` if it exists or is being deleted. Cost: a listing, a read and one write
        (plus the removal of a dead set's leftovers)."""
        validate_name(name)
        if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)):
            raise Invalid("n_features", "n_features must be an integer")
        if not 1 <= n_features <= MAX_FEATURES:
            raise Invalid("n_features", f"n_features must be between 1 and {MAX_FEATURES}, got {n_features}")
        if dtype not in DTYPES:
            raise Invalid("dtype", f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        prefix = self._prefix(name)
        if self.objects.version(prefix + META) is not None:
            raise Conflict(f"data set {name!r} already exists", field="name")
        if self._deleting(name):
            raise Conflict(f"data set {name!r} is being deleted; try again", field="name")
        for leftover in self.objects.keys(prefix):  # a dead create's or delete's objects
            self.objects.delete(leftover)
        try:
            self.objects.create(prefix + META, dump_json(DatasetRecord.new(name, int(n_features), dtype).document()))
        except ObjectExists:
            raise Conflict(f"data set {name!r} already exists", field="name") from None
        return self.get(name)

    def register(self, name: str, url: str, dtype: str | None = None) -> DatasetInfo:
        """Not on an object store: `Invalid` on ``source`` saying to upload the rows instead. O(1)."""
        validate_name(name)
        raise Invalid("source", "registering an existing zarr array needs a folder data dir (KPCA_DATA_DIR a "
                                "path); on an object store, upload its rows (kpca upload, or PUT .../chunks/{index})")

    def _deleting(self, name: str) -> bool:
        """Whether a delete of ``name`` is in progress (its marker, younger than `STALE_DELETE_S`). One read."""
        key = self._prefix(name) + DELETING
        try:
            stored = self.objects.get(key)
        except ObjectMissing:
            return False
        try:
            started = float(json.loads(stored.data)["started"])
        except (ValueError, KeyError, TypeError):
            started = 0.0
        if time.time() - started < STALE_DELETE_S:
            return True
        with contextlib.suppress(VersionMismatch):
            self.objects.delete(key, stored.version)
        return False

    def _read_meta(self, name: str) -> tuple[DatasetRecord, str]:
        """The set's ``meta.json`` and its version: `NotFound`, or `Damaged` if it does not read or is missing
        beside the set's other objects. One read (a listing when it is missing)."""
        key = self._prefix(name) + META
        try:
            stored = self.objects.get(key)
        except ObjectMissing:
            if not self._orphaned(name):
                raise NotFound("dataset", name) from None
            cause = "it is missing, but the data set's other files are there"
        else:
            try:
                return DatasetRecord.model_validate(parse_json(stored.data, key)), stored.version
            except ValueError as exc:
                cause = getattr(exc, "cause", None) or type(exc).__name__
        raise Damaged(f"data set {name!r}: its {META} cannot be read ({cause}); its rows cannot be served; "
                      f"delete the data set (DELETE /v1/datasets/{name})", field="name", cause=cause)

    def _orphaned(self, name: str) -> bool:
        prefix = self._prefix(name)
        return any(key != prefix + DELETING for key in self.objects.keys(prefix)) and not self._deleting(name)

    def get(self, name: str) -> DatasetInfo:
        """Public metadata of a data set (as `DatasetStore.get`). Cost: two reads of ``meta.json`` and a listing
        of the staged chunks (their rows come from the listing)."""
        for _attempt in range(3):
            meta, version = self._read_meta(name)
            listing = staged_listing(self.objects, self._prefix(name), meta.committed_chunks)
            if self.objects.version(self._prefix(name) + META) != version:
                continue  # a commit happened while listing: the listing may mix two states
            return meta.info(listing.rows)
        raise Conflict(f"data set {name!r} is changing; try again", field="name")

    def ready(self, name: str, field: str = "dataset") -> DatasetInfo:
        """As `DatasetStore.ready`: the metadata of a set with a committed version. Cost: `get`."""
        return ready_info(self.get, name, field)

    def list(self, after: str | None = None, limit: int | None = None) -> list[DatasetInfo]:
        """Metadata of every data set, sorted by name, a page of them with ``after`` and ``limit``; a damaged one
        listed as corrupt. Cost: one listing of every key under ``datasets/`` plus `get` per set returned."""
        def read(name: str) -> DatasetInfo | None:
            try:
                return self.get(name)
            except (NotFound, Invalid):
                return None
            except Damaged as exc:
                return DatasetInfo.damaged(name, exc)

        return page_of(child_names(self.objects, "datasets", folders_only=True), read, after, limit)

    def delete(self, name: str) -> None:
        """Delete a data set and all its objects (module docstring). `NotFound` if there is none. Cost: a
        listing and one delete per object."""
        prefix = self._prefix(name)
        if not any(key != prefix + DELETING for key in self.objects.keys(prefix)):
            raise NotFound("dataset", name)
        marker = prefix + DELETING
        self.objects.put(marker, json.dumps({"started": time.time()}).encode())
        self.objects.delete(prefix + META)
        for key in self.objects.keys(prefix):
            if key != marker:
                self.objects.delete(key)
        self.objects.delete(marker)

    def exists(self, name: str) -> bool:
        """Whether data set ``name`` exists (its ``meta.json``, or its objects without it). One or two requests."""
        return self.objects.version(self._prefix(name) + META) is not None or self._orphaned(name)

    def n_features(self, name: str) -> int:
        """The columns of data set ``name``. Cost: one read."""
        return self._read_meta(validate_name(name))[0].n_features

    # ----------------------------------------------------------------- upload
    def put_chunk(self, name: str, index: int, rows: np.ndarray) -> DatasetInfo:
        """Store chunk ``index`` for the set's next version; idempotent by index (as `DatasetStore.put_chunk`).
        Cost: the chunk's bytes written once, a mark, two reads of ``meta.json`` and `get`."""
        validate_name(name)
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise Invalid("index", "chunk index must be an integer")
        if not 0 <= index <= MAX_CHUNK_INDEX:
            raise Invalid("index", f"chunk index must be between 0 and {MAX_CHUNK_INDEX}, got {index}")
        index = int(index)
        prefix = self._prefix(name)
        for _attempt in range(_ATTEMPTS):
            meta, _ = self._read_meta(name)
            converted = prepare_rows(rows, meta.n_features, meta.dtype)
            if index < meta.committed_chunks:
                self._check_committed(name, meta, index, converted)
                return self.get(name)
            key = chunk_key(prefix, index)
            try:
                written = self.objects.create(key, npy_bytes(converted))
            except ObjectExists:
                try:
                    self._compare_staged(name, key, index, converted)
                except ObjectMissing:
                    continue  # committed (or deleted) meanwhile: look again
                return self.get(name)
            mark(self.objects, prefix, index, converted)
            if self._read_meta(name)[0].committed_chunks > index:  # a commit took the index in meanwhile
                with contextlib.suppress(VersionMismatch):
                    self.objects.delete(key, written)
                continue
            return self.get(name)
        raise Conflict(f"data set {name!r} is changing; try again", field="name")

    def _check_committed(self, name: str, meta: DatasetRecord, index: int, rows: np.ndarray) -> None:
        """A re-upload of committed chunk ``index``: nothing if its rows are the committed ones, else `Conflict`."""
        if chunk_digest(rows) == meta.committed_digest(self._load(name), index):
            if index in meta.corrupt:
                raise Conflict(f"chunk {index} of data set {name!r} is damaged in the store; repairing it by an "
                               "upload needs a folder data dir: delete the data set and upload it again",
                               field="index")
            return
        raise Conflict(f"chunk {index} of data set {name!r} is part of committed version "
                       f"{meta.first_version_with(index)} and cannot change; append new rows with chunk index >= "
                       f"{meta.committed_chunks}", field="index")

    def _compare_staged(self, name: str, key: str, index: int, rows: np.ndarray) -> None:
        """Chunk ``index`` is staged already: nothing if with these rows; replaced if it is damaged (unreadable,
        or its rows no longer match its mark); `Conflict` otherwise. `ObjectMissing` if it is gone."""
        stored = self.objects.get(key)
        prefix = self._prefix(name)
        try:
            existing = rows_of(stored.data)
        except (ValueError, EOFError):
            existing = None
        if existing is not None and same_rows(existing, rows):
            return
        marks = staged_listing(self.objects, prefix, index).digests.get(index, set())
        if existing is None or (marks and chunk_digest(existing) not in marks):
            self.objects.replace(key, npy_bytes(rows), stored.version)
            mark(self.objects, prefix, index, rows)
            return
        raise Conflict(f"chunk {index} of data set {name!r} was already uploaded with different content; staged "
                       "chunks are immutable until committed or the set is deleted", field="index")

    # ----------------------------------------------------------------- commit
    def commit(self, name: str) -> DatasetInfo:
        """Commit the staged chunks as the next version (as `DatasetStore.commit`; module docstring for how).
        Cost O(new rows * n_features) read, hashed, compressed and written, memory one chunk plus one zarr
        chunk, and O(committed chunks) to re-hash the recorded digests."""
        prefix = self._prefix(name)
        for _attempt in range(_ATTEMPTS):
            meta, version = self._read_meta(name)
            committed = meta.committed_chunks
            staged = staged_listing(self.objects, prefix, committed)
            gone = sorted(i for i in staged.digests if i not in staged.keys)
            if gone:
                raise Invalid("chunks", damaged_message(gone[0], "its file is missing"))
            if not staged.keys:
                if meta.status == "ready":
                    self._clean(meta, staged)
                    return meta.info({})
                raise Invalid("chunks", "no chunks uploaded")
            refuse_gaps(meta, committed, set(staged.keys))
            damaged = [i for i in sorted(staged.keys) if staged.rows.get(i) == DAMAGED]
            if damaged:
                raise Invalid("chunks", damaged_message(damaged[0], "unreadable"))
            segment = self._write_segment(name, meta, staged)
            try:
                self.objects.replace(prefix + META, dump_json(meta.document()), version)
            except VersionMismatch:  # another commit (or a mark) was first: drop this array, look again
                self._remove(prefix + segment.location, prefix + segment.digests)
                continue
            self._clean(meta, staged)
            return meta.info({})
        raise Conflict(f"data set {name!r} is changing; try again", field="name")

    def _write_segment(self, name: str, meta: DatasetRecord, staged: Staged) -> SegmentRecord:
        """Write the staged chunks as a new segment under a fresh name, and its digests; record it in ``meta``
        (not yet stored)."""
        prefix, committed = self._prefix(name), meta.committed_chunks
        indices = sorted(staged.keys)
        new_rows = int(sum(staged.rows[i] for i in indices))
        chunk_rows = meta.zarr_chunk_rows or zarr_chunk_rows(new_rows, meta.n_features, np.dtype(meta.dtype).itemsize)
        number = len(meta.segments) + 1
        base = f"segments/{number:04d}-{uuid.uuid4().hex[:12]}"
        location, doc_name = base + ".zarr", base + ".json"
        digests, counts = [], []
        try:
            array = create_row_array(self.objects.zarr_store(prefix + location, read_only=False), new_rows,
                                     meta.n_features, meta.dtype, chunk_rows)
            writer = AlignedRowWriter(array)
            for index in indices:
                block = read_checked(self.objects, staged, index, meta.n_features, meta.dtype)
                digests.append(chunk_digest(block))
                counts.append(int(block.shape[0]))
                writer.append(block)
            writer.close()
            zarr_json = hashlib.sha256(self.objects.get(f"{prefix}{location}/zarr.json").data).hexdigest()
            self.objects.put(prefix + doc_name, dump_json(SegmentDigests(
                segment=number, first_chunk=committed, chunk_sha256=digests, chunk_rows=counts,
                zarr_chunk_sha256=writer.digests, zarr_json_sha256=zarr_json).document()))
        except BaseException:
            self._remove(prefix + location, prefix + doc_name)
            raise
        checksum = version_checksum(meta.recorded_digests(self._load(name)) + digests)
        record = SegmentRecord(segment=number, location=location, external=False, first_chunk=committed,
                               n_chunks=len(indices), first_row=meta.n_rows if meta.status == "ready" else 0,
                               n_rows=new_rows, chunk_rows=chunk_rows, digests=doc_name)
        meta.add_version(record, checksum, utc_now())
        return record

    def _remove(self, folder: str, document: str) -> None:
        """Remove an array (every key under ``folder``) and its digest document."""
        for key in self.objects.keys(folder + "/"):
            self.objects.delete(key)
        self.objects.delete(document)

    def _clean(self, meta: DatasetRecord, staged: Staged) -> None:
        """After a commit: remove the staged chunks it took in (and older leftovers) and the arrays that no record
        names, of segments up to the latest (dead or beaten commits')."""
        prefix = self._prefix(meta.name)
        for key in staged.all_keys:
            index = int(key.rsplit("/", 1)[-1].split(".", 1)[0]) if key.rsplit("/", 1)[-1][:1].isdigit() else -1
            if index < meta.committed_chunks:
                self.objects.delete(key)
        named = {s.location for s in meta.segments} | {s.digests for s in meta.segments}
        last = len(meta.segments)
        for key in self.objects.keys(prefix + "segments/"):
            relative = key[len(prefix):]
            top = "/".join(relative.split("/")[:2])
            number = top.split("/")[1][:4]
            if top not in named and number.isdigit() and int(number) <= last:
                self.objects.delete(key)

    # ------------------------------------------------------------------- read
    def open_array(self, name: str, version: int | None = None):
        """The rows of a committed version as a read-only row source (as `DatasetStore.open_array`): one
        `CachedRows` per segment, a `store.datasets.segments.SegmentedRows` over several. Raises as it. Cost: per
        segment, its digest document and ``zarr.json`` read; reads as `CachedRows`."""
        from store.datasets.segments import SegmentedRows

        meta, _ = self._read_meta(validate_name(name))
        if meta.status != "ready":
            raise Conflict(f"data set {name!r} is not ready (status {meta.status}); commit it first", field="dataset")
        record = meta.find_version(version)
        refuse_marked(meta, record)
        segments = meta.segments_of(record)
        arrays = [self._open_segment(meta, s, record) for s in segments]
        if len(arrays) == 1:
            return arrays[0]
        assert meta.zarr_chunk_rows is not None, "a data set with a committed version records its chunk rows"
        return SegmentedRows(arrays, meta.dtype, meta.zarr_chunk_rows, [s.n_rows for s in segments])

    def _open_segment(self, meta: DatasetRecord, segment: SegmentRecord, record: VersionRecord) -> CachedRows:
        name, prefix = meta.name, self._prefix(meta.name)
        doc = segment.read_digests(self._load(name), name)
        chunks = range(segment.first_chunk, segment.first_chunk + segment.n_chunks)
        try:
            stored_json = self.objects.get(f"{prefix}{segment.location}/zarr.json").data
        except ObjectMissing:
            stored_json = b""
        if hashlib.sha256(stored_json).hexdigest() != doc.zarr_json_sha256:
            self._mark(name, chunks)
            raise Corrupt(name, record.version, chunks, f"the zarr.json of segment {segment.segment} is missing or "
                                                        "differs from the one committed")
        array = zarr.open_array(self.objects.zarr_store(prefix + segment.location), mode="r", zarr_format=3)

        def on_corrupt(numbers: builtins.list[int], reason: str) -> None:
            step = int(array.chunks[0])
            damaged = sorted({c for n in numbers for c in upload_chunks_of(
                doc.chunk_rows, segment.first_chunk, n * step, min((n + 1) * step, segment.n_rows))})
            self._mark(name, damaged)
            raise Corrupt(name, record.version, damaged, f"stored zarr chunk(s) {numbers[:5]} of segment "
                                                         f"{segment.segment}: {reason}")

        assert doc.zarr_chunk_sha256 is not None, "segments written here record their zarr chunks' digests"
        return CachedRows(array, f"{self.objects.url}/{prefix}{segment.location}", doc.zarr_chunk_sha256, on_corrupt)

    def _mark(self, name: str, add=(), clear=()) -> None:
        """Set the ``corrupt`` marks of set ``name`` to (marks - ``clear``) | ``add`` by compare-and-swap."""
        for _attempt in range(_ATTEMPTS):
            try:
                meta, version = self._read_meta(name)
            except (NotFound, Damaged):
                return
            new = (set(meta.corrupt) - {int(i) for i in clear}) | {int(i) for i in add}
            if new == set(meta.corrupt):
                return
            meta.corrupt = sorted(new)
            try:
                self.objects.replace(self._prefix(name) + META, dump_json(meta.document()), version)
                return
            except VersionMismatch:
                continue

    def chunk_ranges(self, name: str, version: int | None = None) -> tuple[int, builtins.list[tuple[int, int]]]:
        """The committed ``version`` and each chunk's row range (as `DatasetStore.chunk_ranges`). Cost: the
        version's digest documents read."""
        meta, _ = self._read_meta(validate_name(name))
        if meta.status != "ready":
            raise Conflict(f"data set {name!r} has no committed version (status {meta.status}): upload its chunks "
                           f"and commit it first (POST /v1/datasets/{name}/commit)", field="name")
        record = meta.find_version(version)
        try:
            counts = meta.chunk_row_counts(self._load(name), record)
        except Corrupt as exc:
            self._mark(name, exc.chunks)
            raise Corrupt(name, record.version, exc.chunks, exc.reason) from None
        bounds = np.concatenate([[0], np.cumsum(counts)])
        return record.version, [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]

    def verify(self, name: str, version: int | None = None) -> dict:
        """Re-hash every chunk of a committed version from the store (not the cache), mark and unmark (as
        `DatasetStore.verify`). Cost O(version bytes) read and hashed."""
        meta, _ = self._read_meta(validate_name(name))
        if meta.status != "ready":
            raise Conflict(f"data set {name!r} has no committed version to verify; commit it first", field="name")
        record = meta.find_version(version)
        bad: builtins.list[int] = []
        checked = 0
        for segment in meta.segments_of(record):
            first = segment.first_chunk
            try:
                doc = segment.read_digests(self._load(name))
                array = zarr.open_array(self.objects.zarr_store(self._prefix(name) + segment.location), mode="r",
                                        zarr_format=3)
            except (ValueError, KeyError, OSError):
                bad.extend(range(first, first + segment.n_chunks))
                checked += segment.n_chunks
                continue
            bad.extend(first + offset for offset, _why in verify_rows(array, meta.dtype, doc.chunk_sha256,
                                                                       doc.chunk_rows))
            checked += len(doc.chunk_sha256)
        self._mark(name, add=bad, clear=range(record.n_chunks))
        return {"ok": not bad, "version": record.version, "chunks_checked": checked, "corrupt_chunks": sorted(bad)}


__all__ = ["ObjectDatasetStore", "STALE_DELETE_S"]
