"""Serving a completed job (a model, a clustering): what every serving route checks and declares, and
the watched call that hands its work to the workers.

The routes (`service.routes.rows`, `service.routes.model_images`, `service.routes.transform`,
`service.routes.pictures`, `service.routes.clusterings`) check a request against the job and its data set
here (`served_job_now`, `checked_rows`), build a typed operation (`workers.operations`) and run it with
`serve` (or `watched`: the request's deadline and its client's disconnection watched); the numerics run
on the workers.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, TypeVar

import numpy as np
from fastapi import Query, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from service.errors import ApiError
from service.images import PNG_RESPONSE_CONTENT
from service.payloads import FIELDS_HEADER, JSON_MEDIA_TYPE, NPY_MEDIA_TYPE, rows_to_array
from service.public import image_job_public
from service.responses import NPY_CONTENT
from service.routes.models import ERRORS
from service.schemas.common import NAME_MAX_LENGTH, NAME_PATTERN
from service.schemas.errors import ErrorBody
from service.schemas.openapi import Responses
from service.security import READ, access
from service.threads import wait_for_cluster
from store.datasets.records import DatasetInfo
from store.errors import Corrupt, NotFound, StoreError
from store.jobs.object_registry import ObjectJobRegistry
from store.jobs.records import JobRecord
from store.jobs.registry import JobRegistry
from workers.serving import Operation
from workers.watch import RequestEnded, Watch

#: the record type of the served job's kind (`store.jobs.records.ModelRecord`, ...)
R = TypeVar("R", bound=JobRecord)

#: The answers of the routes that compute: over a limit (rows, body, work) 413; past the deadline 503.
SERVING_ERRORS: Responses = {
    **ERRORS,
    413: {"model": ErrorBody, "description": "over a limit: rows, body bytes or work (KPCA_MAX_SERVING_WORK)"},
    503: {"model": ErrorBody, "description": "past the request's deadline (KPCA_SERVING_DEADLINE_S); see "
          "Retry-After"},
}
#: ... and of those that answer rows, which may be JSON or .npy bytes (`service.responses`)
ROWS_ANSWERS: Responses = {**SERVING_ERRORS, 200: NPY_CONTENT}


def rows_body() -> dict:
    """The ``openapi_extra`` of a read route that takes rows: its JSON body, or its rows as ``.npy`` bytes
    with its other fields as a JSON object in the header ``X-KPCA-Fields`` (`service.payloads.NpyRowsRequest`).
    A new dict per route (FastAPI merges it into the route's operation). O(1)."""
    return {**access(READ, JSON_MEDIA_TYPE, NPY_MEDIA_TYPE), "requestBody": {
        "description": f"JSON, or the rows as .npy bytes ({NPY_MEDIA_TYPE}: a 2-D numeric array, never pickled) "
                       f"with the other fields, if any, as a JSON object in the header {FIELDS_HEADER}",
        "content": {NPY_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}}}}


async def served_job(name: str, registry: JobRegistry[R] | ObjectJobRegistry[R], datasets) -> tuple[R, int]:
    """The record of a completed job (a model, a clustering) and the width (``n_features``) of its data
    set, or the 404/409 that explains why not (`served_job_now`, in one trip to the thread pool)."""
    job, n_features, _ = await run_in_threadpool(served_job_now, name, registry, datasets)
    return job, n_features


def served_job_now(name: str, registry: JobRegistry[R] | ObjectJobRegistry[R], datasets) -> tuple[R, int, int]:
    """``(job, n_features, points)``: the record of a completed job, the width of its data set and the
    points its kernel rows run over (`points_of`), or the 404/409 that explains why not (the 409 names the
    job's state). A model over centres (`ModelRecord.serves_without_dataset`) serves after its data set is
    deleted, with the width it recorded and 0 points. Blocking: one record and one data set read."""
    job = registry.get(name)
    if job.status != "completed":
        raise ApiError(409, "conflict", not_served_message(job, name), "name")
    try:
        dataset = datasets.get(job.dataset)
    except NotFound:
        # (serves_without_dataset implies a recorded width: the second test only tells the checker)
        if getattr(job, "serves_without_dataset", False) and job.n_features is not None:
            return job, job.n_features, 0
        raise ApiError(404, "not_found", f"data set {job.dataset!r} of {job.kind} {name!r} has been deleted",
                       "dataset") from None
    refuse_corrupt_rows(job, dataset)
    return job, dataset.n_features, points_of(job, dataset)


