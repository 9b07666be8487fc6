"""Image jobs: the progress of one image request (denoise, tune, hyperresolve) while it runs, and its
cancel flag.

An image request answers in the request itself; a client that names it (``job=NAME``) can follow it
and cancel it meanwhile. The worker that runs it writes the record; the service reads it. Layout
under the data folder ``root``::

    image-jobs/{name}/job.json    the record (`ImageJobRecord`), schema version 1
    image-jobs/{name}/cancel      flag: a cancel was requested
    image-jobs/{name}/.lock       flock taken by start, update and delete

A name is reused by the next request that names it once its job has ended (status not
``running``) or its record is damaged (`ImageJobStore.get`: a `store.errors.Damaged`); a running job of
that name is a `Conflict`.
"""

from __future__ import annotations

import contextlib
import os

from pydantic import BaseModel, ConfigDict, Field

from store import quarantine
from store.atomic import atomic_write_json, remove_tree
from store.errors import Conflict, Damaged, NotFound
from store.folders import ResourceFolders
from store.timestamps import utc_now

IMAGE_JOB_SCHEMA_VERSION = 1
DOCUMENT = "job.json"


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
    steps: list[ImageStep] = Field(default_factory=list, description="the steps finished, with their times")
    chosen: dict | None = Field(default=None, description="what the tuning chose, once it has")
    error: str | None = Field(default=None, description="why a failed request failed")
    created_at: str = Field(default="", description="when the request started (UTC, ISO 8601)")
    updated_at: str = Field(default="", description="when the record was last written (UTC, ISO 8601)")

    @property
    def fraction(self) -> float:
        """Fraction of the current phase done (0 when it has no units)."""
        return self.done / self.total if self.total else 0.0


class ImageJobStore:
    """Image job records under ``root/image-jobs``; safe across threads and processes."""

    def __init__(self, root):
        self.folders = ResourceFolders(root, "image-jobs", "image job")

    def start(self, name: str, kind: str) -> ImageJobRecord:
        """A new ``running`` record for ``name`` (replacing one that has ended, its cancel flag cleared);
        `Conflict` naming ``job`` if a job of that name is running. Cost: one small write."""
        folder = self.folders.path(name, field="job")
        self.folders.folder.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder)
        with self.folders.locked(name):
            with contextlib.suppress(NotFound, Damaged):  # a damaged record is replaced: the request takes the name
                if self.get(name).status == "running":
                    raise Conflict(f"image job {name!r} is running; wait for it or choose another name", "job")
            with contextlib.suppress(FileNotFoundError):
                os.unlink(folder / "cancel")
            now = utc_now()
            record = ImageJobRecord(name=name, kind=kind, created_at=now, updated_at=now)
            atomic_write_json(folder / DOCUMENT, record.model_dump(mode="json"))
        return record

    def get(self, name: str) -> ImageJobRecord:
        """The record of ``name``; `NotFound` naming ``job``, `Damaged` (a 409 ``corrupt`` on ``job``, logged
        once: `store.quarantine`) if it cannot be read (empty, not JSON, altered, not a record, a folder).
        Cost: one small read."""
        self.folders.path(name, field="job")
        try:
            return ImageJobRecord.model_validate(self.folders.read(name, DOCUMENT,
                                                                   max_version=IMAGE_JOB_SCHEMA_VERSION))
        except NotFound:
            raise NotFound("image job", name, field="job") from None
        except (ValueError, OSError) as exc:  # DamagedDocument, a document that is not a record
            cause = getattr(exc, "cause", None) or f"not a valid image job record ({type(exc).__name__})"
            error = Damaged(f"image job {name!r}: its record image-jobs/{name}/{DOCUMENT} cannot be read "
                            f"({cause}); a new request naming job={name} replaces it", field="job", cause=cause)
            quarantine.note(self.folders.path(name) / DOCUMENT, error)
            raise error from None

    def update(self, name: str, **fields) -> ImageJobRecord:
        """Set ``fields`` of the record (validated), ``updated_at`` now; `NotFound` if it is gone."""
        with self.folders.locked(name):
            record = self.get(name)
            record = ImageJobRecord.model_validate({**record.model_dump(), **fields, "updated_at": utc_now()})
            atomic_write_json(self.folders.path(name) / DOCUMENT, record.model_dump(mode="json"))
        return record

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
