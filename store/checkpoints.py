"""Solver checkpoints: one ``.npz`` per pass, written atomically, read back bit for bit.

Layout under the data folder ``root``::

    models/{name}/checkpoints/pass-{p:05d}.npz        (clusterings/{name}/checkpoints/... likewise)

A checkpoint holds a solver state: a flat dict whose values are numpy arrays
or Python ``int``/``float``/``bool``/``str`` scalars. Scalars are stored as 0-d
arrays and come back as Python scalars (``.item()``); so does a 0-d array
or numpy scalar given in the state. Every file also holds a
``__schema_version__`` entry.
"""

from __future__ import annotations

import contextlib

import os
import re
import zipfile
from pathlib import Path
from typing import IO

import numpy as np

from store.atomic import SCHEMA_VERSION, remove_tree, write_via_temp
from store.errors import Invalid, NotFound
from store.folders import ResourceFolders
from store.names import validate_name
from store.timestamps import to_iso

_CHECKPOINT = re.compile(r"pass-(\d{5,})\.npz")
_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_VERSION_KEY = "__schema_version__"
MAX_PASS = 10**9


class CheckpointStore:
    """Checkpoints of each model under ``root/models/{name}/checkpoints`` (or of each job of another
    kind, under ``root/{kind_folder}/{name}/checkpoints``).

    Parameters
    ----------
    root : Path
        The data folder.
    kind_folder : str
        The jobs' folder under ``root`` (`store.jobs.JobRegistry.kind_folder`): ``"models"``,
        ``"clusterings"``.
    kind : str
        The field a bad name is reported on.
    """

    def __init__(self, root: Path | str, kind_folder: str = "models", kind: str = "model"):
        self.root = Path(root)
        self._jobs = ResourceFolders(self.root, kind_folder, kind)
        self._field = kind

    @classmethod
    def of(cls, registry) -> "CheckpointStore":
        """The checkpoints of the jobs of a registry (`store.jobs.JobRegistry`)."""
        return cls(registry.root, registry.kind_folder, registry.kind)

    def _dir(self, model: str) -> Path:
        return self._jobs.path(model, field=self._field) / "checkpoints"

    def save(self, model: str, pass_index: int, state: dict) -> dict:
        """Write the state after pass ``pass_index`` of ``model``, replacing any earlier file for that pass.

        Parameters
        ----------
        model : str
            Model name.
        pass_index : int
            Pass number, >= 0.
        state : dict
            ``str`` keys (letters, digits, ``_ . -``, not starting with
            ``__``) mapping to numpy arrays (any non-object dtype) or Python
            ``int`` (64-bit range) / ``float`` / ``bool`` / ``str`` scalars.

        Returns
        -------
        dict
            ``{"pass", "size_bytes", "created_at"}``.

        Raises
        ------
        Invalid
            Bad model name or pass index.
        TypeError, ValueError
            A key or value the format cannot hold exactly.

        Notes
        -----
        Written uncompressed (the ``np.savez`` layout, without pickles) to a
        temporary file in the same folder, fsynced, then renamed into place.
        Cost O(state bytes) time and disk; no extra copy of the arrays.
        """
        folder = self._dir(model)
        pass_index = _check_pass(pass_index)
        arrays = {key: _encode(key, value) for key, value in _check_keys(state).items()}
        arrays[_VERSION_KEY] = np.asarray(SCHEMA_VERSION, dtype=np.int64)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"pass-{pass_index:05d}.npz"
        write_via_temp(path, lambda handle: _write_npz(handle, arrays))
        return _describe(path, pass_index)

    def load(self, model: str, pass_index: int | None = None) -> dict:
        """Read a checkpoint back: the latest pass when ``pass_index`` is None.

        Returns
        -------
        dict
            The saved state: arrays as numpy arrays (same dtype, shape and
            bytes), scalars as Python ``int``/``float``/``bool``/``str``.

        Raises
        ------
        NotFound
            No checkpoint (of that pass) for ``model``.

        Notes
        -----
        Cost O(checkpoint bytes) time and memory; pickles are refused.
        """
        if pass_index is None:
            pass_index = self.latest_pass(model)
            if pass_index is None:
                raise NotFound("checkpoint", f"{validate_name(model, field=self._field)}/latest")
        pass_index = _check_pass(pass_index)
        path = self._dir(model) / f"pass-{pass_index:05d}.npz"
        try:
            archive = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            raise NotFound("checkpoint", f"{model}/pass-{pass_index:05d}") from None
        with archive:
            if _VERSION_KEY not in archive.files:
                raise ValueError(f"{path}: not a checkpoint (no {_VERSION_KEY})")
            version = int(archive[_VERSION_KEY])
            if version > SCHEMA_VERSION:
                raise ValueError(f"{path}: unsupported schema_version {version}")
            state = {}
            for key in archive.files:
                if key == _VERSION_KEY:
                    continue
                value = archive[key]
                state[key] = value.item() if value.ndim == 0 else value
        return state

    def list(self, model: str) -> list[dict]:
        """``{"pass", "size_bytes", "created_at"}`` of every checkpoint of ``model``, sorted by pass.

        Temporary files left by interrupted writes are ignored. Cost: a folder
        listing and one ``stat`` per checkpoint.
        """
        described = []
        for pass_index, path in sorted(self._passes(model).items()):
            try:
                described.append(_describe(path, pass_index))
            except FileNotFoundError:
                continue
        return described

    def latest_pass(self, model: str) -> int | None:
        """Highest saved pass of ``model``, or None if it has no checkpoint. Cost: a folder listing."""
        passes = self._passes(model)
        return max(passes) if passes else None

    def delete(self, model: str, pass_index: int) -> None:
        """Remove one checkpoint (no error if it is already gone). Cost O(1)."""
        path = self._passes(model).get(_check_pass(pass_index))
        if path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def delete_all(self, model: str) -> None:
        """Remove every checkpoint of ``model`` (no error if there is none). Cost O(files)."""
        remove_tree(self._dir(model))

    def _passes(self, model: str) -> dict[int, Path]:
        folder = self._dir(model)
        try:
            with os.scandir(folder) as entries:
                return {
                    int(match.group(1)): Path(entry.path)
                    for entry in entries
                    if (match := _CHECKPOINT.fullmatch(entry.name))
                }
        except (FileNotFoundError, NotADirectoryError):
            return {}


