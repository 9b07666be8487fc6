"""Chunked, validated data sets: staged uploads committed as immutable versions of zarr segments.

Layout under the data folder ``root``::

    datasets/{name}/meta.json                  the set's document; writing it is the commit point
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

``meta.json``
-------------
The set's document (``schema_version`` 1): name, n_features, dtype, status,
the latest version's n_rows and checksum, and the ``segments`` and
``versions`` lists; each field is documented next to the code that writes
it, in `store.datasets.records`.

Staged chunks are never listed in ``meta.json``: they are read from the
staging folder, so concurrent uploads never rewrite shared metadata. A staged
file whose index is below the committed chunk count (left by a crash between
the commit point and the removal of the staging folder) is ignored, and
removed by the next commit. Readers only ever open committed segments.
Checksums (one sha256 per chunk, one per version): see `store.checksums`.
"""

from __future__ import annotations

import builtins
import os
from pathlib import Path

import numpy as np

from store.atomic import remove_tree
from store.datasets.commit import commit_staged
from store.datasets.records import META, DatasetInfo, DatasetRecord, check_new, ready_info
from store.datasets.register import register_array
from store.datasets.repair import mark, open_segment, refuse_marked, verify_version
from store.datasets.segments import SegmentedRows
from store.datasets.staging import stage_chunk, staged_rows
from store.errors import Conflict, Corrupt, Damaged, Invalid, NotFound
from store.folders import ResourceFolders
from store.names import validate_name

