"""Data sets on an `ObjectStore` (an S3 bucket, or a folder through the same interface): the folder store's
behaviour and documents (`store.datasets.dataset_store`) with create-once writes and compare-and-swap where the
folder store takes ``flock``, hard links and renames, so that machines sharing nothing but the store can upload,
commit and read (issue 57).

Keys under ``datasets/{name}/``::

    meta.json                               the set's document (`DatasetRecord`): created once; every later
                                            write a compare-and-swap on the version read, the commit point
    chunks/{index:06d}.{sha256}.zarr/...    an uploaded chunk's rows, a zarr v3 array written once where it stays
    chunks/{index:06d}.{sha256}.json        its digests (`SegmentDigests`)
    staging/...                             the claims of chunks uploaded, not yet committed
                                            (`store.datasets.object_staging`)
    deleting                                a delete in progress

* **upload**: a chunk's rows are written once, in their committed form, under a name of their index and digest,
  then the index is claimed for them (created once); a second upload of the index with the same rows writes
  nothing, with other rows it is a `Conflict`, as on the folder. An upload that finds, once claimed, that a
  commit has meanwhile taken in another upload of its index compares with that one and says so.
* **commit** by reference: each staged chunk's array becomes one segment of the next version, recorded by a
  compare-and-swap of ``meta.json``; no row is read or written again, so a data set's rows cross the network
  once. Of two racing commits one wins and the other finds its chunks committed. Readers only open what
  ``meta.json`` names; an upload whose claim was lost leaves no array behind, an upload that died before its
  claim leaves one that the set's delete removes.
* **delete**: a ``deleting`` marker, ``meta.json``, every other object, the marker; a create meanwhile is a
  `Conflict` ("being deleted; try again"); a marker older than `STALE_DELETE_S` is a delete that died.
* **reads** go through `store.datasets.object_rows.CachedRows`: each zarr chunk verified against its digest
  once per process and kept in the process's read cache, so a fit's later passes read nothing from the store;
  a version of many segments opens each when first read, once per process (`store.datasets.object_segments`).

Left to the folder store: registering an external zarr array (`DatasetStore.register`) and repairing damaged
committed chunks by uploading them again; here a damaged chunk is marked and named (`Corrupt`), and the way
out is to delete the set and upload it again.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable

import numpy as np
import zarr

from store.atomic import dump_json, parse_json
from store.checksums import chunk_digest, version_checksum
from store.datasets import object_staging as staging
from store.datasets.commit import refuse_gaps
from store.datasets.dataset_store import MAX_CHUNK_INDEX
from store.datasets.integrity import verify_rows
from store.datasets.object_segments import LazySegment, open_segment
from store.datasets.records import (
    META,
    DatasetInfo,
    DatasetRecord,
    SegmentRecord,
    check_new,
    ready_info,
)
from store.datasets.repair import refuse_marked
from store.datasets.rows import prepare_rows
from store.datasets.segments import SegmentedRows
from store.datasets.staging import damaged_message
from store.datasets.zarr_rows import zarr_chunk_rows
from store.errors import Conflict, Corrupt, Damaged, Invalid, NotFound
from store.folders import page_of
from store.names import validate_name
from store.npy import DAMAGED
from store.objects.interface import ObjectExists, ObjectMissing, ObjectStore, VersionMismatch, child_names
from store.objects.leases import delete_behind_marker, marker_live
from store.timestamps import utc_now

STALE_DELETE_S = 60.0
DELETING = "deleting"
_ATTEMPTS = 20


class ObjectDatasetStore:
    """Data sets under ``datasets/`` of an object store; the public methods and errors of
    `store.datasets.dataset_store.DatasetStore` (module docstring for what differs). Thread- and process-safe,
    across machines."""

    def __init__(self, objects: ObjectStore, recent_s: float = 0.0, clock: Callable[[], float] = time.monotonic):
        self.objects, self.recent_s, self.clock = objects, float(recent_s), clock
        self._recent: dict[str, tuple[float, DatasetInfo]] = {}  # by set: when described (`clock`), the answer

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
        check_new(name, n_features, dtype)
        prefix = self._prefix(name)
        if self.objects.version(prefix + META) is not None:
            raise Conflict(f"data set {name!r} already exists", field="name")
        if self._deleting(name):
            raise Conflict(f"data set {name!r} is being deleted; try again", field="name")
        self.objects.delete_many(list(self.objects.keys(prefix)))  # a dead create's or delete's objects
        try:
            self.objects.create(prefix + META, dump_json(DatasetRecord.new(name, int(n_features), dtype).document()))
        except ObjectExists:
            raise Conflict(f"data set {name!r} already exists", field="name") from None
        return self._fresh(name)

    def register(self, name: str, url: str, dtype: str | None = None) -> DatasetInfo:
        """Not on an object store: `Invalid` on ``source`` saying to upload the rows instead. O(1)."""
        validate_name(name)
        raise Invalid("source", "registering an existing zarr array needs a folder data dir (KPCA_DATA_DIR a "
                                "path); on an object store, upload its rows (kpca upload, or PUT .../chunks/{index})")

    def _deleting(self, name: str) -> bool:
        """Whether a delete of ``name`` is in progress (its marker, younger than `STALE_DELETE_S`). One read."""
        return marker_live(self.objects, self._prefix(name) + DELETING, STALE_DELETE_S)

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
        of the staged chunks (their rows come from the listing); with ``recent_s`` (the API's store), none while
        this store's own last description is younger than it and the set was not written through this store
        since (another process's writes are seen within ``recent_s``)."""
        recent = self._recent.get(name) if self.recent_s > 0 else None
        if recent is not None and self.clock() - recent[0] < self.recent_s:
            return recent[1]
        return self._fresh(name)

    def _written(self, name: str) -> None:
        """Forget this store's last description of ``name`` (it was written through this store)."""
        self._recent.pop(name, None)

    def _fresh(self, name: str) -> DatasetInfo:
        """The description of ``name`` read now (what a write answers), kept as this store's last one."""
        info = self._describe(name)
        if self.recent_s > 0:
            self._recent[name] = (self.clock(), info)
        return info

    def _describe(self, name: str) -> DatasetInfo:
        for _attempt in range(3):
            meta, version = self._read_meta(name)
            listing = staging.staged_listing(self.objects, self._prefix(name), meta.committed_chunks)
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
        """Delete a data set and all its objects (module docstring). `NotFound` if there is none. Cost: two
        listings and a bulk delete (`store.objects.leases.delete_behind_marker`)."""
        prefix = self._prefix(name)
        self._written(name)
        if not any(key != prefix + DELETING for key in self.objects.keys(prefix)):
            raise NotFound("dataset", name)
        delete_behind_marker(self.objects, prefix, prefix + META, prefix + DELETING, time.time())

    def exists(self, name: str) -> bool:
        """Whether data set ``name`` exists (its ``meta.json``, or its objects without it). One or two requests."""
        return self.objects.version(self._prefix(name) + META) is not None or self._orphaned(name)

    def n_features(self, name: str) -> int:
        """The columns of data set ``name``. Cost: one read."""
        return self._read_meta(validate_name(name))[0].n_features

    # ----------------------------------------------------------------- upload
    def put_chunk(self, name: str, index: int, rows: np.ndarray) -> DatasetInfo:
        """Store chunk ``index`` for the set's next version; idempotent by index (as `DatasetStore.put_chunk`):
        its rows written once, where they stay (`store.datasets.object_staging`), then claimed. Cost: the rows
        encoded and put once, a claim and a mark, a read of ``meta.json`` and `get`; an upload of rows already
        claimed writes nothing."""
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
                return self._fresh(name)
            sha256 = chunk_digest(converted)
            claimed = staging.claim_of(self.objects, prefix, index)
            if claimed is None:
                staging.write_chunk_array(self.objects, prefix, index, converted)
            elif claimed[0] != sha256:
                if self._intact(prefix, index, claimed[0]):
                    raise Conflict(staging.claimed_rows_message(index, name), field="index")
                staging.write_chunk_array(self.objects, prefix, index, converted)
                self.objects.delete(staging.claim_key(prefix, index))  # it names rows that are gone: ours replace them
            other = staging.claim(self.objects, prefix, index, sha256, converted.shape[0])
            if other is not None:  # another upload of other rows claimed the index first
                staging.remove_chunk_array(self.objects, prefix, index, sha256)
                raise Conflict(staging.claimed_rows_message(index, name), field="index")
            info = self._fresh(name)
            if info.version and index < len(info.chunks) and index not in info.staged:
                # a commit took in another upload of this index meanwhile: compare with what it committed
                staging.unclaim(self.objects, prefix, index, converted.shape[0], sha256)
                continue
            return info
        raise Conflict(f"data set {name!r} is changing; try again", field="name")

    def _intact(self, prefix: str, index: int, sha256: str) -> bool:
        """Whether chunk ``index``'s array of rows ``sha256`` is in the store (its digest document). One request."""
        return self.objects.version(prefix + staging.array_base(index, sha256) + ".json") is not None

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

    # ----------------------------------------------------------------- commit
    def commit(self, name: str) -> DatasetInfo:
        """Commit the staged chunks as the next version (as `DatasetStore.commit`): each staged chunk's array, as
        it was uploaded, becomes a segment of it, recorded by a compare-and-swap of ``meta.json``; no row is read
        or written. Cost: a listing, a request per staged chunk (its array is there) and a write of ``meta.json``;
        O(committed chunks) to checksum the recorded digests."""
        prefix = self._prefix(name)
        for _attempt in range(_ATTEMPTS):
            meta, version = self._read_meta(name)
            committed = meta.committed_chunks
            staged = staging.staged_listing(self.objects, prefix, committed)
            if not staged.rows:
                if meta.status == "ready":
                    self._clean(meta, staged)
                    return meta.info({})
                if self._read_meta(name)[1] != version:  # a racing commit took the chunks in after our read
                    continue
                raise Invalid("chunks", "no chunks uploaded")
            refuse_gaps(meta, committed, set(staged.rows))
            for index in staged.indices:
                if staged.rows[index] == DAMAGED:
                    raise Invalid("chunks", damaged_message(index, "its upload record is missing"))
                if not self._intact(prefix, index, staged.digests[index]):
                    raise Invalid("chunks", damaged_message(index, "its rows are missing from the store"))
            self._add_version(meta, staged)
            try:
                self.objects.replace(prefix + META, dump_json(meta.document()), version)
            except VersionMismatch:  # another commit (or a mark) was first: look again
                continue
            self._clean(meta, staged)
            self._written(name)
            return meta.info({})
        raise Conflict(f"data set {name!r} is changing; try again", field="name")

    def _add_version(self, meta: DatasetRecord, staged: staging.Staged) -> None:
        """Record the staged chunks' arrays as segments of the next version in ``meta`` (not yet stored)."""
        first_row, number = (meta.n_rows if meta.status == "ready" else 0), len(meta.segments)
        itemsize = np.dtype(meta.dtype).itemsize
        new_rows = sum(staged.rows[i] for i in staged.indices)
        chunk_rows = meta.zarr_chunk_rows or zarr_chunk_rows(new_rows, meta.n_features, itemsize)
        segments = []
        for offset, index in enumerate(staged.indices):
            base, n_rows = staging.array_base(index, staged.digests[index]), staged.rows[index]
            segments.append(SegmentRecord(
                segment=number + offset + 1, location=base + ".zarr", external=False, first_chunk=index, n_chunks=1,
                first_row=first_row, n_rows=n_rows, digests=base + ".json",
                chunk_rows=min(n_rows, zarr_chunk_rows(n_rows, meta.n_features, itemsize))))
            first_row += n_rows
        checksum = version_checksum(self._recorded_digests(meta) + [staged.digests[i] for i in staged.indices])
        meta.add_version(segments, checksum, utc_now())
        meta.zarr_chunk_rows = chunk_rows

    def _recorded_digests(self, meta: DatasetRecord) -> builtins.list[str]:
        """The sha256 of every committed chunk, in index order: from a one-chunk segment's name (its array is named
        by it), else its digest document. O(committed chunks); a read per segment of several chunks."""
        digests = []
        for segment in meta.segments:
            named = staging.digest_of(segment.location) if segment.n_chunks == 1 else None
            digests.extend([named] if named else segment.read_digests(self._load(meta.name), meta.name).chunk_sha256)
        return digests

    def _clean(self, meta: DatasetRecord, staged: staging.Staged) -> None:
        """After a commit: remove the claims and marks of the chunks it took in (and older leftovers). A bulk
        delete."""
        self.objects.delete_many([k for k in staged.all_keys if staging.staged_index(k) < meta.committed_chunks])

    # ------------------------------------------------------------------- read
    def open_array(self, name: str, version: int | None = None):
        """The rows of a committed version as a read-only row source (as `DatasetStore.open_array`): one segment's
        `CachedRows`, or a `store.datasets.segments.SegmentedRows` over its segments, each opened when first read
        and kept by the process (`store.datasets.object_segments`). Raises as it. Cost: a read of ``meta.json``;
        reads as `CachedRows`."""
        meta, _ = self._read_meta(validate_name(name))
        if meta.status != "ready":
            raise Conflict(f"data set {name!r} is not ready (status {meta.status}); commit it first", field="dataset")
        record = meta.find_version(version)
        refuse_marked(meta, record)
        prefix, segments = self._prefix(name), meta.segments_of(record)

        def opener(segment: SegmentRecord):
            return lambda: open_segment(self.objects, prefix, name, segment, record.version, self._load(name),
                                        lambda chunks: self._mark(name, chunks))

        if len(segments) == 1:
            return opener(segments[0])()
        assert meta.zarr_chunk_rows is not None, "a data set with a committed version records its chunk rows"
        return SegmentedRows([LazySegment(opener(s), s.n_rows, meta.n_features, meta.dtype) for s in segments],
                             meta.dtype, meta.zarr_chunk_rows, [s.n_rows for s in segments])

    def _mark(self, name: str, add=(), clear=()) -> None:
        """Set the ``corrupt`` marks of set ``name`` to (marks - ``clear``) | ``add`` by compare-and-swap."""
        self._written(name)
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
        """The committed ``version`` and each chunk's row range (as `DatasetStore.chunk_ranges`). Cost: a read of
        ``meta.json`` (the digest documents too where a segment holds several chunks)."""
        meta, _ = self._read_meta(validate_name(name))
        if meta.status != "ready":
            raise Conflict(f"data set {name!r} has no committed version (status {meta.status}): upload its chunks "
                           f"and commit it first (POST /v1/datasets/{name}/commit)", field="name")
        record = meta.find_version(version)
        try:
            segments = meta.segments_of(record)
            counts = ([s.n_rows for s in segments] if all(s.n_chunks == 1 for s in segments)
                      else meta.chunk_row_counts(self._load(name), record))
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
