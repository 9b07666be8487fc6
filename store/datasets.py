"""Chunked, validated data sets: staged uploads, then one commit to a zarr v3 array.

Layout under the data folder ``root``::

    datasets/{name}/meta.json             the document below
    datasets/{name}/staging/{index:06d}.npy   one uploaded chunk, written once
    datasets/{name}/data.zarr             zarr v3 array (n_rows, n_features), written at commit
    datasets/{name}/.lock                 flock: put_chunk shared, commit and delete exclusive

``meta.json``: ``{schema_version, name, n_features, dtype, status ("open" |
"ready"), n_rows, checksum, zarr_chunk_rows, created_at, committed_at}`` and,
once ready, ``chunks``. While a set is open, ``chunks`` and ``n_rows`` are
derived from the staging folder, so concurrent uploads never rewrite shared
metadata. Readers only ever open committed arrays.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
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
from store.errors import Conflict, Invalid, NotFound
from store.names import validate_name
from store.npy import npy_rows, read_npy, write_npy
from store.rows import prepare_rows
from store.timestamps import utc_now
from store.zarr_rows import AlignedRowWriter, create_row_array, zarr_chunk_rows

DTYPES = ("float32", "float64")
MAX_FEATURES = 100_000
MAX_CHUNK_INDEX = 1_000_000
_STAGED = re.compile(r"(\d{6,7})\.npy")
_MISSING_SHOWN = 20


class DatasetStore:
    """Data sets under ``root/datasets``: create, upload chunks, commit, read, delete.

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

    def array_path(self, name: str) -> Path:
        """Path of the committed zarr array ``datasets/{name}/data.zarr`` (may not exist yet). Cost O(1)."""
        return self._dir(name) / "data.zarr"

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
        meta = {
            "schema_version": SCHEMA_VERSION,
            "name": name,
            "n_features": int(n_features),
            "dtype": dtype,
            "status": "open",
            "n_rows": 0,
            "checksum": None,
            "zarr_chunk_rows": None,
            "created_at": utc_now(),
            "committed_at": None,
        }
        self.folder.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder)
        try:
            atomic_write_json(folder / "meta.json", meta, exclusive=True)
        except FileExistsError:
            raise Conflict(f"data set {name!r} already exists", field="name") from None
        except FileNotFoundError:
            raise Conflict(f"data set {name!r} is being deleted; try again", field="name") from None
        return self.get(name)

    def get(self, name: str) -> dict:
        """Public metadata of a data set.

        Returns
        -------
        dict
            ``name, status, n_features, dtype, n_rows, chunks, checksum,
            zarr_chunk_rows, created_at, committed_at, schema_version``.
            ``chunks`` is the sorted list of received chunk indices; for an
            open set it and ``n_rows`` are read from the staging folder.

        Raises
        ------
        NotFound
            No such data set.

        Notes
        -----
        Cost: one small file for a ready set; for an open set, a folder
        listing plus one ``stat`` per staged chunk (row counts come from the
        ``.npy`` headers and are cached).
        """
        validate_name(name)
        for _attempt in range(3):
            meta = self._read_meta(name)
            if meta["status"] == "ready":
                return _public(meta)
            try:
                staged = self._staged_rows(name)
            except FileNotFoundError:
                continue  # a chunk vanished mid-listing: a commit just finished; read again
            if staged is None:  # no staging folder: nothing uploaded yet, or just committed
                meta = self._read_meta(name)
                staged = {}
                if meta["status"] == "ready":
                    return _public(meta)
            meta["chunks"] = sorted(staged)
            meta["n_rows"] = int(sum(staged.values()))
            return _public(meta)
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
        """Delete a data set and all its files.

        Waits for running uploads and commits. The folder is renamed to a
        hidden tombstone before removal, so a half-deleted set is never
        visible. Raises `NotFound` if there is no such set. Cost O(files).
        """
        folder = self._dir(name)
        self._read_meta(name)
        with self._locked(name, shared=False):
            self._read_meta(name)
            remove_tree(folder)

    # ----------------------------------------------------------------- upload
    def put_chunk(self, name: str, index: int, rows: np.ndarray) -> dict:
        """Store chunk ``index`` of an open data set; idempotent by index.

        Parameters
        ----------
        name : str
            Data set name.
        index : int
            Chunk position, 0 to 1 000 000; chunks are concatenated in index
            order at commit.
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
            The set is committed, or chunk ``index`` was already stored with
            different content (field ``"index"``).
        Invalid
            Bad ``index`` or ``rows`` (see `prepare_rows`).

        Notes
        -----
        Re-sending a chunk with byte-identical converted rows is a no-op, so
        an interrupted upload is resumed by sending every chunk again (or the
        missing ones). The chunk is written under a temporary name and linked
        into place exactly once. Cost O(chunk bytes) plus a `get`.
        """
        validate_name(name)
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise Invalid("index", "chunk index must be an integer")
        if not 0 <= index <= MAX_CHUNK_INDEX:
            raise Invalid("index", f"chunk index must be between 0 and {MAX_CHUNK_INDEX}, got {index}")
        index = int(index)
        with self._locked(name, shared=True):
            meta = self._read_meta(name)
            if meta["status"] != "open":
                raise Conflict(
                    f"data set {name!r} is committed (status {meta['status']}); "
                    "create a new data set to upload more rows",
                    field="index",
                )
            converted = prepare_rows(rows, meta["n_features"], meta["dtype"])
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
                    "content; chunks are immutable until the set is deleted",
                    field="index",
                )
        return self.get(name)

    # ----------------------------------------------------------------- commit
    def commit(self, name: str) -> dict:
        """Freeze an open data set into a zarr v3 array; idempotent.

        Staged chunks must be exactly 0..k-1 (k >= 1). They are read one at a
        time in index order and written into the array region they occupy
        (each zarr chunk written once), into a temporary folder that is then
        renamed to ``data.zarr``. The checksum is ``"sha256:<hex>"`` of the
        concatenated C-contiguous row bytes in index order. Then
        ``meta.json`` becomes ``status: "ready"`` and the staging folder is
        removed.

        Returns
        -------
        dict
            Public metadata (see `get`), ``status`` ``"ready"``.

        Raises
        ------
        NotFound
            No such data set.
        Invalid
            Field ``"chunks"``: no chunks, or missing indices (listed).

        Notes
        -----
        Cost O(n_rows * n_features) time (read, hash, compress, write); memory
        one staged chunk plus one zarr chunk (about 1 MiB). Holds the
        exclusive lock: uploads wait until it ends. Committing a ready set
        returns its metadata.
        """
        validate_name(name)
        with self._locked(name, shared=False):
            meta = self._read_meta(name)
            folder = self._dir(name)
            staging = folder / "staging"
            if meta["status"] == "ready":
                shutil.rmtree(staging, ignore_errors=True)  # left by a crash after the status change
                return _public(meta)
            staged = self._staged_paths(name)
            if not staged:
                raise Invalid("chunks", "no chunks uploaded")
            missing = sorted(set(range(max(staged) + 1)) - set(staged))
            if missing:
                raise Invalid(
                    "chunks", f"missing chunk indices {_show(missing)}; upload them and commit again"
                )
            indices = sorted(staged)
            rows_per_chunk = self._staged_rows(name) or {}
            n_rows = int(sum(rows_per_chunk[i] for i in indices))
            n_features, dtype = meta["n_features"], meta["dtype"]
            chunk_rows = zarr_chunk_rows(n_rows, n_features, np.dtype(dtype).itemsize)
            final = folder / "data.zarr"
            _remove_leftover_arrays(folder, final)
            tmp = temp_path(final)
            digest = hashlib.sha256()
            try:
                writer = AlignedRowWriter(create_row_array(tmp, n_rows, n_features, dtype, chunk_rows))
                for index in indices:
                    block = read_npy(staged[index])
                    _check_staged(block, index, n_features, dtype)
                    digest.update(np.ascontiguousarray(block).data)
                    writer.append(block)
                writer.close()
                fsync_tree(tmp)
                os.rename(tmp, final)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            fsync_dir(folder)
            meta.update(
                status="ready",
                n_rows=n_rows,
                checksum=f"sha256:{digest.hexdigest()}",
                zarr_chunk_rows=chunk_rows,
                committed_at=utc_now(),
                chunks=indices,
            )
            atomic_write_json(folder / "meta.json", meta)
            remove_tree(staging)
            return _public(meta)

    # ------------------------------------------------------------------- read
    def open_array(self, name: str) -> zarr.Array:
        """The committed rows as a read-only zarr array of shape (n_rows, n_features).

        ``arr[a:b]`` returns a numpy array of rows a..b-1; ``arr.chunks[0]``
        is ``zarr_chunk_rows``. Raises `NotFound` if there is no such set and
        `Conflict` (field ``"dataset"``) if it is not committed. Cost O(1)
        (metadata only); reads cost O(rows read).
        """
        meta = self._read_meta(validate_name(name))
        if meta["status"] != "ready":
            raise Conflict(
                f"data set {name!r} is not ready (status {meta['status']}); commit it first",
                field="dataset",
            )
        return zarr.open_array(str(self.array_path(name)), mode="r")

    # ---------------------------------------------------------------- helpers
    def _read_meta(self, name: str) -> dict:
        try:
            return read_json(self._dir(name) / "meta.json")
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound("dataset", name) from None

    @contextlib.contextmanager
    def _locked(self, name: str, shared: bool) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(file_lock(self._dir(name) / ".lock", shared=shared))
            except (FileNotFoundError, NotADirectoryError):
                raise NotFound("dataset", name) from None
            yield

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


def _public(meta: dict) -> dict:
    keys = (
        "name", "status", "n_features", "dtype", "n_rows", "chunks", "checksum",
        "zarr_chunk_rows", "created_at", "committed_at", "schema_version",
    )
    return {key: meta.get(key, [] if key == "chunks" else None) for key in keys}


def _same_rows(stored: np.ndarray, rows: np.ndarray) -> bool:
    return stored.dtype == rows.dtype and stored.shape == rows.shape and stored.tobytes() == rows.tobytes()


def _check_staged(block: np.ndarray, index: int, n_features: int, dtype: str) -> None:
    if block.ndim != 2 or block.shape[1] != n_features or block.dtype != np.dtype(dtype):
        raise Invalid("chunks", f"staged chunk {index} is damaged; delete the data set and upload again")
    if not np.isfinite(block).all():
        raise Invalid("chunks", f"chunk {index} contains NaN or inf")


def _remove_leftover_arrays(folder: Path, final: Path) -> None:
    """Remove arrays left by an interrupted commit (temporary or renamed but not recorded)."""
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
