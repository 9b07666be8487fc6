"""Image jobs: the progress of one image request (denoise, tune, hyperresolve) while it runs, its
cancel flag and, for a request run in the background, its answer.

An image request answers in the request itself; a client that names it (``job=NAME``) can follow it
and cancel it meanwhile. One sent to run in the background (``background=true``) answers at once, and
its worker keeps the answer here for the client to fetch (`save_result`, `result`). The worker that runs
a job writes the record; the service reads it. Layout under the data folder ``root``::

    image-jobs/{name}/job.json      the record (`ImageJobRecord`), schema version 1
    image-jobs/{name}/cancel        flag: a cancel was requested
    image-jobs/{name}/result.npy    a background job's answer (the image's pixels, its dtype)
    image-jobs/{name}/result.json   what was chosen, and the answer's shape, dtype and sha256
    image-jobs/{name}/.lock         flock taken by start, update and delete

A name is reused by the next request that names it once its job has ended (status not
``running``) or its record is damaged (`ImageJobStore.get`: a `store.errors.Damaged`); a running job of
that name is a `Conflict`. The worker running a job writes its record at least every `HEARTBEAT_S`
seconds (`workers.image_jobs.JobProgress`); a ``running`` record not written for `STALE_S` seconds is
read as ``failed`` (its worker stopped: killed, or its machine gone), so that neither its name nor its
key's count of running work is held by a job that will never end. A job that ended is kept for the
service's ``image_job_keep_s`` seconds after its last write, then removed with its answer (`prune`, run as
a background job starts), so that records and answers that clients never delete do not pile up.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from store import quarantine
from store.atomic import atomic_write_bytes, atomic_write_json, remove_tree
from store.errors import Conflict, Damaged, NotFound
from store.folders import ResourceFolders
from store.npy import read_array, write_npy
from store.timestamps import seconds_since, utc_now

IMAGE_JOB_SCHEMA_VERSION = 1
DOCUMENT = "job.json"
RESULT, RESULT_DOCUMENT = "result.npy", "result.json"
#: seconds between two writes of a running job's record by its worker, at most
HEARTBEAT_S = 5.0
#: seconds without a write after which a running job's record is read as failed
STALE_S = 60.0


class ImageStep(BaseModel):
    """One step of an image job and how long it took."""

    model_config = ConfigDict(extra="forbid")

    step: str = Field(description="noise (the noise estimate), tuning, denoising, fitting, hyperresolution")
    seconds: float = Field(ge=0, description="how long the step took")


class ImageJobRecord(BaseModel):
    """``image-jobs/{name}/job.json``: what an image request is doing now, and what it did."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = IMAGE_JOB_SCHEMA_VERSION
    name: str = Field(description="the job name the request gave (its job query parameter)")
    kind: str = Field(description="denoise-image (a stored model), denoise-image-fit (one call), hyperresolution")
    status: str = Field(default="running", description="running, completed, failed or cancelled")
    phase: str = Field(default="starting", description="the step running now")
    done: int = Field(default=0, ge=0, description="units of the phase done (tiles, candidates, rounds)")
    total: int = Field(default=0, ge=0, description="units of the phase in all")
    elapsed_s: float = Field(default=0.0, ge=0, description="seconds since the request started")
    phase_elapsed_s: float = Field(default=0.0, ge=0, description="seconds since the current step started")
    background: bool = Field(default=False, description="run in the background: its answer is kept here")
    owner: str | None = Field(default=None, description="the API key that started a background job")
    steps: list[ImageStep] = Field(default_factory=list, description="the steps finished, with their times")
    chosen: dict | None = Field(default=None, description="what the tuning chose, once it has")
    error: str | None = Field(default=None, description="why a failed request failed")
    created_at: str = Field(default="", description="when the request started (UTC, ISO 8601)")
    updated_at: str = Field(default="", description="when the record was last written (UTC, ISO 8601)")

    @property
    def fraction(self) -> float:
        """Fraction of the current phase done (0 when it has no units)."""
        return self.done / self.total if self.total else 0.0

    @property
    def phase_left_s(self) -> float | None:
        """Seconds the current step has left at its pace so far (None before its first unit or once ended)."""
        if self.status != "running" or not self.done or not self.total:
            return None
        return self.phase_elapsed_s * (self.total - self.done) / self.done


