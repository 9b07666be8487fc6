"""Chunked, validated data sets: staged uploads committed as immutable versions of zarr segments.

Layout under the data folder ``root``::

    datasets/{name}/meta.json                  the document below; writing it is the commit point
    datasets/{name}/staging/{index:06d}.npy    one uploaded, not yet committed chunk, written once
    datasets/{name}/segments/{seg:04d}.zarr    zarr v3 array of the rows one commit added
    datasets/{name}/segments/{seg:04d}.json    that segment's chunk digests and row counts
    datasets/{name}/.lock                      flock: put_chunk shared; commit and delete exclusive

Versions
--------
Chunk indices are global across versions: version 1 holds chunks 0..k1-1,
version 2 chunks 0..k2-1 (k2 > k1), and so on. The first commit writes
segment 1 from chunks 0..k1-1. Uploading to a ready set stages chunks
k..m-1 for the next version; its commit writes only those rows as the next
segment (same zarr row chunk length as segment 1, so row chunks stay
aligned when segment 1 fills whole chunks) and records version v+1 =
segments 1..v+1. Committed rows are never rewritten or copied: a model
trained on version v reads exactly the same rows through
``open_array(name, version=v)`` after any number of appends.

Registered sets
---------------
`DatasetStore.register` records an existing zarr array (local path or fsspec
URL) as version 1, whose single *external* segment is that array; the store
only ever opens it read-only and deleting the set deletes only our folder.
Its digest document is ``segments/0001.{hex}.json`` (a unique name, written
before the name is claimed). Registered sets take no uploads.

``meta.json`` (``schema_version`` 1)
------------------------------------
``name, n_features, dtype, created_at``; ``status`` (``"open"`` until the
first commit, then ``"ready"``); ``version`` (latest committed version, 0 if
none); ``n_rows, checksum, committed_at`` of the latest version;
``zarr_chunk_rows`` (row chunk length of the segments); ``source``
(``None`` or ``{"zarr": url}``) and ``source_dtype`` for registered arrays;
``segments``: ``[{"segment", "location", "external", "first_chunk",
"n_chunks", "first_row", "n_rows", "chunk_rows", "digests"}]`` where
``location`` is relative to the data set folder (or the URL of an external
array) and ``digests`` names the segment's document ``{schema_version,
segment, first_chunk, chunk_sha256: [...], chunk_rows: [...]}``;
``versions``: ``[{"version", "segments", "n_rows", "n_chunks", "checksum",
"committed_at"}]``.

Staged chunks are never listed in ``meta.json``: they are read from the
staging folder, so concurrent uploads never rewrite shared metadata. A staged
file whose index is below the committed chunk count (left by a crash between
the commit point and the removal of the staging folder) is ignored, and
removed by the next commit. Readers only ever open committed segments.
Checksums (one sha256 per chunk, one per version): see `store.checksums`.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import zarr

from store.atomic import (
    SCHEMA_VERSION,
    atomic_write_json,
    file_lock,
    fsync_dir,
    fsync_tree,
    read_json,
    remove_tree,
    temp_path,
    write_via_temp,
)
from store.checksums import chunk_digest, version_checksum
from store.errors import Conflict, Invalid, NotFound
from store.names import validate_name
from store.npy import npy_rows, read_npy, write_npy
from store.rows import prepare_rows
from store.segments import SegmentedRows
from store.sources import check_source, is_url, open_source, row_chunk_length, scan_source
from store.timestamps import utc_now
from store.zarr_rows import AlignedRowWriter, create_row_array, zarr_chunk_rows

DTYPES = ("float32", "float64")
MAX_FEATURES = 100_000
MAX_CHUNK_INDEX = 1_000_000
MAX_SOURCE_LENGTH = 4096
_STAGED = re.compile(r"(\d{6,7})\.npy")
_MISSING_SHOWN = 20
_PUBLIC_KEYS = (
    "name", "status", "n_features", "dtype", "n_rows", "chunks", "checksum", "zarr_chunk_rows",
    "created_at", "committed_at", "schema_version", "version", "versions", "staged", "source",
    "source_dtype",
)
_VERSION_KEYS = ("version", "n_rows", "n_chunks", "checksum", "committed_at")


class DatasetStore:
    """Data sets under ``root/datasets``: create or register, upload chunks, commit versions, read, delete.

    Thread- and process-safe: uploads of different (or the same) chunks may
    run concurrently, from threads or processes; commit and delete wait for
    running uploads and exclude new ones.

    Parameters
    ----------
    root : Path
        The data folder.
    """

    def __init__(self, root: Path | str):
        self.root = Path(root)
        self.folder = self.root / "datasets"

    # ------------------------------------------------------------------ paths
    def _dir(self, name: str) -> Path:
        return self.folder / validate_name(name)

    def array_path(self, name: str, segment: int = 1) -> Path:
        """Path of segment ``segment`` of an uploaded set, ``datasets/{name}/segments/{segment:04d}.zarr``.

        The path may not exist (set not committed, or a registered set, whose
        rows live elsewhere). Cost O(1).
        """
        return self._dir(name) / "segments" / f"{int(segment):04d}.zarr"

    # --------------------------------------------------------------- metadata
    def create(self, name: str, n_features: int, dtype: str) -> dict:
        """Create an empty, open data set.

        Parameters
        ----------
        name : str
            New data set name (see `validate_name`).
        n_features : int
            Columns of every row, 1 to 100 000.
        dtype : {"float32", "float64"}
            Storage dtype; uploads are converted to it.

        Returns
        -------
        dict
            Public metadata (see `get`).

        Raises
        ------
        Invalid
            Bad ``name``, ``n_features`` or ``dtype``.
        Conflict
            A data set of that name exists (field ``"name"``).

        Notes
        -----
        Cost O(1): a folder and one small file. The name is claimed by
        creating ``meta.json`` exclusively (hard link), so two concurrent
        creates cannot both succeed, and a folder left without ``meta.json`` by
        a crash does not block the name.
        """
        folder = self._dir(name)
        if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)):
            raise Invalid("n_features", "n_features must be an integer")
        if not 1 <= n_features <= MAX_FEATURES:
            raise Invalid("n_features", f"n_features must be between 1 and {MAX_FEATURES}, got {n_features}")
        if dtype not in DTYPES:
            raise Invalid("dtype", f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        meta = _new_meta(name, int(n_features), dtype)
        self._claim(name, folder, meta)
        return self.get(name)

    def register(self, name: str, url: str, dtype: str | None = None) -> dict:
        """Record an existing zarr array as a ready data set, without copying it.

        Parameters
        ----------
        name : str
            New data set name (see `validate_name`).
        url : str
            Absolute local path, or any fsspec URL zarr can open, of a 2-D
            array (n_rows >= 2, 1 <= n_features <= 100 000) of integer or
            float dtype. Opened with ``zarr.open_array(url, mode="r")``; the
            store never writes there. Policy on which locations are allowed
            belongs to the caller (the service checks its prefixes first).
        dtype : {"float32", "float64"} or None
            Dtype of the rows read from the set. None keeps a float32 or
            float64 array's dtype and reads any other (integers, float16, ...)
            as float64; the array's own dtype is reported as ``source_dtype``.

        Returns
        -------
        dict
            Public metadata (see `get`): ``status "ready"``, ``version 1``,
            ``source {"zarr": url}``.

        Raises
        ------
        Invalid
            Bad ``name`` or ``dtype``; field ``"source"``: a relative path, a
            path inside the data folder, an array zarr cannot open (its reason
            included), not 2-D, fewer than 2 rows, a non-numeric dtype, or
            ``"row i contains NaN or inf"``.
        Conflict
            A data set of that name exists (field ``"name"``).

        Notes
        -----
        Cost: one full read of the array, O(n_rows * n_features) time plus
        the transfer for remote arrays, to compute the checksum (one sha256
        per row chunk of the array, see `store.checksums`) and check that
        every value is finite; memory one row chunk (at most 64 MiB per read).
        Writes two small files. The array is assumed not to change afterwards;
        `open_array` refuses it if its shape or dtype did (content changes of
        the same shape are not detected).
        """
        folder = self._dir(name)
        if (folder / "meta.json").exists():
            raise Conflict(f"data set {name!r} already exists", field="name")
        if not isinstance(url, str) or not url or len(url) > MAX_SOURCE_LENGTH:
            raise Invalid("source", f"source must be a path or URL of 1 to {MAX_SOURCE_LENGTH} characters")
        self._refuse_own_folder(url)
        array = open_source(url)
        dtype, source_dtype = check_source(array, dtype)
        n_rows, n_features = (int(s) for s in array.shape)
        if n_features > MAX_FEATURES:
            raise Invalid(
                "source", f"the zarr array has {n_features} columns; at most {MAX_FEATURES} are supported"
            )
        digests, counts = scan_source(array, dtype, n_rows)
        chunk_rows = row_chunk_length(array)
        doc_name = f"segments/0001.{uuid.uuid4().hex[:12]}.json"
        now = utc_now()
        checksum = version_checksum(digests)
        meta = _new_meta(name, n_features, dtype)
        meta.update(
            status="ready", version=1, n_rows=n_rows, checksum=checksum, zarr_chunk_rows=chunk_rows,
            committed_at=now, source={"zarr": url}, source_dtype=source_dtype,
            segments=[_segment_record(1, url, True, 0, len(digests), 0, n_rows, chunk_rows, doc_name)],
            versions=[_version_record(1, [1], n_rows, len(digests), checksum, now)],
        )
        doc = _digest_doc(1, 0, digests, counts)
        self._claim(name, folder, meta, before=lambda: _write_new_doc(folder, doc_name, doc))
        return self.get(name)

    def get(self, name: str) -> dict:
        """Public metadata of a data set.

        Returns
        -------
        dict
            ``name, status, n_features, dtype, n_rows, chunks, checksum,
            zarr_chunk_rows, created_at, committed_at, schema_version,
            version, versions, staged, source, source_dtype``.

            * ``status``: ``"open"`` until a version is committed, then ``"ready"``.
            * ``version``: latest committed version (0 if none); ``versions``:
              ``[{"version", "n_rows", "n_chunks", "checksum", "committed_at"}]``.
            * ready: ``n_rows, chunks (0..k-1), checksum, committed_at`` describe
              the latest version; open: ``chunks`` and ``n_rows`` count the
              received chunks.
            * ``staged``: sorted indices uploaded but not yet committed.
            * ``source``: ``{"zarr": url}`` for a registered array, else None;
              ``source_dtype`` its own dtype.

        Raises
        ------
        NotFound
            No such data set.

        Notes
        -----
        Cost: two reads of a small file plus a listing of the staging folder
        and one ``stat`` per staged chunk (row counts come from the ``.npy``
        headers and are cached); ``chunks`` is O(number of chunks) long.
        """
        validate_name(name)
        for _attempt in range(3):
            meta = self._read_meta(name)
            try:
                staged = self._staged_rows(name) or {}
            except FileNotFoundError:
                continue  # a chunk vanished mid-listing: a commit just finished; read again
            if self._read_meta(name).get("version", 0) != meta.get("version", 0):
                continue  # a commit happened while listing: the listing may mix two states
            return _public(meta, staged)
        raise Conflict(f"data set {name!r} is changing; try again", field="name")

    def list(self) -> list[dict]:
        """Metadata of every data set, sorted by name. Cost: `get` for each set."""
        try:
            entries = sorted(entry.name for entry in os.scandir(self.folder) if entry.is_dir())
        except FileNotFoundError:
            return []
        listed = []
        for entry_name in entries:
            if entry_name.startswith(".") or ".." in entry_name:
                continue
            try:
                listed.append(self.get(entry_name))
            except (NotFound, Invalid):
                continue
        return listed

    def delete(self, name: str) -> None:
        """Delete a data set and all its files (never a registered array's own files).

        Waits for running uploads and commits. The folder is renamed to a
        hidden tombstone before removal, so a half-deleted set is never
        visible. Raises `NotFound` if there is no such set. Cost O(files in
        the data set folder).
        """
        folder = self._dir(name)
        self._read_meta(name)
        with self._locked(name, shared=False):
            self._read_meta(name)
            remove_tree(folder)

    # ----------------------------------------------------------------- upload
    def put_chunk(self, name: str, index: int, rows: np.ndarray) -> dict:
        """Store chunk ``index`` of a data set for its next version; idempotent by index.

        Parameters
        ----------
        name : str
            Data set name.
        index : int
            Global chunk position, 0 to 1 000 000; version v+1 holds the
            chunks of version v followed by the staged chunks k..m-1 in index
            order.
        rows : array_like of shape (n_rows, n_features)
            Float, integer or bool values (a 1-D array of length n_features is
            one row); converted with ``astype(dtype)`` as in `prepare_rows`.

        Returns
        -------
        dict
            Public metadata after the upload (see `get`).

        Raises
        ------
        NotFound
            No such data set.
        Conflict
            Field ``"index"``: chunk ``index`` is part of a committed version
            (index < k, the latest version's chunk count) with different
            content, or was already staged with different content. Field
            ``"name"``: the set is a registered (read-only) zarr array.
        Invalid
            Bad ``index`` or ``rows`` (see `prepare_rows`).

        Notes
        -----
        Re-sending a chunk whose converted rows are byte-identical is a no-op,
        whether it is staged or committed (compared by the sha256 recorded at
        commit), so an interrupted upload is resumed by sending every chunk
        again (or the missing ones). A staged chunk is written under a
        temporary name and linked into place exactly once. Cost O(chunk
        bytes) plus a `get`; for a committed index, plus reading the digest
        document of its segment (O(chunks of that segment)).
        """
        validate_name(name)
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise Invalid("index", "chunk index must be an integer")
        if not 0 <= index <= MAX_CHUNK_INDEX:
            raise Invalid("index", f"chunk index must be between 0 and {MAX_CHUNK_INDEX}, got {index}")
        index = int(index)
        with self._locked(name, shared=True):
            meta = self._read_meta(name)
            if meta.get("source"):
                raise Conflict(
                    f"data set {name!r} is a registered zarr array and is read-only; to add rows, "
                    "register the grown array under a new name",
                    field="name",
                )
            converted = prepare_rows(rows, meta["n_features"], meta["dtype"])
            committed = _committed_chunks(meta)
            if index < committed:
                if chunk_digest(converted) == self._committed_digest(name, meta, index):
                    return self.get(name)
                first = _first_version_with(meta, index)
                raise Conflict(
                    f"chunk {index} of data set {name!r} is part of committed version {first} and cannot "
                    f"change; append new rows with chunk index >= {committed}",
                    field="index",
                )
            staging = self._dir(name) / "staging"
            staging.mkdir(exist_ok=True)
            target = staging / f"{index:06d}.npy"
            if not target.exists():
                try:
                    write_via_temp(target, lambda handle: write_npy(handle, converted), exclusive=True)
                except FileExistsError:
                    pass  # a concurrent upload of the same index won: compare with it below
                else:
                    return self.get(name)
            if not _same_rows(read_npy(target), converted):
                raise Conflict(
                    f"chunk {index} of data set {name!r} was already uploaded with different "
                    "content; staged chunks are immutable until committed or the set is deleted",
                    field="index",
                )
        return self.get(name)

    # ----------------------------------------------------------------- commit
    def commit(self, name: str) -> dict:
        """Commit the staged chunks as the next version; idempotent.

        With k the latest version's chunk count (0 for an open set), the
        staged chunks must be exactly k..m-1 (m > k). Their rows are read one
        chunk at a time in index order and written as a new zarr segment
        ``segments/{v+1:04d}.zarr`` (each zarr chunk written once, into a
        temporary folder then renamed); their sha256 digests go to
        ``segments/{v+1:04d}.json``; then ``meta.json`` records version v+1
        (the commit point) and the staging folder is removed. No committed
        row is read or copied. The version checksum is computed from the
        recorded chunk digests (see `store.checksums`).

        Returns
        -------
        dict
            Public metadata (see `get`), ``status`` ``"ready"``.

        Raises
        ------
        NotFound
            No such data set.
        Invalid
            Field ``"chunks"``: an open set with no chunks, missing indices
            (listed), or a damaged staged chunk.

        Notes
        -----
        Cost O(new rows * n_features) time (read, hash, compress, write) plus
        O(k) to re-hash the recorded digests; memory one staged chunk plus one
        zarr chunk (about 1 MiB). Holds the exclusive lock: uploads wait until
        it ends. With nothing staged, committing a ready set returns its
        metadata.
        """
        validate_name(name)
        with self._locked(name, shared=False):
            meta = self._read_meta(name)
            folder = self._dir(name)
            staging = folder / "staging"
            committed = _committed_chunks(meta)
            staged = {i: path for i, path in self._staged_paths(name).items() if i >= committed}
            if not staged:
                if meta["status"] == "ready":
                    shutil.rmtree(staging, ignore_errors=True)  # only leftovers of a crashed commit
                    return _public(meta, {})
                raise Invalid("chunks", "no chunks uploaded")
            missing = sorted(set(range(committed, max(staged) + 1)) - set(staged))
            if missing:
                after = ""
                if committed:
                    after = (f"; version {meta['version']} holds chunks 0..{committed - 1}, so appended "
                             f"chunks are numbered from {committed} without gaps")
                raise Invalid(
                    "chunks", f"missing chunk indices {_show(missing)}{after}; upload them and commit again"
                )
            indices = sorted(staged)
            rows_per_chunk = self._staged_rows(name) or {}
            new_rows = int(sum(rows_per_chunk[i] for i in indices))
            n_features, dtype = meta["n_features"], meta["dtype"]
            chunk_rows = meta.get("zarr_chunk_rows") or zarr_chunk_rows(
                new_rows, n_features, np.dtype(dtype).itemsize
            )
            segment = len(meta["segments"]) + 1
            segments_dir = folder / "segments"
            segments_dir.mkdir(exist_ok=True)
            final = segments_dir / f"{segment:04d}.zarr"
            _remove_leftover_arrays(segments_dir, final)
            tmp = temp_path(final)
            digests, counts = [], []
            try:
                writer = AlignedRowWriter(create_row_array(tmp, new_rows, n_features, dtype, chunk_rows))
                for index in indices:
                    block = read_npy(staged[index])
                    _check_staged(block, index, n_features, dtype)
                    digests.append(chunk_digest(block))
                    counts.append(int(block.shape[0]))
                    writer.append(block)
                writer.close()
                fsync_tree(tmp)
                os.rename(tmp, final)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            fsync_dir(segments_dir)
            doc_name = f"segments/{segment:04d}.json"
            atomic_write_json(folder / doc_name, _digest_doc(segment, committed, digests, counts))
            checksum = version_checksum(self._recorded_digests(folder, meta) + digests)
            version = int(meta.get("version", 0)) + 1
            first_row = int(meta["n_rows"]) if meta["status"] == "ready" else 0
            now = utc_now()
            meta["segments"].append(_segment_record(
                segment, f"segments/{segment:04d}.zarr", False, committed, len(indices), first_row, new_rows,
                chunk_rows, doc_name,
            ))
            meta["versions"].append(_version_record(
                version, [s["segment"] for s in meta["segments"]], first_row + new_rows,
                committed + len(indices), checksum, now,
            ))
            meta.update(status="ready", version=version, n_rows=first_row + new_rows, checksum=checksum,
                        zarr_chunk_rows=chunk_rows, committed_at=now)
            atomic_write_json(folder / "meta.json", meta)
            remove_tree(staging)
            return _public(meta, {})

    # ------------------------------------------------------------------- read
    def open_array(self, name: str, version: int | None = None):
        """The rows of a committed version as a read-only row source of shape (n_rows, n_features).

        Parameters
        ----------
        name : str
            Data set name.
        version : int, optional
            Committed version, from 1; default the latest.

        Returns
        -------
        zarr.Array or SegmentedRows
            ``.shape`` (n_rows, n_features), ``.dtype`` (the set's dtype),
            ``.chunks`` ``(zarr_chunk_rows, n_features)``; ``rows[a:b]``,
            ``rows[a:b, :]`` and ``rows[i]`` return numpy arrays, also across
            segment boundaries. A version made of one uploaded segment is
            that zarr array itself; otherwise a `store.segments.SegmentedRows`
            over the segments. Assignment raises `ValueError` (read-only).

        Raises
        ------
        NotFound
            No such data set; field ``"version"``: no such version.
        Invalid
            Field ``"version"``: not an integer.
        Conflict
            Field ``"dataset"``: the set has no committed version. Field
            ``"source"``: a registered array can no longer be opened or
            changed shape or dtype since registration.

        Notes
        -----
        Cost: reading the metadata of each segment (O(segments)); reads
        cost O(rows read).
        """
        meta = self._read_meta(validate_name(name))
        if meta["status"] != "ready":
            raise Conflict(
                f"data set {name!r} is not ready (status {meta['status']}); commit it first",
                field="dataset",
            )
        record = _version(meta, name, version)
        folder = self._dir(name)
        segments = [s for s in meta["segments"] if s["segment"] in set(record["segments"])]
        arrays = [self._open_segment(folder, meta, s) for s in segments]
        if len(arrays) == 1 and not segments[0]["external"]:
            return arrays[0]
        return SegmentedRows(arrays, meta["dtype"], meta["zarr_chunk_rows"], [s["n_rows"] for s in segments])

    # ---------------------------------------------------------------- helpers
    def _read_meta(self, name: str) -> dict:
        try:
            return read_json(self._dir(name) / "meta.json")
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound("dataset", name) from None

    def _claim(self, name: str, folder: Path, meta: dict, before=None) -> None:
        """Create ``folder`` and claim the name by linking ``meta.json`` exclusively."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder)
        written = None
        try:
            if before is not None:
                written = before()
            atomic_write_json(folder / "meta.json", meta, exclusive=True)
        except FileExistsError:
            _unlink_quietly(written)
            raise Conflict(f"data set {name!r} already exists", field="name") from None
        except FileNotFoundError:
            _unlink_quietly(written)
            raise Conflict(f"data set {name!r} is being deleted; try again", field="name") from None

    def _refuse_own_folder(self, url: str) -> None:
        local = url[len("file://"):] if url.startswith("file://") else (None if is_url(url) else url)
        if local is None or "\0" in local:
            return
        inside = os.path.realpath(local)
        own = os.path.realpath(self.root)
        if inside == own or inside.startswith(own.rstrip(os.sep) + os.sep):
            raise Invalid("source", "source must not be inside the service's own data folder")

    @contextlib.contextmanager
    def _locked(self, name: str, shared: bool) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(file_lock(self._dir(name) / ".lock", shared=shared))
            except (FileNotFoundError, NotADirectoryError):
                raise NotFound("dataset", name) from None
            yield

    def _committed_digest(self, name: str, meta: dict, index: int) -> str:
        for segment in meta["segments"]:
            if segment["first_chunk"] <= index < segment["first_chunk"] + segment["n_chunks"]:
                doc = read_json(self._dir(name) / segment["digests"])
                return doc["chunk_sha256"][index - segment["first_chunk"]]
        raise AssertionError(f"chunk {index} is in no segment")  # pragma: no cover - index < committed

    @staticmethod
    def _recorded_digests(folder: Path, meta: dict) -> list[str]:
        digests: list[str] = []
        for segment in meta["segments"]:
            digests.extend(read_json(folder / segment["digests"])["chunk_sha256"])
        return digests

    @staticmethod
    def _open_segment(folder: Path, meta: dict, segment: dict):
        if not segment["external"]:
            return zarr.open_array(str(folder / segment["location"]), mode="r")
        location = segment["location"]
        try:
            array = zarr.open_array(location, mode="r")
        except Exception as exc:  # gone, unreadable, no longer an array: all one answer for the user
            raise Conflict(
                f"the registered zarr array at {location!r} can no longer be opened ({exc}); "
                "delete the data set or restore the array",
                field="source",
            ) from None
        expected = (segment["n_rows"], meta["n_features"])
        found_dtype = str(getattr(array.dtype, "name", array.dtype))
        if tuple(int(s) for s in array.shape) != expected or found_dtype != meta["source_dtype"]:
            raise Conflict(
                f"the registered zarr array at {location!r} changed since it was registered (shape "
                f"{expected} {meta['source_dtype']}, now {tuple(array.shape)} {found_dtype}); "
                "register it again under a new name",
                field="source",
            )
        return array

    def _staged_paths(self, name: str) -> dict[int, Path]:
        staging = self._dir(name) / "staging"
        try:
            with os.scandir(staging) as entries:
                return {
                    int(match.group(1)): Path(entry.path)
                    for entry in entries
                    if (match := _STAGED.fullmatch(entry.name))
                }
        except FileNotFoundError:
            return {}

    def _staged_rows(self, name: str) -> dict[int, int] | None:
        """Index -> rows of each staged chunk, or None if there is no staging folder.

        Raises `FileNotFoundError` if a chunk vanishes while listed (a commit removed staging).
        """
        try:
            listing = os.scandir(self._dir(name) / "staging")
        except FileNotFoundError:
            return None
        with listing as entries:
            return {
                int(match.group(1)): npy_rows(entry)
                for entry in entries
                if (match := _STAGED.fullmatch(entry.name))
            }


def _new_meta(name: str, n_features: int, dtype: str) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "n_features": n_features,
        "dtype": dtype,
        "status": "open",
        "version": 0,
        "n_rows": 0,
        "checksum": None,
        "zarr_chunk_rows": None,
        "created_at": utc_now(),
        "committed_at": None,
        "source": None,
        "source_dtype": None,
        "segments": [],
        "versions": [],
    }


def _segment_record(segment: int, location: str, external: bool, first_chunk: int, n_chunks: int,
                    first_row: int, n_rows: int, chunk_rows: int, digests: str) -> dict:
    return {"segment": segment, "location": location, "external": external, "first_chunk": first_chunk,
            "n_chunks": n_chunks, "first_row": first_row, "n_rows": n_rows, "chunk_rows": chunk_rows,
            "digests": digests}


def _version_record(version: int, segments: list[int], n_rows: int, n_chunks: int, checksum: str,
                    committed_at: str) -> dict:
    return {"version": version, "segments": segments, "n_rows": n_rows, "n_chunks": n_chunks,
            "checksum": checksum, "committed_at": committed_at}


def _digest_doc(segment: int, first_chunk: int, digests: list[str], counts: list[int]) -> dict:
    return {"schema_version": SCHEMA_VERSION, "segment": segment, "first_chunk": first_chunk,
            "chunk_sha256": digests, "chunk_rows": counts}


def _write_new_doc(folder: Path, doc_name: str, doc: dict) -> Path:
    path = folder / doc_name
    path.parent.mkdir(exist_ok=True)
    atomic_write_json(path, doc, exclusive=True)
    return path


def _unlink_quietly(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _committed_chunks(meta: dict) -> int:
    """Chunks of the latest committed version (0 if none). Cost O(1)."""
    versions = meta.get("versions") or []
    return int(versions[-1]["n_chunks"]) if versions else 0


def _first_version_with(meta: dict, index: int) -> int:
    return next(v["version"] for v in meta["versions"] if index < v["n_chunks"])


def _version(meta: dict, name: str, version: int | None) -> dict:
    latest = int(meta.get("version", 0))
    if version is None:
        return meta["versions"][-1]
    if isinstance(version, bool) or not isinstance(version, (int, np.integer)):
        raise Invalid("version", "version must be an integer")
    for record in meta["versions"]:
        if record["version"] == int(version):
            return record
    known = "its only version is 1" if latest == 1 else f"its versions are 1..{latest}"
    raise NotFound("version", str(version), field="version",
                   message=f"data set {name!r} has no version {version}; {known}")


def _public(meta: dict, staged_rows: dict[int, int]) -> dict:
    committed = _committed_chunks(meta)
    staged = {index: rows for index, rows in staged_rows.items() if index >= committed}
    ready = meta["status"] == "ready"
    public = {key: meta.get(key) for key in _PUBLIC_KEYS}
    public["version"] = int(meta.get("version", 0))
    public["versions"] = [{key: v[key] for key in _VERSION_KEYS} for v in meta.get("versions", [])]
    public["staged"] = sorted(staged)
    if ready:
        public["chunks"] = list(range(committed))
    else:
        public["chunks"] = sorted(staged)
        public["n_rows"] = int(sum(staged.values()))
    return public


def _same_rows(stored: np.ndarray, rows: np.ndarray) -> bool:
    return stored.dtype == rows.dtype and stored.shape == rows.shape and stored.tobytes() == rows.tobytes()


def _check_staged(block: np.ndarray, index: int, n_features: int, dtype: str) -> None:
    if block.ndim != 2 or block.shape[1] != n_features or block.dtype != np.dtype(dtype):
        raise Invalid("chunks", f"staged chunk {index} is damaged; delete the data set and upload again")
    if not np.isfinite(block).all():
        raise Invalid("chunks", f"chunk {index} contains NaN or inf")


def _remove_leftover_arrays(folder: Path, final: Path) -> None:
    """Remove arrays left by an interrupted commit (temporary, or renamed but not recorded)."""
    shutil.rmtree(final, ignore_errors=True)
    prefix = f".{final.name}.tmp-"
    for entry in os.scandir(folder):
        if entry.name.startswith(prefix):
            shutil.rmtree(entry.path, ignore_errors=True)


def _show(indices: list[int]) -> str:
    if len(indices) <= _MISSING_SHOWN:
        return str(indices)
    shown = ", ".join(str(i) for i in indices[:_MISSING_SHOWN])
    return f"[{shown}, ...] ({len(indices)} missing)"