def not_served_message(job: JobRecord, name: str) -> str:
    """Why a job that is not completed cannot serve, and what to do about it, by its status: queued or
    running, wait (a fit that ends on its own); cancelled, resume it; failed, the error, then resume or
    delete. A job fit in one go (no resume) is to be deleted and created again instead."""
    head = f"{job.kind} {name!r} is {job.status!r}, not 'completed'"
    url = f"{job.route}/{name}"
    if job.status in ("queued", "running"):
        follow = f", or follow GET {url}/events" if job.kind == "model" else ""
        return f"{head}: wait for the fit to finish (poll GET {url}{follow})"
    if job.resumable:
        again = f"resume it with POST {url}/resume (optionally {{\"passes\": N}}, the new total)"
    else:
        again = f"delete it (DELETE {url}) and create it again"
    if job.status == "failed":
        error = f" ({job.error.code}: {job.error.message})" if job.error is not None else ""
        also = f", or delete it (DELETE {url})" if job.resumable else ""
        return f"{head}: its fit failed{error}; {again}{also}"
    return f"{head}: its fit was {job.status}, so it will not finish by itself; {again}"


def refuse_corrupt_rows(job: JobRecord, dataset: DatasetInfo) -> None:
    """`Corrupt` (409) if the job serves from its training rows and chunks of its version are marked
    corrupt (answers would come from damaged rows, or from rows cached before the damage)."""
    if getattr(job, "serves_without_dataset", False) or not dataset.corrupt_chunks:
        return
    version = getattr(job, "dataset_version", None) or dataset.version
    marked = dataset.corrupt_in(version)
    if marked:
        raise Corrupt(job.dataset, version, marked, "found damaged and not yet repaired")


def checked_rows(rows: list, n_features: int) -> np.ndarray:
    """Request rows as a float64 array with the data set's width, all finite (422 on ``rows`` otherwise)."""
    array = rows_to_array(rows)
    if array.shape[1] != n_features:
        raise ApiError(422, "invalid", f"rows must have {n_features} columns (the data set's n_features), got "
                       f"{array.shape[1]}", "rows")
    finite = np.isfinite(array).all(axis=1)
    if not finite.all():
        bad = int(np.argmin(finite))
        raise ApiError(422, "invalid", f"rows must be finite: row {bad} contains NaN or infinity", "rows")
    return array


def invalid_preimage(exc: ValueError) -> Exception:
    """The 422 of a pre-image's ValueError, naming its field: the exception's ``field``, else the message's
    prefix when it names one of the request's (``options.x``, ``n_components``, ``rows``, ``method``,
    ``image``, ``sigma``), else ``method``. A store's refusal (a damaged checkpoint is also a ValueError)
    comes back as it is, for its own 409."""
    if isinstance(exc, StoreError):
        return exc
    message = str(exc)
    prefix = message.split(":", 1)[0]
    named = ("n_components", "rows", "method", "image", "sigma", "second_stage")
    field = getattr(exc, "field", None) or (prefix if prefix.startswith("options.") or prefix in named else "method")
    return ApiError(422, "invalid", message, field)


def points_of(job: JobRecord, dataset: DatasetInfo) -> int:
    """The rows of the data set version the job serves from (its ``dataset_version``), else all the
    data set's rows. O(versions)."""
    version = getattr(job, "dataset_version", None)
    if version is not None:
        for segment_version in getattr(dataset, "versions", None) or ():
            if getattr(segment_version, "version", None) == version:
                return int(segment_version.n_rows)
    return int(dataset.n_rows)


async def watched(request: Request, settings, registry, name: str, job: JobRecord, backend, operation: Operation):
    """`serve` with the request's deadline (``serving_deadline_s``) and its client's disconnection
    watched (`until_ended`)."""
    return await until_ended(request, settings, lambda watch: serve(registry, name, job, backend, operation, watch))


