"""Uploaded chunks of a data set on an `ObjectStore`, written once in their committed form, and their listing.

An upload is written where it will stay: a zarr v3 array of its rows and its digest document (a
`store.datasets.records.SegmentDigests`, the sha256 of its rows and of each stored zarr chunk), under a name made
of its index and the sha256 of its rows, so that the same rows always land on the same objects. A commit then
only records these arrays as segments of the next version (`store.datasets.object_datasets`): the rows cross
the network once, where a commit that copied staged rows into a new array read them back and wrote them again.

Keys, relative to the data set's prefix (``datasets/{name}/``)::

    chunks/{index:06d}.{sha256}.zarr/...          the rows (zarr v3; every chunk stored, as the folder store's)
    chunks/{index:06d}.{sha256}.json              their digests (SegmentDigests)
    staging/{index:06d}.claim                     created once: which rows chunk ``index`` is (sha256, rows)
    staging/{index:06d}.{rows}.{sha256}.mark      written after the claim: the same, for a listing to read

The claim makes an index's content immutable until the commit (a second upload of other rows is a `Conflict`)
and is what a commit takes in; the mark lets `staged_listing` describe every staged chunk from one listing. A
claim without its mark (an upload that died between the two) is read once and marked; a mark whose claim is gone
is a damaged chunk, never one silently left out of the version.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from dataclasses import dataclass, field

import numpy as np

from store.atomic import SCHEMA_VERSION, dump_json, parse_json
from store.checksums import chunk_digest
from store.datasets.records import SegmentDigests
from store.datasets.zarr_rows import AlignedRowWriter, create_row_array, zarr_chunk_rows
from store.npy import DAMAGED
from store.objects.interface import ObjectExists, ObjectMissing, ObjectStore

_CLAIM = re.compile(r"(\d{6,7})\.claim")
_MARK = re.compile(r"(\d{6,7})\.(\d+)\.([0-9a-f]{64})\.mark")


def array_base(index: int, sha256: str) -> str:
    """The name, without its suffix, of chunk ``index``'s array and digest document with rows of ``sha256``
    (relative to the data set's prefix). O(1)."""
    return f"chunks/{index:06d}.{sha256}"


def digest_of(location: str) -> str | None:
    """The sha256 in the name of an array `array_base` named (``chunks/000003.{sha256}.zarr``), None for another
    name. O(len(location))."""
    match = re.fullmatch(r"chunks/\d{6,7}\.([0-9a-f]{64})\.zarr", location)
    return match.group(1) if match else None


def claim_key(prefix: str, index: int) -> str:
    """The key of chunk ``index``'s claim in the set under ``prefix``. O(1)."""
    return f"{prefix}staging/{index:06d}.claim"


def write_chunk_array(objects: ObjectStore, prefix: str, index: int, rows: np.ndarray) -> str:
    """Write ``rows`` (already converted to the set's dtype) as chunk ``index``'s array and digest document (module
    docstring); their sha256. Writing the same rows again writes the same objects. Cost O(rows bytes): encoded,
    hashed and put once."""
    sha256 = chunk_digest(rows)
    base = prefix + array_base(index, sha256)
    n_rows, n_features = rows.shape
    step = min(n_rows, zarr_chunk_rows(n_rows, n_features, rows.dtype.itemsize))
    try:
        writer = AlignedRowWriter(create_row_array(objects.zarr_store(base + ".zarr", read_only=False), n_rows,
                                                   n_features, rows.dtype.name, step))
        writer.append(rows)
        writer.close()
    except Exception as exc:  # zarr's writes through the store: a refusal or an outage is said as the store says it
        failure = objects.failure(exc)
        if failure is None:
            raise
        raise failure from exc
    zarr_json = hashlib.sha256(objects.get(base + ".zarr/zarr.json").data).hexdigest()
    objects.put(base + ".json", dump_json(SegmentDigests(
        segment=0, first_chunk=index, chunk_sha256=[sha256], chunk_rows=[n_rows], zarr_chunk_sha256=writer.digests,
        zarr_json_sha256=zarr_json).document()))
    return sha256


def remove_chunk_array(objects: ObjectStore, prefix: str, index: int, sha256: str) -> None:
    """Remove chunk ``index``'s array of rows ``sha256`` and its digest document (an upload that lost its index to
    other rows). One listing and a bulk delete."""
    base = prefix + array_base(index, sha256)
    objects.delete_many([*objects.keys(base + ".zarr/"), base + ".json"])


def claim(objects: ObjectStore, prefix: str, index: int, sha256: str, n_rows: int) -> str | None:
    """Claim index ``index`` for rows ``sha256``: None if this call did or the claim names these rows already,
    else the sha256 the claim names (other rows). Marks it either way when it is ours. One or two requests."""
    document = dump_json({"schema_version": SCHEMA_VERSION, "sha256": sha256, "rows": int(n_rows)})
    try:
        objects.create(claim_key(prefix, index), document)
    except ObjectExists:
        claimed = claim_of(objects, prefix, index)
        if claimed is not None and claimed[0] != sha256:
            return claimed[0]
    mark(objects, prefix, index, n_rows, sha256)
    return None


def claim_of(objects: ObjectStore, prefix: str, index: int) -> tuple[str, int] | None:
    """``(sha256, rows)`` chunk ``index``'s claim names, None if there is none (or it is damaged). One read."""
    key = claim_key(prefix, index)
    try:
        doc = parse_json(objects.get(key).data, key)
        return str(doc["sha256"]), int(doc["rows"])
    except ObjectMissing:
        return None
    except (ValueError, KeyError, TypeError):
        return None


def _mark_key(prefix: str, index: int, n_rows: int, sha256: str) -> str:
    return f"{prefix}staging/{index:06d}.{int(n_rows)}.{sha256}.mark"


def mark(objects: ObjectStore, prefix: str, index: int, n_rows: int, sha256: str) -> None:
    """Write the mark of staged chunk ``index`` (module docstring); nothing if it is there. One request."""
    with contextlib.suppress(ObjectExists):
        objects.create(_mark_key(prefix, index, n_rows, sha256), b"")


def unclaim(objects: ObjectStore, prefix: str, index: int, n_rows: int, sha256: str) -> None:
    """Remove the claim and mark of chunk ``index`` with rows ``sha256`` (a claim a commit did not take in). One
    bulk delete."""
    objects.delete_many([claim_key(prefix, index), _mark_key(prefix, index, n_rows, sha256)])


@dataclass
class Staged:
    """What one listing of ``staging/`` says: each claimed chunk's rows (`store.npy.DAMAGED` when its claim is
    gone) and the sha256 of its rows, and every key under ``staging/`` (for the cleaning)."""

    rows: dict[int, int] = field(default_factory=dict)
    digests: dict[int, str] = field(default_factory=dict)
    all_keys: list[str] = field(default_factory=list)

    @property
    def indices(self) -> list[int]:
        """The staged chunks' indices, damaged ones included, sorted."""
        return sorted(self.rows)


def staged_listing(objects: ObjectStore, prefix: str, at_least: int = 0) -> Staged:
    """The staged chunks with index ``>= at_least`` of the set under ``prefix`` (lower ones are leftovers of a
    commit: ignored). A claim without its mark is read once and marked. Cost: one listing, plus a read per
    unmarked claim."""
    found, claimed, marked = Staged(), set(), {}
    for key in objects.keys(f"{prefix}staging/"):
        found.all_keys.append(key)
        name = key.rsplit("/", 1)[-1]
        if (match := _CLAIM.fullmatch(name)) and int(match.group(1)) >= at_least:
            claimed.add(int(match.group(1)))
        elif (match := _MARK.fullmatch(name)) and int(match.group(1)) >= at_least:
            marked[int(match.group(1))] = (int(match.group(2)), match.group(3))
    for index in sorted(claimed | set(marked)):
        if index not in claimed:
            found.rows[index] = DAMAGED  # marked as staged, its claim gone
        elif index in marked:
            found.rows[index], found.digests[index] = marked[index]
        elif (named := claim_of(objects, prefix, index)) is not None:
            mark(objects, prefix, index, named[1], named[0])
            found.digests[index], found.rows[index] = named
        else:
            found.rows[index] = DAMAGED
    return found


def staged_index(key: str) -> int:
    """The chunk index a key under ``staging/`` is about (-1 for a name of no index). O(len(key))."""
    name = key.rsplit("/", 1)[-1]
    head = name.split(".", 1)[0]
    return int(head) if head.isdigit() else -1


def claimed_rows_message(index: int, name: str) -> str:
    """The `Conflict` of a second upload of chunk ``index`` with other rows. O(1)."""
    return (f"chunk {index} of data set {name!r} was already uploaded with different content; staged chunks are "
            "immutable until committed or the set is deleted")


__all__ = ["Staged", "staged_listing", "staged_index", "array_base", "digest_of", "claim_key", "write_chunk_array",
           "remove_chunk_array", "claim", "claim_of", "mark", "unclaim", "claimed_rows_message"]
