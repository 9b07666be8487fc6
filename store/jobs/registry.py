"""The registry of one kind of job (a model's fit, a clustering): typed records, the authoritative job state.

Layout under the data folder ``root``, for a kind stored in ``{kind_folder}``
(``models``, ``clusterings``)::

    {kind_folder}/{name}/{document}     the record (``model.json``: `store.jobs.records.ModelRecord`)
    {kind_folder}/{name}/cancel         flag: a cancel was requested (a small JSON document)
    {kind_folder}/{name}/.lock          flock taken by create, write, update, delete
    {kind_folder}/{name}/.fit           flock held by the one process running the job (`JobRegistry.fit_lease`)
    {kind_folder}/{name}/checkpoints/   see `store.jobs.checkpoints`

The service creates records and reads them; the worker running the job
writes status, progress and history with `JobRegistry.update`. A record that cannot be read (empty,
truncated, altered, of an unknown version, a folder in its place, or missing beside the job's files) is
quarantined (`store.quarantine`): `JobRegistry.get` raises `store.errors.Damaged`, `JobRegistry.list`
skips it (logged once), `JobRegistry.entries` lists it as a `store.quarantine.DamagedEntry`, and
`JobRegistry.delete` removes it. The registry
manages ``name``, ``schema_version``, ``created_at`` and ``updated_at``. A kind
is a subclass naming its record type, folder, document and migration
(`store.jobs.models.ModelRegistry`, `store.jobs.clusterings.ClusteringRegistry`).
"""

from __future__ import annotations

import builtins
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Generic, TypeVar

from store import quarantine
from store.atomic import SCHEMA_VERSION, atomic_write_json, remove_tree, try_file_lock
from store.errors import Damaged, Invalid, NotFound
from store.folders import ResourceFolders
from store.jobs.records import JobRecord
from store.kept import KeptBySignature
from store.quarantine import DamagedEntry
from store.timestamps import utc_now

MANAGED_FIELDS = ("name", "schema_version", "created_at", "updated_at")
_CREATE_ATTEMPTS = 5
#: the record type of a registry's kind (`store.jobs.records.ModelRecord`, ...)
R = TypeVar("R", bound=JobRecord)


#: the records this process read last (`store.kept`), by folder, name and record type. A ``/project``
#: reads its model's record twice (its checks, then the served model's key), each read a JSON parse and a
#: validation. Records are frozen (`store.jobs.records.JobRecord`), so one object can go to every reader.
#: At most 64: a long fit's record, its history of every pass, is the largest.
_KEPT = KeptBySignature(64)


