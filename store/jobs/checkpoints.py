"""Solver checkpoints: one ``.npz`` per pass, written atomically, read back bit for bit.

Layout under the data folder ``root``::

    models/{name}/checkpoints/pass-{p:05d}.npz        (clusterings/{name}/checkpoints/... likewise)
    models/{name}/checkpoints/pass-{p:05d}.parts/{first:012d}-{stop:012d}.npz   (sharded checkpoints)

A checkpoint holds a solver state: a flat dict whose values are numpy arrays
or Python ``int``/``float``/``bool``/``str`` scalars. Scalars are stored as 0-d
arrays and come back as Python scalars (``.item()``); so does a 0-d array
or numpy scalar given in the state. Every file also holds a
``__schema_version__`` entry; keys starting with ``__`` are reserved.

A sharded fit splits the l rows of a data set into contiguous shards
[first, stop), one per worker, and each worker holds columns [first, stop)
(the last axis) of some solver arrays (``A``, ``AK``: r x l, ...). Its
checkpoint is a consistent cut written in two steps: each shard writes its
columns as a *part* (`CheckpointStore.save_part`, a file in
``pass-{p:05d}.parts/`` that also records ``__pass__``, ``__first__`` and
``__stop__``), then the coordinator writes the *manifest* ``pass-{p:05d}.npz``
(`CheckpointStore.save` with ``parts``): the rest of the state plus the
bounds of every part (``__parts__``, int64 of shape (k, 2)). Only manifests
(and plain checkpoints) are ``pass-*.npz`` files, so a pass becomes visible to
`CheckpointStore.list`, `latest_pass` and `load` only when its manifest is
written, after all its parts. `load` joins the parts along the last axis, so
a sharded checkpoint reads back exactly like a plain one; `load_columns`
reads only the columns a shard of a (possibly different) split needs.
"""

from __future__ import annotations

import builtins
import contextlib
import re
import shutil
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO

import numpy as np

from store.atomic import SCHEMA_VERSION
from store.errors import NotFound
from store.folders import ResourceFolders
from store.jobs.checkpoint_format import (
    _FIRST_KEY,
    _PART_DIGESTS_KEY,
    _PARTS_KEY,
    _PASS_KEY,
    _STOP_KEY,
    _VERSION_KEY,
    CheckedArchive,
    _bounds_of,
    _check_bounds,
    _check_expected,
    _check_keys,
    _check_part_array,
    _check_part_digest,
    _check_part_keys,
    _check_parts,
    _check_version,
    _encode,
    _inconsistent,
    _open_part,
    _part_digests,
    _part_name,
    _read_state,
    _slice_columns,
    _write_npz,
)
from store.jobs.checkpoint_places import FolderPlace, ObjectPlace
from store.jobs.checkpoint_verify import _UNREADABLE, MAX_PASS, CheckpointVerification, _check_pass  # noqa: F401 (MAX_PASS: re-exported)
from store.names import validate_name
from store.objects.interface import ObjectStore

_CHECKPOINT = re.compile(r"pass-(\d{5,})\.npz")


