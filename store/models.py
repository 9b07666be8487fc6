"""The model registry: one JSON record per model, the authoritative job state.

Layout under the data folder ``root``::

    models/{name}/model.json    the record (schema_version, name, created_at, updated_at, ...)
    models/{name}/cancel        flag: a cancel was requested (a small JSON document)
    models/{name}/.lock         flock taken by create, write, update, delete
    models/{name}/.fit          flock held by the one process running the model's fit (`fit_lease`)
    models/{name}/checkpoints/  see `store.checkpoints`

The service creates records and reads them; the worker running the fit
writes status, progress and history with `update` / `write`. The registry
does not interpret the record beyond the fields it manages (``name``,
``schema_version``, ``created_at``, ``updated_at``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from store.atomic import SCHEMA_VERSION, atomic_write_json, file_lock, read_json, remove_tree, try_file_lock
from store.errors import Conflict, Invalid, NotFound
from store.names import validate_name
from store.timestamps import utc_now

MANAGED_FIELDS = ("name", "schema_version", "created_at", "updated_at")
_CREATE_ATTEMPTS = 5


class ModelRegistry:
    """Model records under ``root/models``; safe across threads and processes.

    Parameters
    ----------
    root : Path
        The data folder.
    """

    def __init__(self, root: Path | str):
        self.root = Path(root)
        self.folder = self.root / "models"

    def _dir(self, name: str) -> Path:
        return self.folder / validate_name(name)

    def create(self, name: str, record: dict) -> dict:
        """Store a new model record.

        Parameters
        ----------
        name : str
            Model name (see `validate_name`).
        record : dict
            JSON-able fields (numpy scalars and arrays are converted; NaN and
            inf are refused). A ``"name"`` field, if present, must equal ``name``.

        Returns
        -------
        dict
            The stored record, with ``name``, ``schema_version``,
            ``created_at`` and ``updated_at`` set.

        Raises
        ------
        Conflict
            A model of that name exists (field ``"name"``).
        Invalid
            Bad name.

        Notes
        -----
        The name is claimed by creating ``model.json`` exclusively under the
        model's lock, whether or not its folder already exists (checkpoints
        may have created it). Leftovers of an earlier model of the same name
        in such a folder (checkpoints, cancel flag) are removed first. Cost
        O(record size).
        """
        folder = self._dir(name)
        doc = _with_name(name, record)
        now = utc_now()
        doc.update(schema_version=SCHEMA_VERSION, created_at=now, updated_at=now)
        for _attempt in range(_CREATE_ATTEMPTS):
            folder.mkdir(parents=True, exist_ok=True)
            try:
                with file_lock(folder / ".lock", shared=False):
                    if (folder / "model.json").exists():
                        raise Conflict(f"model {name!r} already exists", field="name")
                    remove_tree(folder / "checkpoints")
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(folder / "cancel")
                    try:
                        atomic_write_json(folder / "model.json", doc, exclusive=True)
                    except FileExistsError:
                        raise Conflict(f"model {name!r} already exists", field="name") from None
                    return doc
            except (FileNotFoundError, NotADirectoryError):
                continue  # folder deleted concurrently: make it again
        raise Conflict(f"model {name!r} is being deleted; try again", field="name")

    def get(self, name: str) -> dict:
        """The record of model ``name``; `NotFound` if missing. Cost O(record size)."""
        try:
            return read_json(self._dir(name) / "model.json")
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound("model", name) from None

    def list(self) -> list[dict]:
        """Records of all models, sorted by name. Cost: a folder listing and one `get` per model."""
        try:
            names = sorted(entry.name for entry in os.scandir(self.folder) if entry.is_dir())
        except FileNotFoundError:
            return []
        records = []
        for entry_name in names:
            try:
                records.append(self.get(entry_name))
            except (NotFound, Invalid):
                continue  # tombstones, folders without a record
        return records

    def write(self, name: str, record: dict) -> dict:
        """Replace the record of an existing model atomically.

        ``created_at`` is kept from the stored record and ``updated_at`` set
        to now; ``schema_version`` and ``name`` are set. Raises `NotFound` if
        the model does not exist. Cost O(record size).
        """
        doc = _with_name(name, record)
        with self._locked(name):
            stored = self.get(name)
            doc.update(
                schema_version=SCHEMA_VERSION, created_at=stored.get("created_at"), updated_at=utc_now()
            )
            atomic_write_json(self._dir(name) / "model.json", doc)
        return doc

    def update(self, name: str, /, **fields) -> dict:
        """Set top-level ``fields`` of a record (read-modify-write under the model's exclusive lock).

        Fields not named are kept; ``updated_at`` is set to now. The fields
        the registry manages (``name``, ``schema_version``, ``created_at``,
        ``updated_at``) cannot be set (`Invalid`). Raises `NotFound` if the
        model does not exist. Returns the new record. Cost O(record size).
        """
        for field in fields:
            if field in MANAGED_FIELDS:
                raise Invalid(field, f"{field} is managed by the model registry")
        with self._locked(name):
            doc = self.get(name)
            doc.update(fields)
            doc["updated_at"] = utc_now()
            atomic_write_json(self._dir(name) / "model.json", doc)
        return doc

    def delete(self, name: str) -> None:
        """Delete a model: record, cancel flag and checkpoints.

        The folder is renamed to a hidden tombstone before removal, so a
        half-deleted model is never visible. Raises `NotFound` if there is no
        record. Cost O(files).
        """
        self.get(name)
        with self._locked(name):
            self.get(name)
            remove_tree(self._dir(name))

    def request_cancel(self, name: str) -> None:
        """Ask the fit of ``name`` to stop after its current block (sets the cancel flag). Cost O(1)."""
        self.get(name)
        try:
            atomic_write_json(
                self._dir(name) / "cancel", {"schema_version": SCHEMA_VERSION, "requested_at": utc_now()}
            )
        except FileNotFoundError:
            raise NotFound("model", name) from None

    def cancel_requested(self, name: str) -> bool:
        """Whether a cancel was requested and not cleared; `NotFound` if no such model.

        Cost: one or two ``stat`` calls (cheap enough to poll after every block).
        """
        folder = self._dir(name)
        if (folder / "cancel").exists():
            return True
        if not (folder / "model.json").exists():
            raise NotFound("model", name)
        return False

    def clear_cancel(self, name: str) -> None:
        """Remove the cancel flag (no error if it is not set); `NotFound` if no such model. Cost O(1)."""
        self.get(name)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._dir(name) / "cancel")

    @contextlib.contextmanager
    def fit_lease(self, name: str) -> Iterator[bool]:
        """Try to become the one runner of ``name``'s fit; yields True if this caller is.

        The lease is an exclusive ``flock`` held for the ``with`` block; the
        kernel drops it when the holder exits or dies, so a fit whose worker
        was killed leaves the lease free for a new runner. `NotFound` if no
        such model. Cost O(1).
        """
        self.get(name)
        try:
            with try_file_lock(self._dir(name) / ".fit") as held:
                yield held
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound("model", name) from None

    def fit_alive(self, name: str) -> bool:
        """Whether some live process holds ``name``'s fit lease. Cost O(1)."""
        with self.fit_lease(name) as acquired:
            return not acquired

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(file_lock(self._dir(name) / ".lock", shared=False))
            except (FileNotFoundError, NotADirectoryError):
                raise NotFound("model", name) from None
            yield


def _with_name(name: str, record: dict) -> dict:
    validate_name(name)
    if not isinstance(record, dict):
        raise TypeError(f"record must be a dict, got {type(record).__name__}")
    if record.get("name", name) != name:
        raise Invalid("name", f"record name {record['name']!r} does not match {name!r}")
    return {**record, "name": name}
