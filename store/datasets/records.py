"""A data set's typed documents: ``meta.json`` (`DatasetRecord`), its segments' digest documents
(`SegmentDigests`), and the public view `DatasetStore.get` returns (`DatasetInfo`).

``meta.json`` (``schema_version`` 1), `DatasetRecord`
-----------------------------------------------------
``name, n_features, dtype, created_at``; ``status`` (``"open"`` until the
first commit, then ``"ready"``); ``version`` (latest committed version, 0 if
none); ``n_rows, checksum, committed_at`` of the latest version;
``zarr_chunk_rows`` (row chunk length of the segments); ``source``
(``None`` or ``{"zarr": url}``, `SourceRecord`) and ``source_dtype`` for
registered arrays; ``segments`` (`SegmentRecord`): ``[{"segment",
"location", "external", "first_chunk", "n_chunks", "first_row", "n_rows",
"chunk_rows", "digests"}]`` where ``location`` is relative to the data set
folder (or the URL of an external array) and ``digests`` names the segment's
document (`SegmentDigests`: ``{schema_version, segment, first_chunk,
chunk_sha256: [...], chunk_rows: [...]}``, plus ``zarr_chunk_sha256`` for a
segment the store wrote); ``versions`` (`VersionRecord`): ``[{"version",
"segments", "n_rows", "n_chunks", "checksum", "committed_at"}]``;
``corrupt`` (absent when empty): committed chunk indices found damaged on
read or by a verification, until repaired (`store.datasets.repair`). The public
``status`` is ``"corrupt"`` while that list, or the list of damaged staged
files (``damaged_staged``), is not empty; ``meta.json`` keeps its own.

The keys on disk are exactly those written before these types existed, so
data folders written by older code load, and older code reads what this
code writes. Reading a document is checked (`DatasetRecord.read`): one that
does not parse or does not fit the types is a `ValueError` naming its file
(`DatasetStore.list` shows such a set as corrupt, `DatasetInfo.damaged`).

The layout of a data set folder and the meaning of versions: see `store.datasets.dataset_store`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from store import quarantine
from store.atomic import SCHEMA_VERSION, atomic_write_json, read_json
from store.errors import Conflict, Corrupt, Damaged, Invalid, NotFound
from store.names import validate_name
from store.timestamps import utc_now

DTYPES = ("float32", "float64")
MAX_FEATURES = 100_000
META = "meta.json"

Dtype = Literal["float32", "float64"]


class _Document(BaseModel):
    model_config = ConfigDict(extra="ignore")


class SourceRecord(_Document):
    """Where a registered data set's rows live: a zarr array the store only ever opens read-only."""

    zarr: str = Field(description="absolute local path or fsspec URL of the array")
    resolved: str | None = Field(default=None, description="a local array's real path (symlinks resolved) at "
                                 "registration; reads refuse the array if it resolves elsewhere since. None "
                                 "for URLs and sets registered before it was kept")


class SegmentRecord(_Document):
    """One segment of a data set: the rows one commit (or the registration) added, as one zarr array."""

    segment: int = Field(description="segment number, from 1")
    location: str = Field(description="the array's folder, relative to the data set folder; an external "
                                      "segment's path or URL")
    external: bool = Field(description="a registered array, never written or deleted by the store")
    first_chunk: int = Field(description="global index of its first (upload) chunk")
    n_chunks: int = Field(description="its (upload) chunks")
    first_row: int = Field(description="global index of its first row")
    n_rows: int = Field(description="its rows")
    chunk_rows: int = Field(description="rows per zarr chunk of the array")
    digests: str = Field(description="its digest document (`SegmentDigests`), relative to the data set folder")

    def holds(self, index: int) -> bool:
        """Whether global chunk ``index`` is one of this segment's. Cost O(1)."""
        return self.first_chunk <= index < self.first_chunk + self.n_chunks

    def read_digests(self, folder: Path | Callable[[str], dict], name: str | None = None) -> SegmentDigests:
        """Its digest document, read from the data set folder ``folder`` (or by ``folder(path)``, the document at
        a path relative to the set: an object store's reader) and checked (`ValueError` if it does not fit
        `SegmentDigests`). With the data set's ``name``, a missing or damaged document is `store.errors.Corrupt`
        naming the segment's chunks instead. Cost O(chunks of the segment)."""
        def load() -> SegmentDigests:
            if callable(folder):
                return _checked(SegmentDigests, folder(self.digests), self.digests)
            return _checked(SegmentDigests, read_json(folder / self.digests), folder / self.digests)

        if name is None:
            return load()
        try:
            return load()
        except (OSError, KeyError, ValueError) as exc:
            raise Corrupt(name, None, range(self.first_chunk, self.first_chunk + self.n_chunks),
                          f"the digest document of segment {self.segment}, {self.digests}, cannot be read: "
                          f"{getattr(exc, 'cause', None) or type(exc).__name__}") from None