MAX_CHUNK_INDEX = 1_000_000
MAX_SOURCE_LENGTH = 4096


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
        self._folders = ResourceFolders(self.root, "datasets", "dataset", noun="data set")

    # ------------------------------------------------------------------ paths
    def array_path(self, name: str, segment: int = 1) -> Path:
        """Path of segment ``segment`` of an uploaded set, ``datasets/{name}/segments/{segment:04d}.zarr``.

        The path may not exist (set not committed, or a registered set, whose
        rows live elsewhere). Cost O(1).
        """
        return self._folders.path(name) / "segments" / f"{int(segment):04d}.zarr"

    # --------------------------------------------------------------- metadata
    def create(self, name: str, n_features: int, dtype: str) -> DatasetInfo:
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
        DatasetInfo
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
        check_new(name, n_features, dtype)
        self._folders.claim(name, META, DatasetRecord.new(name, int(n_features), dtype).document())
        return self.get(name)

    def register(self, name: str, url: str, dtype: str | None = None) -> DatasetInfo:
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
        DatasetInfo
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
        Writes two small files. The array is assumed not to change afterwards:
        `open_array` refuses it if its shape or dtype did or a local path now
        resolves elsewhere (`Conflict` on ``source``), and its reads are
        checked against the row chunk digests taken here (`Corrupt`).
        """
        folder = self._folders.path(name)
        if (folder / META).exists():
            raise Conflict(f"data set {name!r} already exists", field="name")
        if not isinstance(url, str) or not url or len(url) > MAX_SOURCE_LENGTH:
            raise Invalid("source", f"source must be a path or URL of 1 to {MAX_SOURCE_LENGTH} characters")
        register_array(self._folders, name, url, dtype)
        return self.get(name)

    def get(self, name: str) -> DatasetInfo:
        """Public metadata of a data set.

        Returns
        -------
        DatasetInfo
            ``name, status, n_features, dtype, n_rows, chunks, checksum,
            zarr_chunk_rows, created_at, committed_at, schema_version,
            version, versions, staged, source, source_dtype, corrupt_chunks,
            damaged_staged``.

            * ``status``: ``"open"`` until a version is committed, then
              ``"ready"``; ``"corrupt"`` while ``corrupt_chunks`` (committed
              chunks found damaged) or ``damaged_staged`` is not empty.
            * ``version``: latest committed version (0 if none); ``versions``:
              a `store.datasets.records.VersionInfo` per version (``version,
              n_rows, n_chunks, checksum, committed_at``).
            * ready: ``n_rows, chunks (0..k-1), checksum, committed_at`` describe
              the latest version; open: ``chunks`` and ``n_rows`` count the
              received chunks.
            * ``staged``: sorted indices uploaded but not yet committed.
            * ``source``: ``SourceRecord(zarr=url)`` for a registered array,
              else None; ``source_dtype`` its own dtype.

        Raises
        ------
        NotFound
            No such data set.
        Damaged
            Its ``meta.json`` is damaged (`store.datasets.records.DatasetRecord.read`): a 409 ``corrupt``.

        Notes
        -----
        Cost: a read of a small file and two ``stat`` of it (a second read when
        it was written meanwhile), plus a listing of the staging folder and one
        ``stat`` per staged chunk (row counts come from the ``.npy`` headers and
        are cached); ``chunks`` is O(number of chunks) long.
        """
        validate_name(name)
        for _attempt in range(3):
            try:
                before = self._folders.signature(name, META)
            except NotFound:
                self._read_meta(name)  # Damaged if the set's files are there without it
                raise
            meta = self._read_meta(name)
            try:
                staged = staged_rows(self._folders.path(name)) or {}
            except FileNotFoundError:
                continue  # a chunk vanished mid-listing: a commit just finished; read again
            if self._folders.signature(name, META) != before and self._read_meta(name).version != meta.version:
                continue  # a commit happened while listing: the listing may mix two states
            return meta.info(staged)
        raise Conflict(f"data set {name!r} is changing; try again", field="name")

    def ready(self, name: str, field: str = "dataset") -> DatasetInfo:
        """Public metadata (`get`) of a data set that has a committed version, for a caller that needs
        its rows: `NotFound` or `Conflict` naming ``field`` otherwise (the latter says to commit). Cost: `get`."""
        return ready_info(self.get, name, field)

    def list(self, after: str | None = None, limit: int | None = None) -> list[DatasetInfo]:
        """Metadata of every data set, sorted by name; only names after ``after`` and at most ``limit``
        of them if given (a page). A set whose documents cannot be read is listed as corrupt
        (`DatasetInfo.damaged`). Cost: a folder listing plus `get` for each set returned."""
        def read(name: str) -> DatasetInfo | None:
            try:
                return self.get(name)
            except (NotFound, Invalid):
                return None
            except Damaged as exc:
                return DatasetInfo.damaged(name, exc)
            except (OSError, ValueError, KeyError, TypeError) as exc:  # a damaged document: flag, don't fail
                return DatasetInfo.damaged(name, exc)

        return self._folders.page(read, after, limit)

    def delete(self, name: str) -> None:
        """Delete a data set and all its files (never a registered array's own files).

        Waits for running uploads and commits. The folder is renamed to a
        hidden tombstone before removal, so a half-deleted set is never
        visible. Raises `NotFound` if there is no such set; a set whose
        ``meta.json`` is damaged is deleted all the same. Cost O(files in the
        data set folder).
        """
        folder = self._folders.path(name)
        self._require(name)
        with self._folders.locked(name, shared=False):
            if not self._folders.present(name, META):
                raise NotFound(self._folders.kind, name)  # deleted meanwhile
            remove_tree(folder)

    def exists(self, name: str) -> bool:
        """Whether data set ``name`` exists: its ``meta.json`` does, readable or damaged, or its files do
        without it (`store.folders.ResourceFolders.orphaned`). `Invalid` for a bad name. Cost one
        ``stat``; a listing when ``meta.json`` is missing."""
        return os.path.lexists(self._folders.path(name) / META) or self._folders.orphaned(name, META)

    def n_features(self, name: str) -> int:
        """The columns of data set ``name``, as `get` would say, without listing its staged chunks:
        `NotFound`, or `Damaged` for an unreadable ``meta.json``, as `get`. Cost: one read of a small file."""
        return self._read_meta(validate_name(name)).n_features

    # ----------------------------------------------------------------- upload
    def put_chunk(self, name: str, index: int, rows: np.ndarray) -> DatasetInfo:
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
        DatasetInfo
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
        with self._folders.locked(name, shared=True):
            meta = self._read_meta(name)
            if stage_chunk(self._folders.path(name), name, meta, int(index), rows):
                return self.get(name)  # staged or found committed: described before a commit can run
        return self.get(name)

    # ----------------------------------------------------------------- commit
    def commit(self, name: str) -> DatasetInfo:
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
        DatasetInfo
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
        with self._folders.locked(name, shared=False):
            return commit_staged(self._folders.path(name), self._read_meta(name))

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
        zarr.Array, VerifiedRows or SegmentedRows
            ``.shape`` (n_rows, n_features), ``.dtype`` (the set's dtype),
            ``.chunks`` ``(zarr_chunk_rows, n_features)``; ``rows[a:b]``,
            ``rows[a:b, :]`` and ``rows[i]`` return numpy arrays, also across
            segment boundaries. A version made of one uploaded segment is
            that zarr array wrapped in `store.datasets.integrity.VerifiedRows`, which
            checks each stored zarr chunk's sha256 the first time it is read
            (an unwrapped zarr array for segments committed before those
            digests were kept); otherwise a `store.datasets.segments.SegmentedRows`
            over the segments. Assignment raises `ValueError` (read-only).

        Raises
        ------
        NotFound
            No such data set; field ``"version"``: no such version.
        Invalid
            Field ``"version"``: not an integer.
        Corrupt
            Chunks of the version are marked corrupt, or a read meets a
            stored chunk that fails its digest or cannot be decoded (the set
            is then marked; see `store.datasets.repair`).
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
        if meta.status != "ready":
            raise Conflict(
                f"data set {name!r} is not ready (status {meta.status}); commit it first",
                field="dataset",
            )
        record = meta.find_version(version)
        refuse_marked(meta, record)
        segments = meta.segments_of(record)
        arrays = [open_segment(self._folders, meta, s, record.version) for s in segments]
        if len(arrays) == 1 and not segments[0].external:
            return arrays[0]
        assert meta.zarr_chunk_rows is not None, "a data set with a committed version records its chunk rows"
        return SegmentedRows(arrays, meta.dtype, meta.zarr_chunk_rows, [s.n_rows for s in segments])

    def chunk_ranges(self, name: str, version: int | None = None) -> tuple[int, builtins.list[tuple[int, int]]]:
        """The committed ``version`` (default the latest) and the row range ``(start, stop)`` of each of
        its chunks, in index order: chunk ``i`` of `open_array` is ``rows[start:stop]``.

        Raises as `open_array` (`NotFound` or `Invalid` on ``"version"``), but `Conflict` on ``"name"``
        for a set without a committed version; `Corrupt` (after marking the chunks) if a digest document
        of the version is missing or damaged.
        Cost: reading the version's digest documents, O(chunks).
        """
        meta = self._read_meta(validate_name(name))
        if meta.status != "ready":
            raise Conflict(f"data set {name!r} has no committed version (status {meta.status}): upload its "
                           f"chunks and commit it first (POST /v1/datasets/{name}/commit)", field="name")
        record = meta.find_version(version)
        try:
            counts = meta.chunk_row_counts(self._folders.path(name), record)
        except Corrupt as exc:  # a digest document is missing or damaged: mark its chunks, say so
            mark(self._folders, name, add=exc.chunks)
            raise Corrupt(name, record.version, exc.chunks, exc.reason) from None
        bounds = np.concatenate([[0], np.cumsum(counts)])
        return record.version, [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]

    def verify(self, name: str, version: int | None = None) -> dict:
        """Re-hash every chunk of a committed version and mark (or unmark) the damaged ones as corrupt.

        Returns ``{"ok", "version", "chunks_checked", "corrupt_chunks"}``
        (see `store.datasets.repair.verify_version`). Raises `NotFound` (no such set
        or version) or `Conflict` (no committed version). Cost O(version
        bytes) read and hashed; memory one upload chunk.
        """
        return verify_version(self._folders, validate_name(name), version)

    # ---------------------------------------------------------------- helpers
    def _read_meta(self, name: str) -> DatasetRecord:
        return DatasetRecord.read(self._folders, name)

    def _require(self, name: str) -> None:
        if not self.exists(name):
            raise NotFound(self._folders.kind, name)

