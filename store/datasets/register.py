"""Registered data sets: an existing zarr array recorded as version 1 without copying it, and reopened.

The array's single *external* segment is the array itself, opened read-only
and never deleted; its digest document is ``segments/0001.{hex}.json`` (a
unique name, written before the name is claimed). See `store.datasets.dataset_store`.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import zarr

from store.atomic import atomic_write_json
from store.checksums import version_checksum
from store.datasets.records import MAX_FEATURES, META, DatasetRecord, SegmentDigests, SegmentRecord, SourceRecord
from store.datasets.sources import check_source, is_url, open_source, row_chunk_length, scan_source
from store.errors import Conflict, Invalid
from store.folders import ResourceFolders
from store.timestamps import utc_now


def register_array(datasets: ResourceFolders, name: str, url: str, dtype: str | None) -> None:
    """Check, scan and record the zarr array at ``url`` as the ready data set ``name``.

    Parameters
    ----------
    datasets : ResourceFolders
        The data set folders (``root/datasets``).
    name : str
        Validated new data set name.
    url : str
        Path or URL of the array, checked to be a string of allowed length.
    dtype : {"float32", "float64"} or None
        See `DatasetStore.register`.

    Raises
    ------
    Invalid, Conflict
        As `DatasetStore.register`.

    Notes
    -----
    Cost: one full read of the array (see `store.datasets.sources.scan_source`) and
    two small writes.
    """
    refuse_own_folder(datasets.root, url)
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
    meta = DatasetRecord.new(name, n_features, dtype)
    meta.source, meta.source_dtype = SourceRecord(zarr=url, resolved=_resolved(url)), source_dtype
    meta.add_version(SegmentRecord(segment=1, location=url, external=True, first_chunk=0, n_chunks=len(digests),
                                   first_row=0, n_rows=n_rows, chunk_rows=chunk_rows, digests=doc_name),
                     version_checksum(digests), utc_now())
    doc = SegmentDigests(segment=1, first_chunk=0, chunk_sha256=digests, chunk_rows=counts).document()
    folder = datasets.path(name)
    datasets.claim(name, META, meta.document(), before=lambda: _write_new_doc(folder, doc_name, doc),
                   under_lock=True)  # its digest document before the claim, under the lock: never an orphan


def refuse_own_folder(root: Path, url: str) -> None:
    """Refuse (`Invalid`, field ``"source"``) a local ``url`` at or inside the data folder ``root``.

    URLs of other schemes pass. Cost: two ``realpath`` calls.
    """
    local = url[len("file://"):] if url.startswith("file://") else (None if is_url(url) else url)
    if local is None or "\0" in local:
        return
    inside = os.path.realpath(local)
    own = os.path.realpath(root)
    if inside == own or inside.startswith(own.rstrip(os.sep) + os.sep):
        raise Invalid("source", "source must not be inside the service's own data folder")


def _resolved(url: str) -> str | None:
    """The real path (symlinks resolved) of a local ``url``; None for other URLs. Cost: one ``realpath``."""
    local = url[len("file://"):] if url.startswith("file://") else (None if is_url(url) else url)
    return None if local is None else os.path.realpath(local)


def open_external(meta: DatasetRecord, segment: SegmentRecord):
    """Open a registered set's external ``segment`` read-only, as it was registered.

    Returns the ``zarr.Array``. Raises `Conflict` (field ``"source"``) if it
    can no longer be opened, its shape or dtype changed since registration,
    or a local array now resolves (through a symlink swapped in since) to
    another real path than at registration: its rows could come from
    outside the allowed folders. Its rows are checked against their digests
    by the caller (`store.datasets.repair.open_segment`). Cost: reading the
    array's metadata, one ``realpath``.
    """
    location = segment.location
    recorded = meta.source.resolved if meta.source is not None else None
    if recorded is not None and _resolved(location) != recorded:
        raise Conflict(
            f"the registered zarr array at {location!r} now resolves to {_resolved(location)!r}, not "
            f"{recorded!r} as when it was registered (a link changed); it is not read. Restore it, or "
            "delete the data set and register the array again", field="source")
    try:
        array = zarr.open_array(location, mode="r")
    except Exception as exc:  # gone, unreadable, no longer an array: all one answer for the user
        raise Conflict(
            f"the registered zarr array at {location!r} can no longer be opened ({exc}); "
            "delete the data set or restore the array",
            field="source",
        ) from None
    expected = (segment.n_rows, meta.n_features)
    found_dtype = str(getattr(array.dtype, "name", array.dtype))
    if tuple(int(s) for s in array.shape) != expected or found_dtype != meta.source_dtype:
        raise Conflict(
            f"the registered zarr array at {location!r} changed since it was registered (shape "
            f"{expected} {meta.source_dtype}, now {tuple(array.shape)} {found_dtype}); "
            "register it again under a new name",
            field="source",
        )
    return array


def _write_new_doc(folder: Path, doc_name: str, doc: dict) -> Path:
    path = folder / doc_name
    path.parent.mkdir(exist_ok=True)
    atomic_write_json(path, doc, exclusive=True)
    return path