class SegmentDigests(_Document):
    """A segment's digest document: sha256 and rows of each of its (upload) chunks, and, for a segment
    the store wrote, the sha256 of each stored zarr chunk (verified on read by `store.datasets.integrity`)."""

    schema_version: int = Field(default=SCHEMA_VERSION, description="version of this document's layout")
    segment: int = Field(description="the segment's number")
    first_chunk: int = Field(description="global index of its first (upload) chunk")
    chunk_sha256: list[str] = Field(description="sha256 of each upload chunk's rows (`store.checksums`)")
    chunk_rows: list[int] = Field(description="rows of each upload chunk")
    zarr_chunk_sha256: list[str] | None = Field(default=None, description="sha256 of each stored zarr chunk's "
                                                "rows; None for a registered array and segments committed "
                                                "before they were kept")
    zarr_json_sha256: str | None = Field(default=None, description="sha256 of the segment's zarr.json as "
                                         "committed (how its bytes are read: dtype, shape, chunks, codecs); "
                                         "None for a registered array and segments committed before it was kept")

    def document(self) -> dict:
        """The document stored on disk (``zarr_chunk_sha256`` absent when None). Cost O(chunks)."""
        return self.model_dump(exclude_none=True)


class VersionInfo(_Document):
    """One committed version of a data set, as the public view (`DatasetInfo`) shows it."""

    version: int = Field(description="version number, from 1")
    n_rows: int = Field(description="rows of this version")
    n_chunks: int = Field(description="chunks of this version: global indices 0..n_chunks-1")
    checksum: str = Field(description="checksum of this version's rows (`store.checksums`)")
    committed_at: str | None = Field(default=None, description="when it was committed (ISO 8601, UTC)")


class VersionRecord(VersionInfo):
    """One committed version in ``meta.json``: the public fields and the segments it is made of."""

    segments: list[int] = Field(description="numbers of its segments, in row order")


