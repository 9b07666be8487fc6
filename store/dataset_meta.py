"""A data set's ``meta.json`` document and its segments' digest documents: built, read, made public.

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
"committed_at"}]``; ``corrupt`` (optional): committed chunk indices found
damaged on read or by a verification, until repaired (`store.repair`). The
public ``status`` is ``"corrupt"`` while that list, or the list of damaged
staged files (``damaged_staged``), is not empty; ``meta.json`` keeps its own.

The layout of a data set folder and the meaning of versions: see `store.datasets`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from store.atomic import SCHEMA_VERSION, read_json
from store.errors import Invalid, NotFound
from store.timestamps import utc_now

DTYPES = ("float32", "float64")
MAX_FEATURES = 100_000
_PUBLIC_KEYS = (
    "name", "status", "n_features", "dtype", "n_rows", "chunks", "checksum", "zarr_chunk_rows",
    "created_at", "committed_at", "schema_version", "version", "versions", "staged", "source",
    "source_dtype",
)
_VERSION_KEYS = ("version", "n_rows", "n_chunks", "checksum", "committed_at")


def new_meta(name: str, n_features: int, dtype: str) -> dict:
    """The ``meta.json`` of a new, open data set with no version, created now. Cost O(1)."""
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


def segment_record(segment: int, location: str, external: bool, first_chunk: int, n_chunks: int,
                   first_row: int, n_rows: int, chunk_rows: int, digests: str) -> dict:
    """One entry of ``meta["segments"]`` (fields as named above). Cost O(1)."""
    return {"segment": segment, "location": location, "external": external, "first_chunk": first_chunk,
            "n_chunks": n_chunks, "first_row": first_row, "n_rows": n_rows, "chunk_rows": chunk_rows,
            "digests": digests}


def version_record(version: int, segments: list[int], n_rows: int, n_chunks: int, checksum: str,
                   committed_at: str) -> dict:
    """One entry of ``meta["versions"]`` (fields as named above). Cost O(1)."""
    return {"version": version, "segments": segments, "n_rows": n_rows, "n_chunks": n_chunks,
            "checksum": checksum, "committed_at": committed_at}


def digest_doc(segment: int, first_chunk: int, digests: list[str], counts: list[int],
               stored: list[str] | None = None) -> dict:
    """A segment's digest document: sha256 and row count of each of its (upload) chunks, and, for a
    segment the store wrote, the sha256 of each stored zarr chunk (``zarr_chunk_sha256``, verified
    on read by `store.integrity`). Cost O(chunks)."""
    doc = {"schema_version": SCHEMA_VERSION, "segment": segment, "first_chunk": first_chunk,
           "chunk_sha256": digests, "chunk_rows": counts}
    if stored is not None:
        doc["zarr_chunk_sha256"] = stored
    return doc


def committed_chunks(meta: dict) -> int:
    """Chunks of the latest committed version (0 if none). Cost O(1)."""
    versions = meta.get("versions") or []
    return int(versions[-1]["n_chunks"]) if versions else 0


def first_version_with(meta: dict, index: int) -> int:
    """The first committed version that holds chunk ``index`` (< `committed_chunks`). Cost O(versions)."""
    return next(v["version"] for v in meta["versions"] if index < v["n_chunks"])


def find_version(meta: dict, name: str, version: int | None) -> dict:
    """The record of committed ``version`` of data set ``name`` (the latest if None).

    Raises `Invalid` (field ``"version"``) if ``version`` is not an integer
    and `NotFound` (field ``"version"``) if there is no such version; the set
    must have a committed version. Cost O(versions).
    """
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


def public_meta(meta: dict, staged_rows: dict[int, int]) -> dict:
    """The public metadata `DatasetStore.get` returns, from ``meta.json`` and the staged chunks' rows.

    ``staged_rows`` maps staged chunk indices to row counts; indices below
    the committed chunk count (leftovers of a crashed commit) are ignored.
    Cost O(chunks).
    """
    committed = committed_chunks(meta)
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
        public["n_rows"] = int(sum(rows for rows in staged.values() if rows > 0))
    public["corrupt_chunks"] = sorted(int(i) for i in meta.get("corrupt") or ())
    public["damaged_staged"] = sorted(index for index, rows in staged.items() if rows < 0)
    if public["corrupt_chunks"] or public["damaged_staged"]:
        public["status"] = "corrupt"
    return public


def damaged_entry(name: str, error: Exception) -> dict:
    """What the list of data sets shows for a set whose documents cannot be read: status
    ``"corrupt"`` and the reason in ``error``. Cost O(1)."""
    public = {key: None for key in _PUBLIC_KEYS}
    public.update(name=name, status="corrupt", n_features=0, dtype="unknown", n_rows=0, chunks=[], version=0,
                  versions=[], staged=[], corrupt_chunks=[], damaged_staged=[],
                  error=f"its metadata cannot be read ({type(error).__name__}); delete the data set")
    return public


def committed_digest(folder: Path, meta: dict, index: int) -> str:
    """The recorded sha256 of committed chunk ``index`` of the set in ``folder``.

    Cost: reading the digest document of its segment, O(chunks of that segment).
    """
    for segment in meta["segments"]:
        if segment["first_chunk"] <= index < segment["first_chunk"] + segment["n_chunks"]:
            doc = read_json(folder / segment["digests"])
            return doc["chunk_sha256"][index - segment["first_chunk"]]
    raise AssertionError(f"chunk {index} is in no segment")  # pragma: no cover - index < committed


def recorded_digests(folder: Path, meta: dict) -> list[str]:
    """The recorded sha256 of every committed chunk of the set in ``folder``, in index order.

    Cost: reading every segment's digest document, O(committed chunks).
    """
    digests: list[str] = []
    for segment in meta["segments"]:
        digests.extend(read_json(folder / segment["digests"])["chunk_sha256"])
    return digests


def chunk_row_counts(folder: Path, meta: dict, record: dict) -> list[int]:
    """Rows of each (upload) chunk of the committed version ``record``, in index order, from the digest
    documents of its segments. Cost: reading those documents, O(chunks of the version)."""
    wanted = set(record["segments"])
    counts: list[int] = []
    for segment in meta["segments"]:
        if segment["segment"] in wanted:
            counts.extend(int(c) for c in read_json(folder / segment["digests"])["chunk_rows"])
    return counts[: int(record["n_chunks"])]