class CheckpointStore(CheckpointVerification):
    """Checkpoints of each model under ``root/models/{name}/checkpoints`` (or of each job of another
    kind, under ``root/{kind_folder}/{name}/checkpoints``).

    Parameters
    ----------
    root : Path
        The data folder.
    kind_folder : str
        The jobs' folder under ``root`` (`store.jobs.registry.JobRegistry.kind_folder`): ``"models"``,
        ``"clusterings"``.
    kind : str
        The field a bad name is reported on.
    """

    def __init__(self, root: Path | str, kind_folder: str = "models", kind: str = "model",
                 place: FolderPlace | ObjectPlace | None = None):
        self.root = Path(root)
        self._jobs = ResourceFolders(self.root, kind_folder, kind)
        self._field = kind
        self._place = place or FolderPlace()

    @classmethod
    def on_objects(cls, objects: ObjectStore, kind_folder: str = "models", kind: str = "model") -> CheckpointStore:
        """The checkpoints of the jobs of a kind kept on an object store (`store.jobs.checkpoint_places.ObjectPlace`):
        each file an object whose key is its path in a data folder (``models/{name}/checkpoints/pass-00003.npz``)."""
        root = Path(objects.url)  # what messages name a file by: the folder, or s3:/bucket/prefix
        return cls(root, kind_folder, kind, ObjectPlace(objects, root))

    @classmethod
    def of(cls, registry) -> CheckpointStore:
        """The checkpoints of the jobs of a registry (`store.jobs.registry.JobRegistry`)."""
        return cls(registry.root, registry.kind_folder, registry.kind)

    def _dir(self, model: str) -> Path:
        return self._jobs.path(model, field=self._field) / "checkpoints"

    def open_file(self, model: str, pass_index: int) -> IO[bytes]:
        """The stored file of pass ``pass_index`` (a plain checkpoint, or a sharded one's manifest), open for
        reading its bytes as they are (an export streams them); `FileNotFoundError` if there is none. O(1) on a
        folder; an object's bytes are read into memory."""
        return self._place.open_bytes(self._file(model, _check_pass(pass_index)))

    def place_file(self, model: str, pass_index: int, source: Path) -> None:
        """Store the checkpoint file at ``source`` (verified by the caller: an import) as pass ``pass_index`` of
        ``model``, its bytes unchanged, after removing the model's other checkpoints (an earlier model's of that
        name). O(file bytes)."""
        self.remove_all(model)
        with open(source, "rb") as handle:
            self._place.write(self._file(model, _check_pass(pass_index)),
                              lambda out: shutil.copyfileobj(handle, out, 1 << 20))

    def save(self, model: str, pass_index: int, state: dict,
             parts: Sequence[tuple[int, int]] | None = None) -> dict:
        """Write the state after pass ``pass_index`` of ``model``, replacing any earlier file for that pass.

        With ``parts``, the file written is the manifest of a sharded
        checkpoint: ``state`` holds the entries that are not split by columns
        and the parts (written before with `save_part`) hold the rest.

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
        parts : sequence of (int, int), optional
            Bounds ``(first, stop)`` of the parts of pass ``pass_index``, in
            order, contiguous from 0: ``[(0, s1), (s1, s2), ..., (s_k-1, l)]``.
            Every part must already be written, for this pass and these
            bounds, with the same keys, none of them a key of ``state``.

        Returns
        -------
        dict
            ``{"pass", "size_bytes", "created_at", "sha256"}`` (the size is the
            manifest's, without its parts; ``sha256`` its checkpoint digest,
            `store.jobs.checkpoint_format`, which covers the parts' digests).

        Raises
        ------
        Invalid
            Bad model name or pass index.
        TypeError, ValueError
            A key or value the format cannot hold exactly; ``parts`` not
            contiguous from 0, a part missing, or a part whose recorded
            pass, bounds or keys do not match.

        Notes
        -----
        Written uncompressed (the ``np.savez`` layout, without pickles) to a
        temporary file in the same folder, fsynced, then renamed into place.
        Cost O(state bytes) time and disk; no extra copy of the arrays. With
        ``parts``, also one open of each part to check its header (its
        recorded pass, bounds and keys; no column data is read).
        """
        folder = self._dir(model)
        pass_index = _check_pass(pass_index)
        arrays = {key: _encode(key, value) for key, value in _check_keys(state).items()}
        arrays[_VERSION_KEY] = np.asarray(SCHEMA_VERSION, dtype=np.int64)
        if parts is not None:
            bounds = _check_parts(parts)
            keys, part_digests = self._check_part_files(model, pass_index, bounds)
            clashing = sorted(keys & set(arrays))
            if clashing:
                raise ValueError(f"state keys {clashing} are also keys of the parts of pass {pass_index}")
            arrays[_PARTS_KEY] = np.asarray(bounds, dtype=np.int64).reshape(len(bounds), 2)
            if all(digest is not None for digest in part_digests):
                arrays[_PART_DIGESTS_KEY] = np.asarray(part_digests, dtype=np.str_)
        path = folder / f"pass-{pass_index:05d}.npz"
        sha256 = self._place.write(path, lambda handle: _write_npz(handle, arrays))
        return {**self._describe(path, pass_index), "sha256": sha256}

    def save_part(self, model: str, pass_index: int, first: int, stop: int,
                  columns: dict[str, np.ndarray]) -> None:
        """Write the columns [first, stop) of the split arrays of pass ``pass_index``: one shard's part.

        The part stays invisible (`list`, `load` do not see it) until the
        coordinator writes the manifest with `save` (``parts=...``).

        Parameters
        ----------
        model : str
            Model name.
        pass_index : int
            Pass number, >= 0.
        first, stop : int
            The shard's columns, ``0 <= first < stop``.
        columns : dict of str to ndarray
            Keys as in `save`; each value a numpy array of ndim >= 1 whose
            last axis has ``stop - first`` entries, e.g. ``A[:, first:stop]``
            of shape (r, stop - first).

        Raises
        ------
        Invalid
            Bad model name or pass index.
        TypeError, ValueError
            Bad bounds, a key or value the format cannot hold, or an array
            whose last axis is not ``stop - first`` long.

        Notes
        -----
        Writes ``pass-{p:05d}.parts/{first:012d}-{stop:012d}.npz``
        atomically, replacing an earlier part with the same bounds; besides
        the columns it records ``__pass__``, ``__first__``, ``__stop__`` and
        ``__schema_version__`` so that a reader can check it belongs to the
        manifest naming it. Cost O(columns bytes) time and disk.
        """
        folder = self._dir(model)
        pass_index = _check_pass(pass_index)
        first, stop = _check_bounds(first, stop)
        arrays = {}
        for key, value in _check_keys(columns).items():
            array = _encode(key, value)
            if array.ndim == 0 or array.shape[-1] != stop - first:
                raise ValueError(
                    f"columns[{key!r}] has shape {array.shape}; its last axis must have "
                    f"stop - first = {stop - first} entries"
                )
            arrays[key] = array
        arrays[_VERSION_KEY] = np.asarray(SCHEMA_VERSION, dtype=np.int64)
        arrays[_PASS_KEY] = np.asarray(pass_index, dtype=np.int64)
        arrays[_FIRST_KEY] = np.asarray(first, dtype=np.int64)
        arrays[_STOP_KEY] = np.asarray(stop, dtype=np.int64)
        parts_folder = self._parts_dir(folder, pass_index)
        self._place.write(parts_folder / _part_name(first, stop), lambda handle: _write_npz(handle, arrays))

    def load(self, model: str, pass_index: int | None = None, without: Iterable[str] = (),
             expect: str | None = None) -> dict:
        """Read a checkpoint back: the latest pass when ``pass_index`` is None.

        A sharded checkpoint comes back as one state: the manifest's entries
        plus, under each part key, the parts' arrays concatenated along the
        last axis in part order (what `save` of that joined state would give
        back, bit for bit).

        ``without`` names entries left unread (a sharded fit's coordinator,
        whose shards read their own columns, skips them; every part's keys
        are still checked). Every member read is checked against its
        digest, and with ``expect`` (a checkpoint digest, as a job record
        names it) so is the file.

        Returns
        -------
        dict
            The saved state: arrays as numpy arrays (same dtype, shape and
            bytes), scalars as Python ``int``/``float``/``bool``/``str``.

        Raises
        ------
        NotFound
            No checkpoint (of that pass) for ``model``.
        DamagedCheckpoint
            (A 409 ``corrupt``, also a ``ValueError``.) Not a checkpoint, an
            unreadable or truncated file, a member failing its digest, another
            digest than ``expect``, a newer schema, or an inconsistent sharded
            checkpoint (a part missing or failing its digest, or recording
            another pass or other bounds, keys, dtypes or shapes than the
            manifest and the other parts); the message names the file.

        Notes
        -----
        Cost O(checkpoint bytes) time and memory (a sharded one: about twice
        the parts' bytes while joining), plus one sha256 of every member
        read; pickles are refused.
        """
        if pass_index is None:
            pass_index = self.latest_pass(model)
            if pass_index is None:
                raise NotFound("checkpoint", f"{validate_name(model, field=self._field)}/latest")
        pass_index = _check_pass(pass_index)
        try:
            return self._load(model, pass_index, frozenset(without), expect)
        except _UNREADABLE as exc:
            raise self._damaged(model, pass_index, exc) from None

    def _load(self, model: str, pass_index: int, skip: frozenset, expect: str | None) -> dict:
        path = self._file(model, pass_index)
        with self._open_manifest(model, pass_index) as archive:
            _check_expected(archive, path, expect)
            state = _read_state(archive, skip)
            bounds = _bounds_of(archive, path)
            recorded = _part_digests(archive, bounds)
        if bounds is None:
            return state
        pieces: dict[str, list[np.ndarray]] = {}
        keys = None
        for number, (first, stop) in enumerate(bounds):
            part_path = self._parts_dir(path.parent, pass_index) / _part_name(first, stop)
            with _open_part(part_path, pass_index, first, stop, self._place.open) as archive:
                _check_part_digest(part_path, archive, recorded, number)
                members = {key for key in archive.files if not key.startswith("__")}
                columns = _read_state(archive, skip)
            _check_part_keys(part_path, members, keys)
            keys = members
            for key, array in columns.items():
                like = pieces[key][0] if key in pieces else None
                _check_part_array(part_path, key, array, like, stop - first)
                pieces.setdefault(key, []).append(array)
        for key, arrays in pieces.items():
            if key in state:
                raise _inconsistent(path, f"key {key!r} is both in the manifest and in its parts")
            state[key] = np.concatenate(arrays, axis=-1)
        return state

    def load_columns(self, model: str, pass_index: int, first: int, stop: int,
                     keys: Iterable[str]) -> dict[str, np.ndarray]:
        """Columns [first, stop) (the last axis) of the arrays ``keys`` of one checkpoint.

        This is how a shard of a new split (say fewer workers, after one
        died) reads its columns from a checkpoint written by another split,
        or from a plain checkpoint.

        Parameters
        ----------
        model : str
            Model name.
        pass_index : int
            Pass number, >= 0.
        first, stop : int
            The columns, ``0 <= first < stop <= l`` where l is the last
            axis length of the arrays.
        keys : iterable of str
            Array keys: part keys of a sharded checkpoint, or keys of arrays
            (ndim >= 1) of a plain one.

        Returns
        -------
        dict of str to ndarray
            ``{key: array[..., first:stop]}``, each a C-contiguous copy.

        Raises
        ------
        NotFound
            No checkpoint of that pass for ``model``.
        ValueError
            Bad bounds, a key that is not a column array of the checkpoint,
            or an inconsistent sharded checkpoint (as in `load`).

        Notes
        -----
        A sharded checkpoint: reads only the parts that overlap [first,
        stop), and only the ``keys`` members of them. A plain checkpoint:
        reads only the ``keys`` members. Cost O(bytes of those members)
        time, O(bytes returned + one member) memory.
        """
        pass_index = _check_pass(pass_index)
        first, stop = _check_bounds(first, stop)
        try:
            return self._load_columns(model, pass_index, first, stop, list(keys))
        except _UNREADABLE as exc:
            raise self._damaged(model, pass_index, exc) from None

    def _load_columns(self, model: str, pass_index: int, first: int, stop: int,
                      keys: list[str]) -> dict[str, np.ndarray]:
        path = self._file(model, pass_index)
        with self._open_manifest(model, pass_index) as archive:
            bounds = _bounds_of(archive, path)
            recorded = _part_digests(archive, bounds)
            if bounds is None:
                return {key: _slice_columns(path, archive, key, first, stop) for key in keys}
        if stop > bounds[-1][1]:
            raise ValueError(f"columns first={first}, stop={stop} are out of range for l={bounds[-1][1]}")
        pieces: dict[str, list[np.ndarray]] = {key: [] for key in keys}
        part_keys = None
        for number, (part_first, part_stop) in enumerate(bounds):
            if part_stop <= first or part_first >= stop:
                continue
            part_path = self._parts_dir(path.parent, pass_index) / _part_name(part_first, part_stop)
            low, high = max(first, part_first) - part_first, min(stop, part_stop) - part_first
            with _open_part(part_path, pass_index, part_first, part_stop, self._place.open) as archive:
                _check_part_digest(part_path, archive, recorded, number)
                names = {key for key in archive.files if not key.startswith("__")}
                _check_part_keys(part_path, names, part_keys)
                part_keys = names
                for key in keys:
                    if key not in archive.files or key.startswith("__"):
                        raise ValueError(f"{part_path}: no column array {key!r}")
                    array = archive[key]
                    _check_part_array(part_path, key, array,
                                      pieces[key][0] if pieces[key] else None, part_stop - part_first)
                    pieces[key].append(array[..., low:high])
        return {key: np.ascontiguousarray(np.concatenate(arrays, axis=-1)) for key, arrays in pieces.items()}

    def parts_of(self, model: str, pass_index: int) -> list[tuple[int, int]] | None:
        """Bounds ``[(first, stop), ...]`` of the parts of a sharded checkpoint; None for a plain one.

        Raises `NotFound` if there is no checkpoint of that pass. Cost: one
        open of the manifest and a read of its ``__parts__`` member.
        """
        pass_index = _check_pass(pass_index)
        path = self._file(model, pass_index)
        try:
            with self._open_manifest(model, pass_index) as archive:
                return _bounds_of(archive, path)
        except _UNREADABLE as exc:
            raise self._damaged(model, pass_index, exc) from None

    def list(self, model: str) -> list[dict]:
        """``{"pass", "size_bytes", "created_at"}`` of every checkpoint of ``model``, sorted by pass.

        Temporary files left by interrupted writes are ignored. Cost: a folder
        listing and one ``stat`` per checkpoint.
        """
        described = []
        for pass_index, path in sorted(self._passes(model).items()):
            try:
                described.append(self._describe(path, pass_index))
            except FileNotFoundError:
                continue
        return described

    def latest_pass(self, model: str) -> int | None:
        """Highest saved pass of ``model``, or None if it has no checkpoint. Cost: a folder listing."""
        passes = self._passes(model)
        return max(passes) if passes else None

    def delete(self, model: str, pass_index: int) -> None:
        """Remove one checkpoint and its parts, if any (no error if already gone).

        The manifest goes first, so the pass is never visible without its
        parts. Cost O(1) for a plain checkpoint, O(parts) for a sharded one.
        """
        pass_index = _check_pass(pass_index)
        path = self._passes(model).get(pass_index)
        if path is not None:
            self._place.remove(path)
        self._place.remove_tree(self._parts_dir(self._dir(model), pass_index))

    def remove_all(self, model: str) -> None:
        """Remove every checkpoint of ``model`` (what a fit wrote after its job was deleted). O(files)."""
        self._place.remove_tree(self._dir(model))

    @staticmethod
    def _parts_dir(folder: Path, pass_index: int) -> Path:
        return folder / f"pass-{pass_index:05d}.parts"

    @contextlib.contextmanager
    def _open_manifest(self, model: str, pass_index: int) -> Iterator[CheckedArchive]:
        """The checkpoint file of a pass (plain or manifest), its schema version checked, its members
        checked against their digests as they are read."""
        path = self._file(model, pass_index)
        try:
            loaded = self._place.open(path)
        except FileNotFoundError:
            raise NotFound("checkpoint", f"{model}/pass-{pass_index:05d}") from None
        with loaded:
            archive = CheckedArchive(loaded, path)
            _check_version(archive, path)
            yield archive

    def _check_part_files(self, model: str, pass_index: int,
                          bounds: builtins.list[tuple[int, int]]) -> tuple[set[str], builtins.list[str | None]]:
        """The keys shared by the parts ``bounds`` of a pass and each part's checkpoint digest; ValueError if
        one is missing or does not match."""
        folder = self._parts_dir(self._dir(model), pass_index)
        keys, digests = None, []
        for first, stop in bounds:
            part_path = folder / _part_name(first, stop)
            with _open_part(part_path, pass_index, first, stop, self._place.open) as archive:
                part_keys = {key for key in archive.files if not key.startswith("__")}
                digests.append(archive.digest)
            _check_part_keys(part_path, part_keys, keys)
            keys = part_keys
        return keys or set(), digests

    def _passes(self, model: str) -> dict[int, Path]:
        folder = self._dir(model)
        return {int(match.group(1)): folder / name for name in self._place.names(folder)
                if (match := _CHECKPOINT.fullmatch(name))}

    def _describe(self, path: Path, pass_index: int) -> dict:
        size, created = self._place.describe(path)
        return {"pass": pass_index, "size_bytes": size, "created_at": created}