def stale_as_failed(record: ImageJobRecord) -> ImageJobRecord:
    """The record as read: a ``running`` one not written for `STALE_S` seconds is ``failed`` (its worker
    stopped), with what to do. O(1)."""
    if record.status == "running" and seconds_since(record.updated_at) > STALE_S:
        return record.model_copy(update={"status": "failed", "error": (
            f"its worker stopped: no word from it for over {STALE_S:g} s; send the request again")})
    return record


class ImageJobStore:
    """Image job records under ``root/image-jobs``; safe across threads and processes."""

    def __init__(self, root):
        self.folders = ResourceFolders(root, "image-jobs", "image job")

    def start(self, name: str, kind: str, background: bool = False, owner: str | None = None) -> ImageJobRecord:
        """A new ``running`` record for ``name`` (replacing one that has ended, its cancel flag and answer
        cleared); `Conflict` naming ``job`` if a job of that name is running. Cost: one small write."""
        folder = self.folders.path(name, field="job")
        self.folders.folder.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder)
        with self.folders.locked(name):
            with contextlib.suppress(NotFound, Damaged):  # a damaged record is replaced: the request takes the name
                if self.get(name).status == "running":
                    raise Conflict(f"image job {name!r} is running; wait for it or choose another name", "job")
            for left in ("cancel", RESULT, RESULT_DOCUMENT):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(folder / left)
            now = utc_now()
            record = ImageJobRecord(name=name, kind=kind, created_at=now, updated_at=now, background=background,
                                    owner=owner)
            atomic_write_json(folder / DOCUMENT, record.model_dump(mode="json"))
        return record

    def get(self, name: str) -> ImageJobRecord:
        """The record of ``name``; `NotFound` naming ``job``, `Damaged` (a 409 ``corrupt`` on ``job``, logged
        once: `store.quarantine`) if it cannot be read (empty, not JSON, altered, not a record, a folder).
        Cost: one small read."""
        self.folders.path(name, field="job")
        try:
            return stale_as_failed(ImageJobRecord.model_validate(
                self.folders.read(name, DOCUMENT, max_version=IMAGE_JOB_SCHEMA_VERSION)))
        except NotFound:
            raise NotFound("image job", name, field="job") from None
        except (ValueError, OSError) as exc:  # DamagedDocument, a document that is not a record
            cause = getattr(exc, "cause", None) or f"not a valid image job record ({type(exc).__name__})"
            error = Damaged(f"image job {name!r}: its record image-jobs/{name}/{DOCUMENT} cannot be read "
                            f"({cause}); a new request naming job={name} replaces it", field="job", cause=cause)
            quarantine.note(self.folders.path(name) / DOCUMENT, error)
            raise error from None

    def update(self, name: str, **fields) -> ImageJobRecord:
        """Set ``fields`` of the record (validated), ``updated_at`` now (no fields: a heartbeat); `NotFound`
        if it is gone."""
        with self.folders.locked(name):
            record = self.get(name)
            record = ImageJobRecord.model_validate({**record.model_dump(), **fields, "updated_at": utc_now()})
            atomic_write_json(self.folders.path(name) / DOCUMENT, record.model_dump(mode="json"))
        return record

    def names(self) -> list[str]:
        """The names of the jobs' folders, sorted. One listing."""
        return self.folders.names()

    def running(self, owner: str | None) -> int:
        """Background jobs of ``owner`` still running (counted against its fits, `service.limits`). Cost: one
        listing and a small read per job."""
        count = 0
        for name in self.folders.names():
            with contextlib.suppress(NotFound, Damaged):
                record = self.get(name)
                count += record.background and record.status == "running" and record.owner == owner
        return count

    def prune(self, keep_s: float) -> list[str]:
        """Remove the jobs that ended (completed, failed, cancelled, or a running record gone stale) more than
        ``keep_s`` seconds ago, answer and all, under each job's lock so that a job restarted meanwhile is kept;
        a damaged record is left for the request that names it. The names removed. Cost: one listing and a
        small read per job."""
        removed = []
        for name in self.folders.names():
            with contextlib.suppress(NotFound, Damaged), self.folders.locked(name):
                record = self.get(name)
                if record.status != "running" and seconds_since(record.updated_at) > keep_s:
                    remove_tree(self.folders.path(name))
                    removed.append(name)
        return removed

    def save_result(self, name: str, image: np.ndarray, info: dict) -> None:
        """Keep a background job's answer: ``image`` (its pixels) and ``info`` (what was chosen, JSON; a
        value that is not a finite number kept as null), the image first, each written atomically; `result`
        checks one against the other. Cost O(pixels)."""
        buffer = io.BytesIO()
        write_npy(buffer, np.ascontiguousarray(image))
        data = buffer.getvalue()
        folder = self.folders.path(name, field="job")
        atomic_write_bytes(folder / RESULT, data)
        atomic_write_json(folder / RESULT_DOCUMENT, {"schema_version": 1, "sha256": hashlib.sha256(data).hexdigest(),
                                                     "shape": list(image.shape), "dtype": str(image.dtype),
                                                     "info": _finite(info)})

    def result(self, name: str) -> tuple[np.ndarray, dict]:
        """A background job's answer, ``(image, info)``, checked against its sha256, shape and dtype;
        `NotFound` naming ``job`` if there is none (yet), `Damaged` if it cannot be read. Cost O(pixels)."""
        folder = self.folders.path(name, field="job")
        try:
            document = self.folders.read(name, RESULT_DOCUMENT, max_version=1)
            data = (folder / RESULT).read_bytes()
        except (NotFound, FileNotFoundError, NotADirectoryError):
            raise NotFound("answer of image job", name, field="job") from None
        except (ValueError, OSError) as exc:
            raise self._damaged(name, f"its answer cannot be read ({type(exc).__name__})") from None
        return checked_answer(data, document, lambda cause: self._damaged(name, cause))

    def _damaged(self, name: str, cause: str) -> Damaged:
        error = Damaged(f"image job {name!r}: {cause}; send the request again", field="job", cause=cause)
        quarantine.note(self.folders.path(name) / RESULT, error)
        return error

    def request_cancel(self, name: str) -> ImageJobRecord:
        """Ask the running job ``name`` to stop at its next step: the record; `Conflict` if it has ended."""
        record = self.get(name)
        if record.status != "running":
            raise Conflict(f"image job {name!r} is {record.status!r}, not running", "job")
        atomic_write_json(self.folders.path(name) / "cancel", {"schema_version": 1, "requested_at": utc_now()})
        return record

    def cancel_requested(self, name: str) -> bool:
        """Whether a cancel of ``name`` was asked for since it started. O(1)."""
        return (self.folders.path(name, field="job") / "cancel").exists()

    def delete(self, name: str) -> None:
        """Remove the job's folder, its record damaged or not; `NotFound` if there is none. Cost O(files)."""
        folder = self.folders.path(name, field="job")
        if not folder.exists():
            raise NotFound("image job", name, field="job")
        remove_tree(folder)


def checked_answer(data: bytes, document: dict, damaged) -> tuple[np.ndarray, dict]:
    """A background job's answer ``(image, info)`` from its ``.npy`` bytes and its document, checked against the
    sha256, shape and dtype recorded; ``damaged(cause)`` is the error raised otherwise. O(pixels)."""
    if hashlib.sha256(data).hexdigest() != document.get("sha256"):
        raise damaged("its answer does not match its digest: altered where it was kept")
    try:  # store.npy's reader: numpy's header parse can fail when two threads read at once
        image = read_array(io.BytesIO(data), len(data))
    except ValueError as exc:
        raise damaged(f"its answer is not an array ({exc})") from None
    if list(image.shape) != document.get("shape") or str(image.dtype) != document.get("dtype"):
        raise damaged("its answer's shape or dtype is not the one recorded")
    return image, dict(document.get("info") or {})


def _finite(value):
    """``value`` (JSON-like) with every float that is not finite replaced by None."""
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    if isinstance(value, float | np.floating):
        return float(value) if np.isfinite(value) else None
    return value