async def until_ended(request: Request, settings, run, field: str = "rows",
                      smaller: str = "with fewer rows or fewer iterations"):
    """``await run(watch)`` with the request's deadline (``serving_deadline_s``) and its client's
    disconnection watched (`workers.watch.Watch`): past the deadline a 503 on ``field`` with
    ``Retry-After`` (the message suggests a retry ``smaller``), a client gone a 400 nobody reads; either
    way the tasks not yet run are cancelled and the running ones asked to stop."""
    watch = Watch(time.monotonic() + settings.serving_deadline_s)

    async def follow_client() -> None:
        while not watch.disconnected.is_set():
            if await request.is_disconnected():
                watch.disconnected.set()
                return
            await asyncio.sleep(0.2)

    follower = asyncio.create_task(follow_client())
    try:
        return await run(watch)
    except RequestEnded as ended:
        if ended.reason == "deadline":
            error = ApiError(503, "unavailable", f"the request ran past its deadline of {settings.serving_deadline_s:g}"
                             f" s (KPCA_SERVING_DEADLINE_S) and was stopped; retry later, {smaller}", field)
            error.headers = {"Retry-After": "10"}
            raise error from None
        raise ApiError(400, "bad_request", "the client disconnected; its work was cancelled", "body") from None
    finally:
        follower.cancel()


async def serve(registry, name: str, job: JobRecord, backend, operation: Operation, watch: Watch | None = None):
    """The answer of a serving ``operation`` (`workers.operations`) from the workers (`workers.Backend.serve`,
    ``watch``: the request's end); a job deleted or refitted meanwhile is a 404/409, not a 500."""
    try:
        return await wait_for_cluster(backend.serve, operation, watch)
    except RequestEnded:
        raise
    except Exception:
        await run_in_threadpool(changed_while_serving, registry, name, job)
        raise


def changed_while_serving(registry, name: str, job: JobRecord) -> None:
    """After a failed serving call: 404 if the job is gone (`NotFound`), 409 if it was refitted or is no
    longer completed; else nothing (the caller raises the failure itself). Blocking: one record read."""
    current = registry.get(name)  # NotFound -> 404
    if current.status != "completed" or current.created_at != job.created_at:
        raise ApiError(409, "conflict", f"{job.kind} {name!r} changed while serving the request; retry",
                       "name") from None


#: what an image route answers (``/v1/models/{name}/denoise-image``, ``/v1/denoise-image``), with
#: ``response_class=Response``
PNG_RESPONSES: Responses = {**SERVING_ERRORS, 200: {"content": PNG_RESPONSE_CONTENT, "description": "the denoised PNG"}}
#: the ``job`` query parameter of an image route
JobQuery = Annotated[str | None, Query(pattern=NAME_PATTERN, max_length=NAME_MAX_LENGTH, description=(
    "name this request: follow it at GET /v1/image-jobs/{job}, cancel it at POST /v1/image-jobs/{job}/cancel"))]


BACKGROUND_HELP = ("run as the image job named by job: a 202 at once with its progress, and its PNG at GET "
                   "/v1/image-jobs/{job}/result once completed (no serving deadline: for large images)")


def background_fields(background: bool, job: str | None, compare: bool, keep: str | None = None) -> None:
    """422 naming the field when ``background=true`` comes without a ``job`` name, or with ``compare`` or
    ``keep`` (for a request that answers itself). O(1)."""
    if background:
        for given, name in ((job is None, "job"), (keep is not None, "keep"), (compare, "compare")):
            if given:
                raise ApiError(422, "invalid", "background=true needs a job name (job=NAME) and takes neither keep "
                               "nor compare", name)


async def start_background(image_jobs, backend, job: str, kind: str, owner: str | None, operation: Operation,
                           keep_s: float):
    """Start image job ``job`` (its record, then ``operation`` on the cluster without a deadline,
    `workers.Backend.serve_in_background`): a 202 with its progress and ``Location``. The record says
    failed if the cluster did not take it; a running job of that name is a 409 on ``job``. Jobs that ended
    more than ``image_job_keep_s`` ago are removed first (`store.image_jobs.ImageJobStore.prune`)."""
    await run_in_threadpool(image_jobs.prune, keep_s)
    record = await run_in_threadpool(image_jobs.start, job, kind, True, owner)
    try:
        await wait_for_cluster(backend.serve_in_background, operation)
    except Exception as exc:
        await run_in_threadpool(image_jobs.update, job, status="failed", phase="done",
                                error=f"not started: {type(exc).__name__}")
        raise
    return JSONResponse(image_job_public(record).model_dump(mode="json"), status_code=202,
                        headers={"Location": f"/v1/image-jobs/{job}"})