class DatasetInfo(_Document):
    """The public view of a data set (`DatasetStore.get`): ``meta.json`` and its staged chunks.

    A ready set's ``n_rows, chunks (0..k-1), checksum, committed_at`` describe
    its latest version; an open set's ``chunks`` and ``n_rows`` count the
    received chunks. ``status`` is ``"corrupt"`` while ``corrupt_chunks`` or
    ``damaged_staged`` is not empty (and for a set whose documents cannot be
    read, with the reason in ``error``).
    """

    name: str = Field(description="the data set's name")
    status: Literal["open", "ready", "corrupt"] = Field(description="open | ready | corrupt")
    n_features: int = Field(description="columns of every row (0 if unreadable)")
    dtype: str = Field(description="float32 or float64 (\"unknown\" if unreadable)")
    n_rows: int = Field(default=0, description="rows of the latest version (open: of the received chunks)")
    chunks: list[int] = Field(default_factory=list, description="chunk indices of the latest version (open: the "
                                                                "received ones)")
    checksum: str | None = Field(default=None, description="checksum of the latest version")
    zarr_chunk_rows: int | None = Field(default=None, description="rows per stored zarr chunk")
    created_at: str | None = Field(default=None, description="when the set was created")
    committed_at: str | None = Field(default=None, description="when the latest version was committed")
    schema_version: int | None = Field(default=None, description="version of its meta.json (None if unreadable)")
    version: int = Field(default=0, description="latest committed version, 0 if none")
    versions: list[VersionInfo] = Field(default_factory=list, description="every committed version, oldest first")
    staged: list[int] = Field(default_factory=list, description="indices uploaded but not yet committed, sorted")
    source: SourceRecord | None = Field(default=None, description="the registered zarr array, if any")
    source_dtype: str | None = Field(default=None, description="the registered array's own dtype")
    corrupt_chunks: list[int] = Field(default_factory=list, description="committed chunks found damaged, until "
                                                                        "repaired")
    damaged_staged: list[int] = Field(default_factory=list, description="staged chunks whose file is damaged")
    error: str | None = Field(default=None, description="why the set's documents cannot be read")

    @classmethod
    def damaged(cls, name: str, error: Exception) -> DatasetInfo:
        """What the list of data sets shows for a set whose documents cannot be read: status
        ``"corrupt"`` and the reason in ``error`` (a `store.errors.Damaged` names its ``cause``). Cost O(1)."""
        cause = getattr(error, "cause", "") or type(error).__name__
        return cls(name=name, status="corrupt", n_features=0, dtype="unknown",
                   error=f"its metadata cannot be read ({cause}); delete the data set")

    def corrupt_in(self, version: int | None) -> list[int]:
        """The chunks marked corrupt that committed ``version`` holds (every marked chunk if it is not
        one of `versions`). Cost O(versions + marks)."""
        sizes: dict[int | None, float] = {v.version: v.n_chunks for v in self.versions}
        return [i for i in self.corrupt_chunks if i < sizes.get(version, float("inf"))]


