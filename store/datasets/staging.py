"""Staged chunks of a data set: an upload written once as ``staging/{index:06d}.npy``, and their listing.

Paths are relative to the data set folder (see `store.datasets.dataset_store` for the
layout). The callers hold the data set's lock: shared for `stage_chunk`,
exclusive for a commit.

Each staged chunk is marked, after its file is written, by an empty hidden file
``staging/.{index:06d}.{sha256}.sha256`` naming the digest of its rows (`store.checksums.chunk_digest`):
a staged file whose rows no longer match it (a bit flipped on disk) is refused at the commit, and a
marked chunk whose file is gone is damaged, not silently left out of the version (`staged_rows`,
`staged_digests`). A chunk staged before marks were kept (none) is read unchecked, as before.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from store.atomic import fsync_dir, remove_tree, write_via_temp
from store.checksums import chunk_digest
from store.datasets.records import DatasetRecord
from store.datasets.rows import prepare_rows
from store.errors import Conflict, Invalid
from store.npy import DAMAGED, npy_damage, npy_rows, read_npy, write_npy

_STAGED = re.compile(r"(\d{6,7})\.npy")
_MARK = re.compile(r"\.(\d{6,7})\.([0-9a-f]{64})\.sha256")


def stage_chunk(folder: Path, name: str, meta: DatasetRecord, index: int, rows: np.ndarray) -> bool:
    """Check chunk ``index`` of data set ``name`` (in ``folder``) and stage it unless it is there.

    Parameters
    ----------
    folder : Path
        The data set folder; the caller holds its shared lock.
    name : str
        Data set name, for messages.
    meta : DatasetRecord
        Its ``meta.json``, read under that lock.
    index : int
        Validated chunk index.
    rows : array_like of shape (n_rows, n_features)
        The upload, converted as in `prepare_rows`.

    Returns
    -------
    bool
        True if the chunk was committed with the same content or this call
        staged it; False if it was already staged with the same content.

    Raises
    ------
    Conflict
        Field ``"name"``: a registered set. Field ``"index"``: a committed or
        staged chunk of different content.
    Invalid
        Bad ``rows``.

    Notes
    -----
    Cost O(chunk bytes); for a committed index, plus reading the digest
    document of its segment (O(chunks of that segment)).
    """
    if meta.source is not None:
        raise Conflict(
            f"data set {name!r} is a registered zarr array and is read-only; to add rows, "
            "register the grown array under a new name",
            field="name",
        )
    converted = prepare_rows(rows, meta.n_features, meta.dtype)
    committed = meta.committed_chunks
    staging = folder / "staging"
    target = staging / f"{index:06d}.npy"
    if index < committed:
        if chunk_digest(converted) == meta.committed_digest(folder, index):
            if index in meta.corrupt:  # the original rows of a damaged chunk: kept for repair
                staging.mkdir(exist_ok=True)
                write_via_temp(target, lambda handle: write_npy(handle, converted))
            return True
        first = meta.first_version_with(index)
        raise Conflict(
            f"chunk {index} of data set {name!r} is part of committed version {first} and cannot "
            f"change; append new rows with chunk index >= {committed}",
            field="index",
        )
    staging.mkdir(exist_ok=True)
    if (target.exists() or _marked(staging, index)) and npy_damage(target) is not None:
        if target.is_dir():  # a folder in its place
            remove_tree(target)
        write_via_temp(target, lambda handle: write_npy(handle, converted))  # damaged or gone: this upload replaces it
        _mark(staging, index, chunk_digest(converted))
        return True
    if not target.exists():
        try:
            write_via_temp(target, lambda handle: write_npy(handle, converted), exclusive=True)
        except FileExistsError:
            pass  # a concurrent upload of the same index won: compare with it below
        else:
            _mark(staging, index, chunk_digest(converted))
            return True
    stored = read_npy(target)
    if not same_rows(stored, converted):
        marks = staged_digests(folder).get(index)
        if marks and chunk_digest(stored) not in marks:  # altered on disk since its upload: this one replaces it
            write_via_temp(target, lambda handle: write_npy(handle, converted))
            _mark(staging, index, chunk_digest(converted))
            return True
        raise Conflict(
            f"chunk {index} of data set {name!r} was already uploaded with different "
            "content; staged chunks are immutable until committed or the set is deleted",
            field="index",
        )
    return False


def _mark(staging: Path, index: int, digest: str) -> None:
    """Mark chunk ``index`` as staged with rows of ``digest`` (module docstring). Cost: a file created, an fsync."""
    os.close(os.open(staging / f".{index:06d}.{digest}.sha256", os.O_CREAT | os.O_WRONLY, 0o644))
    fsync_dir(staging)


def _marked(staging: Path, index: int) -> bool:
    return index in staged_digests(staging.parent)


def staged_digests(folder: Path) -> dict[int, set[str]]:
    """Index -> the row digests chunk ``index`` was staged with (its marks; two when an upload replaced a
    damaged file with other rows) in the set in ``folder``. Cost: a folder listing."""
    marks: dict[int, set[str]] = {}
    try:
        with os.scandir(folder / "staging") as entries:
            for entry in entries:
                if match := _MARK.fullmatch(entry.name):
                    marks.setdefault(int(match.group(1)), set()).add(match.group(2))
    except FileNotFoundError:
        pass
    return marks


def staged_paths(folder: Path) -> dict[int, Path]:
    """Index -> path of each staged chunk of the set in ``folder`` ({} if none). Cost: a folder listing."""
    try:
        with os.scandir(folder / "staging") as entries:
            return {
                int(match.group(1)): Path(entry.path)
                for entry in entries
                if (match := _STAGED.fullmatch(entry.name))
            }
    except FileNotFoundError:
        return {}


def staged_rows(folder: Path) -> dict[int, int] | None:
    """Index -> rows of each staged chunk (`store.npy.DAMAGED`, -1, for a damaged file), or None if
    there is no staging folder.

    A marked chunk (module docstring) whose file is gone is damaged too.
    Raises `FileNotFoundError` if a chunk vanishes while listed (a commit
    removed staging). Cost: a folder listing and one ``stat`` per chunk (row
    counts come from the cached ``.npy`` headers, see `npy_rows`).
    """
    try:
        listing = os.scandir(folder / "staging")
    except FileNotFoundError:
        return None
    rows, marked = {}, set()
    with listing as entries:
        for entry in entries:
            if match := _STAGED.fullmatch(entry.name):
                rows[int(match.group(1))] = npy_rows(entry)
            elif match := _MARK.fullmatch(entry.name):
                marked.add(int(match.group(1)))
    for index in marked - set(rows):
        rows[index] = DAMAGED  # marked as staged, its file gone
    return rows


def read_staged(path: Path, index: int) -> np.ndarray:
    """The rows of staged chunk ``index`` at ``path``; `Invalid` (field ``"chunks"``) naming the index
    if the file is damaged (see `store.npy.npy_damage`). Cost O(chunk bytes)."""
    why = npy_damage(path)
    if why is None:
        try:
            return read_npy(path)
        except (OSError, ValueError, EOFError) as exc:
            why = f"unreadable ({type(exc).__name__})"
    raise Invalid("chunks", damaged_message(index, why))


def damaged_message(index: int, why: str = "unreadable or truncated") -> str:
    """What to do about damaged staged chunk ``index``. Cost O(1)."""
    return (f"staged chunk {index} is damaged ({why}); upload chunk {index} again "
            f"(PUT .../chunks/{index} with its rows) and commit")


def same_rows(stored: np.ndarray, rows: np.ndarray) -> bool:
    """Whether two chunks have the same dtype, shape and bytes. Cost O(chunk bytes)."""
    return stored.dtype == rows.dtype and stored.shape == rows.shape and stored.tobytes() == rows.tobytes()


def check_staged(block: np.ndarray, index: int, n_features: int, dtype: str) -> None:
    """Refuse (`Invalid`, field ``"chunks"``) a staged chunk of the wrong shape or dtype, or not finite.

    Cost O(chunk size).
    """
    if block.ndim != 2 or block.shape[1] != n_features or block.dtype != np.dtype(dtype):
        raise Invalid("chunks", f"staged chunk {index} is damaged; delete the data set and upload again")
    if not np.isfinite(block).all():
        raise Invalid("chunks", f"chunk {index} contains NaN or inf")