class JobRegistry(Generic[R]):
    """Job records of one kind under ``root/{kind_folder}``; safe across threads and processes.

    Parameters
    ----------
    root : Path
        The data folder.

    Attributes (of the subclass)
    ----------------------------
    record_type : type of JobRecord
        The stored record.
    kind_folder, kind, document : str
        Folder under ``root`` (``"models"``), the kind named by `NotFound` (``"model"``), the record's
        file name (``"model.json"``).
    leftovers : tuple of str
        Files of an earlier job of the same name that `create` removes (besides its checkpoints).
    """

    record_type: type[R]
    kind_folder: str
    kind: str
    document: str
    leftovers: tuple[str, ...] = ("cancel",)

    def __init__(self, root: Path | str):
        self.root = Path(root)
        self.folders = ResourceFolders(self.root, self.kind_folder, self.kind)
        self.folder = self.folders.folder

    @property
    def schema_version(self) -> int:
        """The version of the records this registry writes."""
        return self.record_type.model_fields["schema_version"].default

    def migrate(self, doc: dict) -> dict:
        """A stored document brought to `schema_version` (none to do by default). Cost O(size)."""
        return doc

    def create(self, record: R) -> R:
        """Store a new record and return it with ``created_at`` and ``updated_at`` set.

        Raises
        ------
        Conflict
            A job of that name exists (field ``"name"``).
        Invalid
            Bad name.

        Notes
        -----
        The name is claimed by creating the record's document exclusively
        under the job's lock, whether or not its folder already exists
        (checkpoints may have created it). Leftovers of an earlier job of the
        same name in such a folder (checkpoints, cancel flag, `leftovers`) are
        removed first. Cost O(record size).
        """
        folder = self.folders.path(record.name)
        now = utc_now()
        stored = record.model_copy(update={"schema_version": self.schema_version, "created_at": now,
                                           "updated_at": now})

        def clear_leftovers() -> None:
            remove_tree(folder / "checkpoints")
            for name in self.leftovers:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(folder / name)

        self.folders.claim(record.name, self.document, stored.document(), before=clear_leftovers, under_lock=True,
                           attempts=_CREATE_ATTEMPTS)
        return stored

    def get(self, name: str) -> R:
        """The record of ``name`` (migrated to the current version); `NotFound` if missing.

        A stored record that cannot be read (module docstring) raises `Damaged` (a 409 ``corrupt`` on
        ``name``) naming its file, why, and that the job can be deleted. The record read is kept by the
        process (`_KEPT`) under its file's signature and given again, the same frozen object, until the
        file changes. Cost: one ``stat``; O(record size) when the record was written since it was last read.
        """
        try:
            signature = self.signature(name)  # before the read: a write between the two is read next time
        except NotFound:
            if self.folders.orphaned(name, self.document):
                raise self._damaged(name, "it is missing, but the job's other files are there") from None
            raise
        key = (self.folder, name, self.record_type)
        kept = _KEPT.get(key, signature)
        if kept is not None:
            return kept
        try:
            record = self.record_type.model_validate(self.migrate(self.folders.read(
                name, self.document, max_version=self.schema_version)))
        except (ValueError, KeyError, TypeError) as exc:  # DamagedDocument, a record that does not validate
            raise self._damaged(name, getattr(exc, "cause", None) or f"not a valid {self.kind} record "
                                f"({type(exc).__name__}: {_first_line(exc)})") from None
        _KEPT.put(key, signature, record)
        return record

    def _damaged(self, name: str, cause: str) -> Damaged:
        """The `Damaged` that reading the damaged record of ``name`` raises, noted once (`store.quarantine`)."""
        path = self.folders.path(name) / self.document
        error = Damaged(f"{self.kind} {name!r}: its record {self.kind_folder}/{name}/{self.document} cannot be "
                        f"read ({cause}); the {self.kind} cannot be served or resumed. Delete it (DELETE "
                        f"/v1/{self.kind_folder}/{name}) and create it again", field="name", cause=cause)
        quarantine.note(path, error)
        return error

    def signature(self, name: str) -> tuple:
        """A value that changes whenever the record of ``name`` is written (`ResourceFolders.signature`);
        `NotFound` if missing. One ``stat``."""
        return self.folders.signature(name, self.document)

    def exists(self, name: str) -> bool:
        """Whether job ``name`` exists, readable or damaged (its record is there, or its files are without
        it). `Invalid` for a bad name. Cost: one ``stat``; a listing when the record is missing."""
        return os.path.lexists(self.folders.path(name) / self.document) or self.folders.orphaned(name, self.document)

    def list(self, after: str | None = None, limit: int | None = None) -> list[R]:
        """The readable records, sorted by name; only names after ``after`` and at most ``limit`` of them if
        given (a page). A damaged record is skipped (and logged once, `store.quarantine`): what the
        fits that must go on read (the watchdog, the count of a key's fits). Cost: a folder listing and
        one `get` per record returned."""
        return self.folders.page(lambda name: readable(self.get, name), after, limit)

    def entries(self, after: str | None = None, limit: int | None = None) -> builtins.list[R | DamagedEntry]:
        """As `list`, with each damaged record listed as a `store.quarantine.DamagedEntry` (status
        ``corrupt`` and the reason): what the API's list shows. Cost: as `list`."""
        return self.folders.page(lambda name: listed(self.get, name), after, limit)

    def update(self, name: str, /, **fields) -> R:
        """Set fields of a record (read-modify-write under the job's exclusive lock), validated.

        Fields not named are kept; ``updated_at`` is set to now. The fields
        the registry manages (``name``, ``schema_version``, ``created_at``,
        ``updated_at``) cannot be set (`Invalid`). Raises `NotFound` if the
        job does not exist, ValueError if a value does not fit the record.
        Returns the new record. Cost O(record size).
        """
        check_fields(self.record_type, self.kind, fields)
        with self.folders.locked(name):
            current = self.get(name).document()
            current.update({k: _plain(v) for k, v in fields.items()}, updated_at=utc_now())
            record = self.record_type.model_validate(current)
            atomic_write_json(self.folders.path(name) / self.document, record.document())
        return record

    def delete(self, name: str) -> None:
        """Delete a job: record, cancel flag, checkpoints and whatever else its folder holds, a job whose
        record is damaged (`exists`) too.

        The folder is renamed to a hidden tombstone before removal, so a
        half-deleted job is never visible. Raises `NotFound` if there is no
        such job. Cost O(files).
        """
        if not self.exists(name):
            raise NotFound(self.kind, name)
        with self.folders.locked(name):
            if not self.folders.present(name, self.document):
                raise NotFound(self.kind, name)  # deleted meanwhile
            remove_tree(self.folders.path(name))

    def request_cancel(self, name: str) -> None:
        """Ask the job ``name`` to stop after its current block (sets the cancel flag). Cost O(1)."""
        self.get(name)
        try:
            atomic_write_json(self.folders.path(name) / "cancel",
                              {"schema_version": SCHEMA_VERSION, "requested_at": utc_now()})
        except FileNotFoundError:
            raise NotFound(self.kind, name) from None

    def cancel_requested(self, name: str) -> bool:
        """Whether a cancel was requested and not cleared; `NotFound` if no such job.

        Cost: one or two ``stat`` calls (cheap enough to poll after every block).
        """
        folder = self.folders.path(name)
        if (folder / "cancel").exists():
            return True
        if not (folder / self.document).exists():
            raise NotFound(self.kind, name)
        return False

    def clear_cancel(self, name: str) -> None:
        """Remove the cancel flag (no error if it is not set); `NotFound` if no such job. Cost O(1)."""
        self.get(name)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.folders.path(name) / "cancel")

    @contextlib.contextmanager
    def fit_lease(self, name: str) -> Iterator[bool]:
        """Try to become the one runner of job ``name``; yields True if this caller is.

        The lease is an exclusive ``flock`` held for the ``with`` block; the
        kernel drops it when the holder exits or dies, so a job whose worker
        was killed leaves the lease free for a new runner. `NotFound` if no
        such job. Cost O(1).
        """
        self.get(name)
        try:
            with try_file_lock(self.folders.path(name) / ".fit") as held:
                yield held
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound(self.kind, name) from None

    def fit_alive(self, name: str) -> bool:
        """Whether some live process holds ``name``'s lease. Cost O(1)."""
        with self.fit_lease(name) as acquired:
            return not acquired