class DatasetRecord(_Document):
    """A data set's ``meta.json`` (module docstring): what it is, its segments and committed versions."""

    schema_version: int = Field(default=SCHEMA_VERSION, description="version of this document's layout")
    name: str = Field(description="the data set's name")
    n_features: int = Field(description="columns of every row")
    dtype: Dtype = Field(description="stored number type")
    status: Literal["open", "ready"] = Field(description="open until the first commit, then ready")
    version: int = Field(default=0, description="latest committed version, 0 if none")
    n_rows: int = Field(default=0, description="rows of the latest version")
    checksum: str | None = Field(default=None, description="checksum of the latest version")
    zarr_chunk_rows: int | None = Field(default=None, description="row chunk length of the segments")
    created_at: str | None = Field(default=None, description="when the set was created (ISO 8601, UTC)")
    committed_at: str | None = Field(default=None, description="when the latest version was committed")
    source: SourceRecord | None = Field(default=None, description="the registered array; None for uploads")
    source_dtype: str | None = Field(default=None, description="the registered array's own dtype")
    segments: list[SegmentRecord] = Field(default_factory=list, description="every segment, in row order")
    versions: list[VersionRecord] = Field(default_factory=list, description="every committed version, oldest first")
    corrupt: list[int] = Field(default_factory=list, description="committed chunks marked damaged (absent "
                                                                 "on disk when empty)")

    @classmethod
    def new(cls, name: str, n_features: int, dtype: str) -> DatasetRecord:
        """The record of a new, open data set with no version, created now. Cost O(1)."""
        return cls.model_validate({"name": name, "n_features": n_features, "dtype": dtype, "status": "open",
                                   "created_at": utc_now()})

    @classmethod
    def read(cls, folders, name: str) -> DatasetRecord:
        """The ``meta.json`` of set ``name`` in ``folders`` (`store.folders.ResourceFolders`), checked.

        `NotFound` if it is missing; `store.errors.Damaged` (a 409 ``corrupt`` on
        ``name``, its ``cause`` the kind of failure, logged once: `store.quarantine`)
        if it is empty or does not parse, fails its digest, has a newer
        ``schema_version`` (`store.atomic.read_json`), does not fit the record,
        is a folder, or is missing beside the set's other files. Cost
        O(document size).
        """
        try:
            return _checked(cls, folders.read(name, META), folders.path(name) / META)
        except NotFound:
            if not folders.orphaned(name, META):
                raise
            cause = "it is missing, but the data set's other files are there"
        except (ValueError, UnicodeDecodeError, OSError) as exc:
            cause = getattr(exc, "cause", None) or type(exc).__name__
        error = Damaged(f"data set {name!r}: its {META} cannot be read ({cause}); its rows cannot be served; "
                        f"delete the data set (DELETE /v1/datasets/{name})", field="name", cause=cause)
        quarantine.note(folders.path(name) / META, error)
        raise error

    def document(self) -> dict:
        """The document stored on disk (``corrupt`` absent when empty). Cost O(document size)."""
        return self.model_dump(exclude=None if self.corrupt else {"corrupt"})

    def write(self, folder: Path) -> None:
        """Write it as ``folder/meta.json``, atomically (`store.atomic`). Cost O(document size) plus two fsyncs."""
        atomic_write_json(folder / META, self.document())

    # ------------------------------------------------------------ versions
    @property
    def committed_chunks(self) -> int:
        """Chunks of the latest committed version (0 if none). Cost O(1)."""
        return self.versions[-1].n_chunks if self.versions else 0

    def first_version_with(self, index: int) -> int:
        """The first committed version that holds chunk ``index`` (< `committed_chunks`). Cost O(versions)."""
        return next(v.version for v in self.versions if index < v.n_chunks)

    def find_version(self, version: int | None) -> VersionRecord:
        """Committed ``version`` (the latest if None); the set must have a committed version.

        Raises `Invalid` (field ``"version"``) if ``version`` is not an
        integer and `NotFound` (field ``"version"``) if there is no such
        version. Cost O(versions).
        """
        if version is None:
            return self.versions[-1]
        if isinstance(version, bool) or not isinstance(version, (int, np.integer)):
            raise Invalid("version", "version must be an integer")
        for record in self.versions:
            if record.version == int(version):
                return record
        known = "its only version is 1" if self.version == 1 else f"its versions are 1..{self.version}"
        raise NotFound("version", str(version), field="version",
                       message=f"data set {self.name!r} has no version {version}; {known}")

    def segments_of(self, record: VersionRecord) -> list[SegmentRecord]:
        """The segments committed version ``record`` is made of, in row order. Cost O(segments)."""
        wanted = set(record.segments)
        return [s for s in self.segments if s.segment in wanted]

    def marked_in(self, record: VersionRecord) -> list[int]:
        """The chunks of committed version ``record`` marked corrupt. Cost O(marks)."""
        return [i for i in self.corrupt if i < record.n_chunks]

    def add_version(self, segment: SegmentRecord | list[SegmentRecord], checksum: str, committed_at: str) -> None:
        """Record ``segment`` (the rows after every earlier segment's; or several, in row order) as the next
        version, made of every segment, and make it the latest: status ready, its rows, checksum and time; the
        last new segment's chunk rows are the set's. Cost O(segments)."""
        added = segment if isinstance(segment, list) else [segment]
        self.segments.extend(added)
        segment = added[-1]
        n_rows = segment.first_row + segment.n_rows
        self.versions.append(VersionRecord(
            version=self.version + 1, segments=[s.segment for s in self.segments], n_rows=n_rows,
            n_chunks=segment.first_chunk + segment.n_chunks, checksum=checksum, committed_at=committed_at))
        self.status, self.version, self.n_rows, self.checksum = "ready", self.version + 1, n_rows, checksum
        self.zarr_chunk_rows, self.committed_at = segment.chunk_rows, committed_at

    # ------------------------------------------------------------ digests
    def committed_digest(self, folder: Path | Callable[[str], dict], index: int) -> str:
        """The recorded sha256 of committed chunk ``index`` of the set in ``folder``.

        Cost: reading the digest document of its segment, O(chunks of that segment).
        """
        segment = next(s for s in self.segments if s.holds(index))
        return segment.read_digests(folder, self.name).chunk_sha256[index - segment.first_chunk]

    def recorded_digests(self, folder: Path | Callable[[str], dict]) -> list[str]:
        """The recorded sha256 of every committed chunk of the set in ``folder``, in index order.

        Cost: reading every segment's digest document, O(committed chunks).
        """
        return [digest for segment in self.segments for digest in segment.read_digests(folder, self.name).chunk_sha256]

    def chunk_row_counts(self, folder: Path | Callable[[str], dict], record: VersionRecord) -> list[int]:
        """Rows of each (upload) chunk of committed version ``record``, in index order, from the digest
        documents of its segments. Cost: reading those documents, O(chunks of the version)."""
        counts = [c for segment in self.segments_of(record) for c in segment.read_digests(folder, self.name).chunk_rows]
        return counts[: record.n_chunks]

    # ------------------------------------------------------------ public view
    def info(self, staged_rows: dict[int, int]) -> DatasetInfo:
        """The public view (`DatasetInfo`), from this record and the staged chunks' rows.

        ``staged_rows`` maps staged chunk indices to row counts
        (`store.npy.DAMAGED`, -1, for a damaged file); indices below the
        committed chunk count (leftovers of a crashed commit) are ignored.
        Cost O(chunks).
        """
        committed = self.committed_chunks
        staged = {index: rows for index, rows in staged_rows.items() if index >= committed}
        ready = self.status == "ready"
        corrupt_chunks = sorted(self.corrupt)
        damaged_staged = sorted(index for index, rows in staged.items() if rows < 0)
        return DatasetInfo(
            name=self.name, n_features=self.n_features, dtype=self.dtype, checksum=self.checksum,
            zarr_chunk_rows=self.zarr_chunk_rows, created_at=self.created_at, committed_at=self.committed_at,
            schema_version=self.schema_version, version=self.version, source=self.source,
            source_dtype=self.source_dtype, staged=sorted(staged),
            versions=[VersionInfo.model_validate(v.model_dump()) for v in self.versions],
            status="corrupt" if corrupt_chunks or damaged_staged else self.status,
            chunks=list(range(committed)) if ready else sorted(staged),
            n_rows=self.n_rows if ready else int(sum(rows for rows in staged.values() if rows > 0)),
            corrupt_chunks=corrupt_chunks, damaged_staged=damaged_staged)