def _check_pass(pass_index: object) -> int:
    if isinstance(pass_index, bool) or not isinstance(pass_index, (int, np.integer)):
        raise Invalid("pass", "pass must be an integer")
    if not 0 <= pass_index < MAX_PASS:
        raise Invalid("pass", f"pass must be between 0 and {MAX_PASS - 1}, got {pass_index}")
    return int(pass_index)


def _check_keys(state: dict) -> dict:
    if not isinstance(state, dict):
        raise TypeError(f"state must be a dict, got {type(state).__name__}")
    for key in state:
        if not isinstance(key, str) or not _KEY.fullmatch(key) or key.startswith("__"):
            raise ValueError(
                f"state key {key!r}: use letters, digits, '_', '.', '-' and do not start with '__'"
            )
    return state


def _encode(key: str, value: object) -> np.ndarray:
    """A state value as the array stored for it (scalars as 0-d arrays)."""
    if isinstance(value, bool):
        return np.asarray(value, dtype=np.bool_)
    if isinstance(value, int):
        if -(2**63) <= value < 2**63:
            return np.asarray(value, dtype=np.int64)
        if 0 <= value < 2**64:
            return np.asarray(value, dtype=np.uint64)
        raise ValueError(f"state[{key!r}] = {value} does not fit in 64 bits; store it as an array of words")
    if isinstance(value, float):
        return np.asarray(value, dtype=np.float64)
    if isinstance(value, str):
        return np.asarray(value, dtype=np.str_)
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.dtype.hasobject:
            raise TypeError(f"state[{key!r}] has an object dtype, which cannot be stored without pickles")
        return array
    raise TypeError(
        f"state[{key!r}] is a {type(value).__name__}; use a numpy array or an int, float, bool or str"
    )


def _write_npz(handle: IO[bytes], arrays: dict[str, np.ndarray]) -> None:
    """The ``np.savez`` layout (stored zip of ``{key}.npy`` members), without its keyword-name clashes."""
    with zipfile.ZipFile(handle, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for key, array in arrays.items():
            with archive.open(f"{key}.npy", mode="w", force_zip64=True) as member:
                np.lib.format.write_array(member, array, allow_pickle=False)


def _describe(path: Path, pass_index: int) -> dict:
    info = os.stat(path)
    return {"pass": pass_index, "size_bytes": info.st_size, "created_at": to_iso(info.st_mtime)}