def readable(get, name: str):
    """``get(name)``, or None where there is no readable record (none, a bad name, damaged): an item of `list`,
    the fits that must go on read. O(get)."""
    try:
        return get(name)
    except (NotFound, Invalid, Damaged):
        return None  # folders without a record; damaged records


def listed(get, name: str):
    """``get(name)``, a `DamagedEntry` for a damaged record, None where there is none: an item of `entries`, what
    the API's list shows. O(get)."""
    try:
        return get(name)
    except (NotFound, Invalid):
        return None
    except Damaged as exc:
        return DamagedEntry.of(name, exc)


def check_fields(record_type, kind: str, fields) -> None:
    """`Invalid` naming the first of ``fields`` an update may not set: one the registry manages, or not a field of
    ``record_type``. O(fields)."""
    for field in fields:
        if field in MANAGED_FIELDS:
            raise Invalid(field, f"{field} is managed by the {kind} registry")
        if field not in record_type.model_fields:
            raise Invalid(field, f"{field} is not a field of a {kind} record")


def _first_line(exc: Exception) -> str:
    """The first line of an error's message, at most 200 characters (pydantic's run to many lines)."""
    return (str(exc).splitlines() or [""])[0][:200]


def _plain(value):
    """A field value as JSON-able data (records and their parts become their documents)."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