def check_new(name: str, n_features, dtype) -> None:
    """Refuse (`Invalid` naming the field) a new data set's bad ``name``, ``n_features`` (an integer from 1 to
    `MAX_FEATURES`) or ``dtype`` (one of `DTYPES`): what every store's ``create`` checks first. O(1)."""
    validate_name(name)
    if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)):
        raise Invalid("n_features", "n_features must be an integer")
    if not 1 <= n_features <= MAX_FEATURES:
        raise Invalid("n_features", f"n_features must be between 1 and {MAX_FEATURES}, got {n_features}")
    if dtype not in DTYPES:
        raise Invalid("dtype", f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")


def ready_info(get, name: str, field: str = "dataset") -> DatasetInfo:
    """``get(name)`` (a store's public metadata) of a data set that has a committed version: `NotFound` or
    `Conflict` naming ``field`` otherwise (the latter says to commit), `Corrupt` while chunks of it are marked
    damaged. What `DatasetStore.ready` and the object store's answer. Cost: ``get``."""
    try:
        meta = get(validate_name(name, field=field))
    except NotFound:
        raise NotFound("dataset", name, field=field, message=f"data set {name!r} does not exist") from None
    except Damaged as exc:  # its meta.json is damaged: a 409 corrupt on the caller's field
        raise Damaged(exc.message, field=field, cause=exc.cause) from None
    if meta.corrupt_chunks:
        raise Corrupt(name, meta.version, meta.corrupt_chunks, "found damaged and not yet repaired")
    if meta.status != "ready" and not (meta.status == "corrupt" and meta.version):
        raise Conflict(f"data set {name!r} is {meta.status!r}, not 'ready': upload all its chunks and commit "
                       f"it first (POST /v1/datasets/{name}/commit)", field=field)
    return meta


def _checked(kind: type[_Document], doc: dict, path: Path | str):
    """``doc`` (read from ``path``) as a ``kind``; a `ValueError` naming the file if it does not fit."""
    try:
        return kind.model_validate(doc)
    except ValidationError as exc:
        raise ValueError(f"{path}: not a valid {kind.__name__}: {exc.error_count()} error(s), first "
                         f"{_first_error(exc)}") from None


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
