"""Image jobs kept on an `store.objects.ObjectStore` (issue 57): the records, cancel flags and answers of
`store.image_jobs.ImageJobStore`, with the same keys as its files (``image-jobs/{name}/job.json``, ``cancel``,
``result.npy``, ``result.json``) and the same methods, where a compare-and-swap on the record's version does what
the folder store's lock does:

* `start` creates the record once (`ObjectStore.create`) or replaces an ended job's by compare-and-swap on the
  version it read, so of two requests naming a free job one runs and the other is a `Conflict`; the old job's
  flag and answer are removed before the new record is written;
* `update` is read, change, compare-and-swap, again on a mismatch (a worker's progress and a cancel never lose
  each other's writes);
* `prune` removes a job only if its record is still at the version read (a job restarted meanwhile is kept).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import time

import numpy as np

from store.atomic import DamagedDocument, dump_json, parse_json
from store.errors import Conflict, Damaged, NotFound
from store.image_jobs import (
    DOCUMENT,
    IMAGE_JOB_SCHEMA_VERSION,
    RESULT,
    RESULT_DOCUMENT,
    ImageJobRecord,
    _finite,
    checked_answer,
    stale_as_failed,
)
from store.names import validate_name
from store.npy import write_npy
from store.objects.interface import ObjectExists, ObjectMissing, ObjectStore, VersionMismatch, child_names
from store.timestamps import seconds_since, utc_now

FOLDER = "image-jobs"
UPDATE_ATTEMPTS = 100


class ObjectImageJobStore:
    """Image job records on ``objects`` (module docstring); safe across threads, processes and machines."""

    def __init__(self, objects: ObjectStore):
        self.objects = objects

    def _key(self, name: str, part: str) -> str:
        return f"{FOLDER}/{validate_name(name, field='job')}/{part}"

    def _read(self, name: str) -> tuple[ImageJobRecord, str]:
        """The stored record (not read as stale) and its version; `NotFound`, `Damaged` as `get`."""
        key = self._key(name, DOCUMENT)
        try:
            stored = self.objects.get(key)
        except ObjectMissing:
            raise NotFound("image job", name, field="job") from None
        try:
            record = ImageJobRecord.model_validate(parse_json(stored.data, key, max_version=IMAGE_JOB_SCHEMA_VERSION))
        except (ValueError, DamagedDocument) as exc:
            cause = getattr(exc, "cause", None) or f"not a valid image job record ({type(exc).__name__})"
            raise Damaged(f"image job {name!r}: its record {key} in {self.objects.url} cannot be read ({cause}); "
                          f"a new request naming job={name} replaces it", field="job", cause=cause) from None
        return record, stored.version

    def get(self, name: str) -> ImageJobRecord:
        """The record of ``name`` (a running one its worker stopped writing read as failed); `NotFound` or
        `Damaged` naming ``job``. One read."""
        return stale_as_failed(self._read(name)[0])

    def start(self, name: str, kind: str, background: bool = False, owner: str | None = None) -> ImageJobRecord:
        """A new ``running`` record for ``name`` (replacing one that has ended or is damaged, its cancel flag and
        answer removed first); `Conflict` naming ``job`` if a job of that name is running or another request
        took the name meanwhile. Cost: a few small requests."""
        key = self._key(name, DOCUMENT)
        version = None
        with contextlib.suppress(NotFound):
            try:
                current, version = self._read(name)
                if stale_as_failed(current).status == "running":
                    raise Conflict(f"image job {name!r} is running; wait for it or choose another name", "job")
            except Damaged:  # a damaged record is replaced: the request takes the name
                version = self.objects.version(key)
        for left in ("cancel", RESULT, RESULT_DOCUMENT):
            self.objects.delete(self._key(name, left))
        now = utc_now()
        record = ImageJobRecord(name=name, kind=kind, created_at=now, updated_at=now, background=background,
                                owner=owner)
        data = dump_json(record.model_dump(mode="json"))
        try:
            if version is None:
                self.objects.create(key, data)
            else:
                self.objects.replace(key, data, version)
        except (ObjectExists, VersionMismatch):
            raise Conflict(f"image job {name!r} was started by another request meanwhile; choose another name",
                           "job") from None
        return record

    def update(self, name: str, **fields) -> ImageJobRecord:
        """Set ``fields`` (validated), ``updated_at`` now, by compare-and-swap (again on a mismatch); `NotFound`
        if it is gone."""
        key = self._key(name, DOCUMENT)
        for attempt in range(UPDATE_ATTEMPTS):
            current, version = self._read(name)
            record = ImageJobRecord.model_validate({**current.model_dump(), **fields, "updated_at": utc_now()})
            try:
                self.objects.replace(key, dump_json(record.model_dump(mode="json")), version)
                return record
            except VersionMismatch:
                time.sleep(min(0.001 * 2 ** min(attempt, 6), 0.05))
            except ObjectMissing:
                raise NotFound("image job", name, field="job") from None
        raise Conflict(f"image job {name!r}: its record changed {UPDATE_ATTEMPTS} times while it was being "
                       "updated; try again", "job")

    def names(self) -> list[str]:
        """The names that have objects, sorted. One listing."""
        return child_names(self.objects, FOLDER, folders_only=True)

    def running(self, owner: str | None) -> int:
        """Background jobs of ``owner`` still running. One listing and a read per job."""
        count = 0
        for name in self.names():
            with contextlib.suppress(NotFound, Damaged):
                record = self.get(name)
                count += record.background and record.status == "running" and record.owner == owner
        return count

    def prune(self, keep_s: float) -> list[str]:
        """Remove the jobs that ended more than ``keep_s`` seconds ago, answer and all: the record first, by its
        version (a job restarted meanwhile is kept), then its other objects; a damaged record is left. The names
        removed."""
        removed = []
        for name in self.names():
            with contextlib.suppress(NotFound, Damaged):
                current, version = self._read(name)
                record = stale_as_failed(current)
                if record.status == "running" or seconds_since(record.updated_at) <= keep_s:
                    continue
                try:
                    self.objects.delete(self._key(name, DOCUMENT), version)
                except VersionMismatch:
                    continue
                for left in ("cancel", RESULT, RESULT_DOCUMENT):
                    self.objects.delete(self._key(name, left))
                removed.append(name)
        return removed

    def save_result(self, name: str, image: np.ndarray, info: dict) -> None:
        """Keep a background job's answer: its pixels, then what was chosen with their sha256, shape and dtype."""
        buffer = io.BytesIO()
        write_npy(buffer, np.ascontiguousarray(image))
        data = buffer.getvalue()
        self.objects.put(self._key(name, RESULT), data)
        self.objects.put(self._key(name, RESULT_DOCUMENT), dump_json(
            {"schema_version": 1, "sha256": hashlib.sha256(data).hexdigest(), "shape": list(image.shape),
             "dtype": str(image.dtype), "info": _finite(info)}))

    def result(self, name: str) -> tuple[np.ndarray, dict]:
        """A background job's answer, ``(image, info)``, checked against its sha256, shape and dtype; `NotFound`
        naming ``job`` if there is none (yet), `Damaged` if it cannot be read."""
        try:
            document = parse_json(self.objects.get(self._key(name, RESULT_DOCUMENT)).data, RESULT_DOCUMENT, 1)
            data = self.objects.get(self._key(name, RESULT)).data
        except ObjectMissing:
            raise NotFound("answer of image job", name, field="job") from None
        except ValueError as exc:  # a DamagedDocument too
            raise self._damaged(name, f"its answer cannot be read ({type(exc).__name__})") from None
        return checked_answer(data, document, lambda cause: self._damaged(name, cause))

    def _damaged(self, name: str, cause: str) -> Damaged:
        return Damaged(f"image job {name!r}: {cause}; send the request again", field="job", cause=cause)

    def request_cancel(self, name: str) -> ImageJobRecord:
        """Ask the running job ``name`` to stop at its next step: the record; `Conflict` if it has ended."""
        record = self.get(name)
        if record.status != "running":
            raise Conflict(f"image job {name!r} is {record.status!r}, not running", "job")
        self.objects.put(self._key(name, "cancel"), dump_json({"schema_version": 1, "requested_at": utc_now()}))
        return record

    def cancel_requested(self, name: str) -> bool:
        """Whether a cancel of ``name`` was asked for since it started. One request."""
        return self.objects.version(self._key(name, "cancel")) is not None

    def delete(self, name: str) -> None:
        """Remove the job's objects, its record damaged or not; `NotFound` if there is none."""
        keys = list(self.objects.keys(f"{FOLDER}/{validate_name(name, field='job')}/"))
        if not keys:
            raise NotFound("image job", name, field="job")
        self.objects.delete(self._key(name, DOCUMENT))  # the record first: the job is gone for readers
        self.objects.delete_many(keys)


__all__ = ["ObjectImageJobStore"]
