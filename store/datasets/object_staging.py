"""Staged chunks of a data set on an `ObjectStore`: an upload created once, and a listing that tells each
chunk's rows and digest without reading it.

Keys, relative to the data set's prefix (``datasets/{name}/``)::

    staging/{index:06d}.npy                     the chunk's rows (``.npy``), created once
    staging/{index:06d}.{rows}.{sha256}.mark    written after it (empty): its rows and the digest of its rows

The mark is what the folder store's hidden ``.sha256`` file is (`store.datasets.staging`): a chunk whose rows no
longer match it is damaged (refused at the commit, replaced by the next upload of that index), a mark whose
chunk is gone is a damaged chunk, not a chunk silently left out of the version; and it gives `staged_listing`
each chunk's rows from one listing, where reading ``.npy`` headers would be a request per chunk. A chunk
whose upload died between the two writes has no mark: its rows are read once and the mark written then.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass, field

import numpy as np

from store.checksums import chunk_digest
from store.datasets.staging import check_staged, damaged_message
from store.errors import Invalid
from store.npy import DAMAGED, read_array, write_npy
from store.objects.interface import ObjectExists, ObjectMissing, ObjectStore

_CHUNK = re.compile(r"(\d{6,7})\.npy")
_MARK = re.compile(r"(\d{6,7})\.(\d+)\.([0-9a-f]{64})\.mark")


def chunk_key(prefix: str, index: int) -> str:
    """The key of staged chunk ``index`` of the set under ``prefix``. O(1)."""
    return f"{prefix}staging/{index:06d}.npy"


def npy_bytes(rows: np.ndarray) -> bytes:
    """``rows`` as ``.npy`` bytes (`store.npy.write_npy`). O(rows bytes)."""
    buffer = io.BytesIO()
    write_npy(buffer, rows)
    return buffer.getvalue()


def rows_of(data: bytes) -> np.ndarray:
    """The array of ``.npy`` bytes; `ValueError` (or `EOFError`) if they are damaged. O(bytes)."""
    return read_array(io.BytesIO(data), len(data))


def mark(objects: ObjectStore, prefix: str, index: int, rows: np.ndarray) -> None:
    """Write the mark of staged chunk ``index`` (module docstring); nothing if it is there. One request."""
    with contextlib.suppress(ObjectExists):
        objects.create(f"{prefix}staging/{index:06d}.{rows.shape[0]}.{chunk_digest(rows)}.mark", b"")


@dataclass
class Staged:
    """What one listing of ``staging/`` says: each chunk's key, rows (`store.npy.DAMAGED` when its file is
    gone or unreadable) and marked digests, and every key under ``staging/`` (for the cleaning)."""

    keys: dict[int, str] = field(default_factory=dict)
    rows: dict[int, int] = field(default_factory=dict)
    digests: dict[int, set[str]] = field(default_factory=dict)
    all_keys: list[str] = field(default_factory=list)


def staged_listing(objects: ObjectStore, prefix: str, at_least: int = 0) -> Staged:
    """The staged chunks with index ``>= at_least`` of the set under ``prefix`` (lower ones are leftovers of a
    commit: ignored). A chunk without a mark is read once and marked. Cost: one listing, plus a read per
    unmarked chunk."""
    found = Staged()
    for key in objects.keys(f"{prefix}staging/"):
        found.all_keys.append(key)
        name = key.rsplit("/", 1)[-1]
        if match := _CHUNK.fullmatch(name):
            if int(match.group(1)) >= at_least:
                found.keys[int(match.group(1))] = key
        elif match := _MARK.fullmatch(name):
            index = int(match.group(1))
            if index >= at_least:
                found.digests.setdefault(index, set()).add(match.group(3))
                found.rows[index] = int(match.group(2))
    for index in set(found.digests) - set(found.keys):
        found.rows[index] = DAMAGED  # marked as staged, its chunk gone
    for index in set(found.keys) - set(found.digests):
        try:
            rows = rows_of(objects.get(found.keys[index]).data)
        except ObjectMissing:
            del found.keys[index]  # removed while listed: a commit just ended
            continue
        except (ValueError, EOFError):
            found.rows[index] = DAMAGED
            continue
        mark(objects, prefix, index, rows)
        found.rows[index] = int(rows.shape[0])
        found.digests[index] = {chunk_digest(rows)}
    return found


def read_checked(objects: ObjectStore, staged: Staged, index: int, n_features: int, dtype: str) -> np.ndarray:
    """The rows of staged chunk ``index``, checked: shape, dtype, finite, and against its marks; `Invalid`
    (field ``"chunks"``) saying to upload it again otherwise. One read."""
    try:
        block = rows_of(objects.get(staged.keys[index]).data)
    except ObjectMissing:
        raise Invalid("chunks", damaged_message(index, "its file is missing")) from None
    except (ValueError, EOFError) as exc:
        raise Invalid("chunks", damaged_message(index, f"unreadable ({type(exc).__name__})")) from None
    check_staged(block, index, n_features, dtype)
    if index in staged.digests and chunk_digest(block) not in staged.digests[index]:
        raise Invalid("chunks", damaged_message(index, "its rows do not match the digest taken when it was "
                                                       "uploaded: altered in the store"))
    return block


__all__ = ["Staged", "staged_listing", "read_checked", "chunk_key", "npy_bytes", "rows_of", "mark"]
