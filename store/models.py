"""The model registry: one `store.records.ModelRecord` per model, the authoritative job state.

Layout under the data folder ``root``::

    models/{name}/model.json    the record (`ModelRecord`, schema_version 2; version 1 is migrated on read)
    models/{name}/cancel        flag: a cancel was requested (a small JSON document)
    models/{name}/.lock         flock taken by create, write, update, delete
    models/{name}/.fit          flock held by the one process running the model's fit (`fit_lease`)
    models/{name}/checkpoints/  see `store.checkpoints`

The service creates records and reads them; the worker running the fit
writes status, progress and history with `update`. The registry manages
``name``, ``schema_version``, ``created_at`` and ``updated_at``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from store.atomic import SCHEMA_VERSION, atomic_write_json, remove_tree, try_file_lock
from store.errors import Invalid, NotFound
from store.folders import ResourceFolders
from store.records import MODEL_SCHEMA_VERSION, ModelRecord, migrate
from store.timestamps import utc_now

MANAGED_FIELDS = ("name", "schema_version", "created_at", "updated_at")
_RECORD = "model.json"
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
        self.folders = ResourceFolders(self.root, "models", "model")
        self.folder = self.folders.folder

    def create(self, record: ModelRecord) -> ModelRecord:
        """Store a new model record and return it with ``created_at`` and ``updated_at`` set.

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
        folder = self.folders.path(record.name)
        now = utc_now()
        stored = record.model_copy(update={"schema_version": MODEL_SCHEMA_VERSION, "created_at": now,
                                           "updated_at": now})

        def clear_leftovers() -> None:
            remove_tree(folder / "checkpoints")
            with contextlib.suppress(FileNotFoundError):
                os.unlink(folder / "cancel")

        self.folders.claim(record.name, _RECORD, stored.document(), before=clear_leftovers, under_lock=True,
                           attempts=_CREATE_ATTEMPTS)
        return stored

    def get(self, name: str) -> ModelRecord:
        """The record of model ``name`` (migrated to the current version); `NotFound` if missing.

        A stored document that is not a valid record raises ValueError naming
        its file (the data folder was damaged). Cost O(record size).
        """
        doc = self.folders.read(name, _RECORD, max_version=MODEL_SCHEMA_VERSION)
        try:
            return ModelRecord.model_validate(migrate(doc))
        except ValidationError as exc:
            raise ValueError(f"{self.folders.path(name) / _RECORD}: not a valid model record: {exc}") from None

    def list(self) -> list[ModelRecord]:
        """Records of all models, sorted by name. Cost: a folder listing and one `get` per model."""
        records = []
        for name in self.folders.names():
            try:
                records.append(self.get(name))
            except (NotFound, Invalid):
                continue  # folders without a record
        return records

    def update(self, name: str, /, **fields) -> ModelRecord:
        """Set fields of a record (read-modify-write under the model's exclusive lock), validated.

        Fields not named are kept; ``updated_at`` is set to now. The fields
        the registry manages (``name``, ``schema_version``, ``created_at``,
        ``updated_at``) cannot be set (`Invalid`). Raises `NotFound` if the
        model does not exist, ValueError if a value does not fit the record.
        Returns the new record. Cost O(record size).
        """
        for field in fields:
            if field in MANAGED_FIELDS:
                raise Invalid(field, f"{field} is managed by the model registry")
            if field not in ModelRecord.model_fields:
                raise Invalid(field, f"{field} is not a field of a model record")
        with self.folders.locked(name):
            current = self.get(name).document()
            current.update({k: _plain(v) for k, v in fields.items()}, updated_at=utc_now())
            record = ModelRecord.model_validate(current)
            atomic_write_json(self.folders.path(name) / _RECORD, record.document())
        return record

    def delete(self, name: str) -> None:
        """Delete a model: record, cancel flag and checkpoints.

        The folder is renamed to a hidden tombstone before removal, so a
        half-deleted model is never visible. Raises `NotFound` if there is no
        record. Cost O(files).
        """
        self.get(name)
        with self.folders.locked(name):
            self.get(name)
            remove_tree(self.folders.path(name))

    def request_cancel(self, name: str) -> None:
        """Ask the fit of ``name`` to stop after its current block (sets the cancel flag). Cost O(1)."""
        self.get(name)
        try:
            atomic_write_json(self.folders.path(name) / "cancel",
                              {"schema_version": SCHEMA_VERSION, "requested_at": utc_now()})
        except FileNotFoundError:
            raise NotFound("model", name) from None

    def cancel_requested(self, name: str) -> bool:
        """Whether a cancel was requested and not cleared; `NotFound` if no such model.

        Cost: one or two ``stat`` calls (cheap enough to poll after every block).
        """
        folder = self.folders.path(name)
        if (folder / "cancel").exists():
            return True
        if not (folder / _RECORD).exists():
            raise NotFound("model", name)
        return False

    def clear_cancel(self, name: str) -> None:
        """Remove the cancel flag (no error if it is not set); `NotFound` if no such model. Cost O(1)."""
        self.get(name)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.folders.path(name) / "cancel")

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
            with try_file_lock(self.folders.path(name) / ".fit") as held:
                yield held
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound("model", name) from None

    def fit_alive(self, name: str) -> bool:
        """Whether some live process holds ``name``'s fit lease. Cost O(1)."""
        with self.fit_lease(name) as acquired:
            return not acquired


def _plain(value):
    """A field value as JSON-able data (records and their parts become their documents)."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
