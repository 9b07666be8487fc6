"""A registry of jobs (models, clusterings) kept on an `store.objects.ObjectStore`: the same records and the same
methods as `store.jobs.registry.JobRegistry`, with no file system under them, for workers that share nothing but
an object store (issue 57).

Keys, for a kind stored in ``{kind_folder}`` (``models``)::

    {kind_folder}/{name}/{document}     the record (``model.json``), written by `store.atomic.dump_json`
    {kind_folder}/{name}/cancel         flag: a cancel was requested
    {kind_folder}/{name}/fit-lease      the lease of the one process running the job (`store.objects.leases`)
    {kind_folder}/{name}/deleting       a delete in progress (`delete`)
    {kind_folder}/{name}/...            the job's other objects (checkpoints)

What the folder registry does with a lock and a rename, this one does with the store's conditional writes:

* **create**: the record is created once (`ObjectStore.create`: ``If-None-Match: *`` on S3), so of two creators
  of a name one wins and the other gets `Conflict`;
* **update**: read, change, compare-and-swap (`ObjectStore.replace`: ``If-Match``), again on a mismatch, so
  concurrent updates are never lost (`UPDATE_ATTEMPTS`);
* **delete**: a ``deleting`` marker first (a create of that name meanwhile is a `Conflict` saying to try again),
  then the record (the job is gone for readers from here on), then the job's other objects, then the marker.
  A delete that dies half-way leaves the marker: the next delete finishes it, and a create clears a marker older
  than `STALE_DELETE_S`;
* **fit lease**: an expiring lease (`store.objects.leases`) renewed by a thread while its holder runs
  (`fit_lease`): a worker that dies frees its jobs `LEASE_TTL_S` after its last renewal, instead of at once
  as a ``flock`` is freed. A runner whose lease was taken over (it stopped renewing for a whole ttl: a
  paused process, a store it could not reach) must not write on: from then on this registry's `update` and
  `cancel_requested` of that job raise `NotFound`, which a fit's worker reads as "deleted or replaced during
  its fit" and stops without writing (`workers.fit`).

A record that cannot be read (not JSON, altered, of an unknown version), or missing beside the job's other
objects, is damaged, as in the folder registry: `get` raises `Damaged`, `list` skips it, `entries` lists it,
`delete` removes it. What a store that cannot be reached or refuses a write raises passes unchanged
(`StoreUnavailable`, `StoreRefused`).
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Generic, cast

from store.atomic import SCHEMA_VERSION, DamagedDocument, dump_json, parse_json
from store.errors import Conflict, Damaged, NotFound
from store.folders import page_of
from store.jobs.registry import (
    _CREATE_ATTEMPTS,
    JobRegistry,
    R,
    _first_line,
    _plain,
    check_fields,
    listed,
    readable,
)
from store.kept import KeptBySignature
from store.names import validate_name
from store.objects import leases
from store.objects.interface import ObjectExists, ObjectMissing, ObjectStore, VersionMismatch, child_names
from store.quarantine import DamagedEntry
from store.timestamps import utc_now

log = logging.getLogger(__name__)

UPDATE_ATTEMPTS = 100  # compare-and-swap tries of one update before it gives up (each a read and a write)
LEASE_TTL_S = leases.TTL_SECONDS  # a fit lease lives this long after its last renewal
STALE_DELETE_S = 60.0  # a deleting marker older than this is a delete that died: a create clears it
CANCEL_LOOK_S = 1.0  # `cancel_requested` repeats a "no" for this long without asking the store
CANCEL, LEASE, DELETING = "cancel", "fit-lease", "deleting"

#: the records this process read last, by store, key and record type, under their version (as `_KEPT` of
#: `store.jobs.registry`: one parse and validation per version, not per read)
_KEPT = KeptBySignature(64)


def holder_id() -> str:
    """This process's name as a lease holder: host, process id and a random part (a restarted process with a
    reused id is another holder). O(1)."""
    return f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class ObjectJobRegistry(Generic[R]):
    """Job records of the kind of ``kind`` (`store.jobs.models.ModelRegistry`, its record type, folder, document,
    leftovers and migration) on ``objects``; safe across threads, processes and machines (module docstring).

    Parameters
    ----------
    objects : ObjectStore
    kind : type of JobRegistry
        The folder registry of the kind, read for its class attributes and `JobRegistry.migrate` only.
    lease_ttl : float
        Seconds a fit lease lives after its last renewal (renewed every third of it).
    clock : callable
        Epoch seconds (`time.time`; tests pass their own).
    """

    def __init__(self, objects: ObjectStore, kind: type[JobRegistry[R]], lease_ttl: float = LEASE_TTL_S,
                 clock: Callable[[], float] = time.time, recent_s: float = 0.0):
        self.objects = objects
        self._kind = kind
        self.record_type: type[R] = kind.record_type
        self.kind_folder, self.kind, self.document = kind.kind_folder, kind.kind, kind.document
        self.leftovers = kind.leftovers
        self.lease_ttl = float(lease_ttl)
        self.clock = clock
        self.holder = holder_id()
        self._lost: set[str] = set()  # jobs whose fit lease this registry's runner lost (`fit_lease`)
        self._cancel_looked: dict[str, float] = {}  # when `cancel_requested` last found no flag, by job
        self.recent_s = float(recent_s)
        self._recent: dict[str, tuple[float, R, str]] = {}  # by job: when read (`clock`), the record, its version

    @property
    def schema_version(self) -> int:
        """The version of the records this registry writes."""
        return self.record_type.model_fields["schema_version"].default

    def migrate(self, doc: dict) -> dict:
        """A stored document brought to `schema_version`, as the kind's folder registry does. O(size)."""
        return self._kind.migrate(cast(Any, self), doc)

    def _prefix(self, name: str, field: str = "name") -> str:
        return f"{self.kind_folder}/{validate_name(name, field=field)}/"

    def _key(self, name: str, part: str) -> str:
        return self._prefix(name) + part

    # -- create, read ------------------------------------------------------------------------------------------

    def create(self, record: R, before: Callable[[], object] | None = None) -> R:
        """Store a new record (`ObjectStore.create`) and return it with ``created_at`` and ``updated_at`` set;
        an earlier job's leftovers under the name are removed first, then ``before()`` runs (what must be in
        place when the record appears: an import's checkpoint). `Conflict` (field ``name``) if a job of
        that name exists or is being deleted; `Invalid` for a bad name. Cost: a listing, a marker read, the
        leftovers' deletes and one write."""
        prefix = self._prefix(record.name)
        now = utc_now()
        stored = record.model_copy(update={"schema_version": self.schema_version, "created_at": now,
                                           "updated_at": now})
        key = prefix + self.document
        for _attempt in range(_CREATE_ATTEMPTS):
            if self.objects.version(key) is not None:
                raise Conflict(f"{self.kind} {record.name!r} already exists", field="name")
            if self._deleting(record.name):
                raise Conflict(f"{self.kind} {record.name!r} is being deleted; try again", field="name")
            # an earlier job's objects (checkpoints, flags)
            self.objects.delete_many([leftover for leftover in self.objects.keys(prefix) if leftover != key])
            if before is not None:
                before()
            try:
                self._remember(record.name, stored, self.objects.create(key, dump_json(stored.document())))
                return stored
            except ObjectExists:
                continue  # another creator won; the next look says so
        raise Conflict(f"{self.kind} {record.name!r} already exists", field="name")

    def _deleting(self, name: str) -> bool:
        """Whether a delete of ``name`` is in progress: its marker, younger than `STALE_DELETE_S` (an older one
        is a delete that died: removed here). One read."""
        return leases.marker_live(self.objects, self._key(name, DELETING), STALE_DELETE_S, now=self.clock)

    def get(self, name: str) -> R:
        """The record of ``name`` (migrated to the current version); `NotFound` if there is none, `Damaged`
        (a 409 ``corrupt``) if it cannot be read or is missing beside the job's other objects. Kept by the
        process under its version (`_KEPT`): one read of the object, one parse per version. With ``recent_s``
        (the API's registries: a status poll, a projection's check), the record this registry read or wrote
        less than ``recent_s`` ago, without a request: another process's write is seen within ``recent_s``."""
        recent = self._recent.get(name) if self.recent_s > 0 else None
        if recent is not None and self.clock() - recent[0] < self.recent_s:
            return recent[1]
        record, version = self._read(name)
        self._remember(name, record, version)
        return record

    def _remember(self, name: str, record: R, version: str) -> None:
        if self.recent_s > 0:
            self._recent[name] = (self.clock(), record, version)

    def _read(self, name: str) -> tuple[R, str]:
        """The record of ``name`` and its version (`get`)."""
        key = self._key(name, self.document)
        try:
            stored = self.objects.get(key)
        except ObjectMissing:
            if self._orphaned(name):
                raise self._damaged(name, "it is missing, but the job's other objects are there") from None
            raise NotFound(self.kind, name) from None
        kept_key = (self.objects.url, key, self.record_type)
        kept = _KEPT.get(kept_key, (stored.version,))
        if kept is not None:
            return kept, stored.version
        try:
            doc = parse_json(stored.data, key, max_version=self.schema_version)
            record = self.record_type.model_validate(self.migrate(doc))
        except DamagedDocument as exc:
            raise self._damaged(name, exc.cause) from None
        except (ValueError, KeyError, TypeError) as exc:
            raise self._damaged(name, f"not a valid {self.kind} record ({type(exc).__name__}: "
                                      f"{_first_line(exc)})") from None
        _KEPT.put(kept_key, (stored.version,), record)
        return record, stored.version

    def _orphaned(self, name: str) -> bool:
        """Whether the job's objects are there without its record (and no delete or create is under way)."""
        others = [key for key in self.objects.keys(self._prefix(name))
                  if not key.endswith("/" + DELETING) and not key.endswith("/" + self.document)]
        return bool(others) and not self._deleting(name)

    def _damaged(self, name: str, cause: str) -> Damaged:
        return Damaged(f"{self.kind} {name!r}: its record {self.kind_folder}/{name}/{self.document} in "
                       f"{self.objects.url} cannot be read ({cause}); the {self.kind} cannot be served or resumed. "
                       f"Delete it (DELETE /v1/{self.kind_folder}/{name}) and create it again", field="name",
                       cause=cause)

    def signature(self, name: str) -> str:
        """The record's version: it changes whenever the record is written; `NotFound` if missing. One HEAD
        request, none while this registry's own read is younger than ``recent_s`` (`get`)."""
        recent = self._recent.get(name) if self.recent_s > 0 else None
        if recent is not None and self.clock() - recent[0] < self.recent_s:
            return recent[2]
        version = self.objects.version(self._key(name, self.document))
        if version is None:
            self._recent.pop(name, None)
            raise NotFound(self.kind, name)
        if recent is not None and recent[2] == version:
            self._remember(name, recent[1], version)
        return version

    def exists(self, name: str) -> bool:
        """Whether job ``name`` exists, readable or damaged. `Invalid` for a bad name."""
        return self.objects.version(self._key(name, self.document)) is not None or self._orphaned(name)

    def names(self) -> builtins.list[str]:
        """The names that have objects, sorted. One listing."""
        return child_names(self.objects, self.kind_folder, folders_only=True)

    def _page(self, read, after: str | None, limit: int | None) -> builtins.list:
        return page_of(self.names(), read, after, limit)

    def list(self, after: str | None = None, limit: int | None = None) -> builtins.list[R]:
        """The readable records, sorted by name, after ``after``, at most ``limit``; damaged ones skipped."""
        return self._page(lambda name: readable(self.get, name), after, limit)

    def entries(self, after: str | None = None, limit: int | None = None) -> builtins.list[R | DamagedEntry]:
        """As `list`, with each damaged record as a `DamagedEntry`."""
        return self._page(lambda name: listed(self.get, name), after, limit)

    # -- write -------------------------------------------------------------------------------------------------

    def update(self, name: str, /, **fields) -> R:
        """Set fields of a record by compare-and-swap, again on a mismatch (at most `UPDATE_ATTEMPTS`), so that
        no concurrent update is lost; ``updated_at`` set to now. The managed fields cannot be set (`Invalid`);
        `NotFound` if the job does not exist, ValueError if a value does not fit. Cost: a read and a write per
        try."""
        self._check_not_lost(name)
        check_fields(self.record_type, self.kind, fields)
        key = self._key(name, self.document)
        for attempt in range(UPDATE_ATTEMPTS):
            record, version = self._read(name)
            current = record.document()
            current.update({k: _plain(v) for k, v in fields.items()}, updated_at=utc_now())
            record = self.record_type.model_validate(current)
            try:
                self._remember(name, record, self.objects.replace(key, dump_json(record.document()), version))
                return record
            except VersionMismatch:
                time.sleep(min(0.001 * 2 ** min(attempt, 6), 0.05))  # another writer was first: read again
        raise Conflict(f"{self.kind} {name!r}: its record changed {UPDATE_ATTEMPTS} times while it was being "
                       "updated; try again", field="name")

    def delete(self, name: str) -> None:
        """Delete a job: a ``deleting`` marker, the record, every other object of the job, the marker (module
        docstring). `NotFound` if there is no such job. Cost: two listings and a bulk delete
        (`store.objects.leases.delete_behind_marker`)."""
        prefix = self._prefix(name)
        if not any(True for _ in self.objects.keys(prefix)):
            raise NotFound(self.kind, name)
        self._recent.pop(name, None)
        leases.delete_behind_marker(self.objects, prefix, prefix + self.document, prefix + DELETING, self.clock(),
                                    by=self.holder)

    def request_cancel(self, name: str) -> None:
        """Ask job ``name`` to stop after its current block (its cancel flag). `NotFound` if there is none (or it
        was deleted meanwhile: the flag is taken back). Cost: three requests."""
        self.get(name)
        key = self._key(name, CANCEL)
        self._cancel_looked.pop(name, None)
        self.objects.put(key, dump_json({"schema_version": SCHEMA_VERSION, "requested_at": utc_now()}))
        if self.objects.version(self._key(name, self.document)) is None:
            self.objects.delete(key)
            raise NotFound(self.kind, name)

    def _check_not_lost(self, name: str) -> None:
        """`NotFound` if this registry's runner of ``name`` lost its fit lease (module docstring)."""
        if name in self._lost:
            raise NotFound(self.kind, name, message=f"{self.kind} {name!r}: this process's fit lease on it was "
                                                    "taken over by another runner; it stops here")

    def cancel_requested(self, name: str) -> bool:
        """Whether a cancel was requested and not cleared; `NotFound` if no such job, or if this registry's runner
        lost its fit lease (module docstring). A fit asks before every block: a "no" is answered again without a
        request for `CANCEL_LOOK_S` (a cancel from another process is seen within it; one through this registry at
        once). One or two requests at most every `CANCEL_LOOK_S`."""
        self._check_not_lost(name)
        looked = self._cancel_looked.get(name)
        if looked is not None and self.clock() - looked < CANCEL_LOOK_S:
            return False
        if self.objects.version(self._key(name, CANCEL)) is not None:
            return True
        if self.objects.version(self._key(name, self.document)) is None:
            raise NotFound(self.kind, name)
        self._cancel_looked[name] = self.clock()
        return False

    def clear_cancel(self, name: str) -> None:
        """Remove the cancel flag (nothing if it is not set); `NotFound` if no such job."""
        self.get(name)
        self._cancel_looked.pop(name, None)
        self.objects.delete(self._key(name, CANCEL))

    # -- the one runner of a job -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def fit_lease(self, name: str) -> Iterator[bool]:
        """Try to become the one runner of job ``name``; yields True if this caller is. The lease
        (`store.objects.leases`) is renewed by a thread every third of `lease_ttl` for the ``with`` block and
        released at its end; a renewal that finds it taken over stops renewing, logs it and marks the job lost
        to this runner (`update` and `cancel_requested` raise `NotFound` from then on: the other runner was given
        the job because this one stopped renewing for a whole ``lease_ttl``). `NotFound` if no such job."""
        self.get(name)
        key = self._key(name, LEASE)
        holder = f"{self.holder}:{uuid.uuid4().hex[:8]}"  # each taker its own: a second in this process is refused
        lease = leases.acquire(self.objects, key, holder, self.lease_ttl, now=self.clock)
        if lease is None:
            yield False
            return
        stop = threading.Event()
        held = [lease]
        self._lost.discard(name)

        def renew() -> None:
            while not stop.wait(self.lease_ttl / 3):
                try:
                    held[0] = leases.renew(self.objects, held[0], self.lease_ttl, now=self.clock)
                except leases.LeaseLost:
                    log.warning("%s %r: its fit lease was taken over by another runner; this one stops writing",
                                self.kind, name)
                    self._lost.add(name)
                    return
                except Exception as exc:  # a store that cannot be reached now: try again at the next tick
                    log.warning("%s %r: renewing its fit lease failed (%s); retrying", self.kind, name, exc)

        renewer = threading.Thread(target=renew, name=f"lease-{self.kind}-{name}", daemon=True)
        renewer.start()
        try:
            yield True
        finally:
            stop.set()
            renewer.join()
            with contextlib.suppress(Exception):  # an expired lease is free anyway
                leases.release(self.objects, held[0])

    def fit_alive(self, name: str) -> bool:
        """Whether some runner holds ``name``'s lease now. One read."""
        return leases.holder_of(self.objects, self._key(name, LEASE), now=self.clock) is not None


__all__ = ["ObjectJobRegistry", "UPDATE_ATTEMPTS", "LEASE_TTL_S", "STALE_DELETE_S", "CANCEL_LOOK_S", "holder_id"]
