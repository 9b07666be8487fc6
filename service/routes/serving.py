"""Serving a completed model: ``/project``, ``/reconstruct``, ``/denoise``, ``/denoise-image``, ``/transform``.

Routes check the request against the model's data set (columns, finiteness,
image shape), hand the work to the cluster (`workers.Backend`) and turn the
answer into JSON or PNG; the numerics run on the workers.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

import numpy as np
from fastapi import APIRouter, Query, Request, Response, status
from starlette.concurrency import run_in_threadpool

from service.deps import BackendDep, DatasetsDep, ModelsDep, Serving, ServingDep
from service import plots
from service.errors import ApiError
from service.images import (
    PNG_MEDIA_TYPE,
    PNG_REQUEST_BODY,
    check_pixels,
    chosen_headers,
    decode_png,
    encode_png,
    image_patch_plan,
)
from service.job_checks import checked_preimage
from service.limits import check_patches, check_rows
from service.serving_work import check_serving_work
from service.payloads import FIELDS_HEADER, JSON_MEDIA_TYPE, NPY_MEDIA_TYPE, ThreadParsedRoute, read_body, \
    rows_to_array
from service.responses import NPY_CONTENT, Format, rows_answer, wants_npy
from service.routes.models import ERRORS, ModelName
from service.public import dataset_public
from service.schemas.datasets import DatasetPublic
from service.schemas.common import NAME_MAX_LENGTH, NAME_PATTERN
from service.schemas.errors import ErrorBody
from service.schemas.serving import (
    DenoiseRequest,
    DenoiseResponse,
    PreimageMethod,
    ProjectRequest,
    ProjectResponse,
    ReconstructRequest,
    ReconstructResponse,
    SECOND_STAGE_HELP,
    SecondStage,
    TransformRequest,
    Tune,
)
from service.security import READ, WRITE, access
from service.threads import wait_for_cluster
from store.datasets.records import DatasetInfo
from store.errors import Corrupt, NotFound, StoreError
from store.jobs.records import JobRecord
from workers.watch import RequestEnded, Watch

router = APIRouter(prefix="/v1/models", tags=["serving"], route_class=ThreadParsedRoute)

#: The answers of the routes that compute: over a limit (rows, body, work) 413; past the deadline 503.
SERVING_ERRORS = {
    **ERRORS,
    413: {"model": ErrorBody, "description": "over a limit: rows, body bytes or work (KPCA_MAX_SERVING_WORK)"},
    503: {"model": ErrorBody, "description": "past the request's deadline (KPCA_SERVING_DEADLINE_S); see "
          "Retry-After"},
}
#: ... and of those that answer rows, which may be JSON or .npy bytes (`service.responses`)
ROWS_ANSWERS = {**SERVING_ERRORS, 200: NPY_CONTENT}


def rows_body() -> dict:
    """The ``openapi_extra`` of a read route that takes rows: its JSON body, or its rows as ``.npy`` bytes
    with its other fields as a JSON object in the header ``X-KPCA-Fields`` (`service.payloads.NpyRowsRequest`).
    A new dict per route (FastAPI merges it into the route's operation). O(1)."""
    return {**access(READ, JSON_MEDIA_TYPE, NPY_MEDIA_TYPE), "requestBody": {
        "description": f"JSON, or the rows as .npy bytes ({NPY_MEDIA_TYPE}: a 2-D numeric array, never pickled) "
                       f"with the other fields, if any, as a JSON object in the header {FIELDS_HEADER}",
        "content": {NPY_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}}}}


async def served_job(name: str, registry, datasets) -> tuple[JobRecord, int]:
    """The record of a completed job (a model, a clustering) and the width (``n_features``) of its data
    set, or the 404/409 that explains why not (`served_job_now`, in one trip to the thread pool)."""
    job, n_features, _ = await run_in_threadpool(served_job_now, name, registry, datasets)
    return job, n_features


def served_job_now(name: str, registry, datasets) -> tuple[JobRecord, int, int]:
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
        if getattr(job, "serves_without_dataset", False):
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


async def watched(request: Request, settings, registry, name: str, job: JobRecord, call, *args, **kwargs):
    """`serve` with the request's deadline (``serving_deadline_s``) and its client's disconnection
    watched (`until_ended`, the watch passed to ``call`` as ``watch``)."""
    return await until_ended(request, settings, lambda watch: serve(registry, name, job, call, *args, watch=watch,
                                                                    **kwargs))


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


async def serve(registry, name: str, job: JobRecord, call, *args, **kwargs):
    """Run a blocking backend call; a job deleted or refitted meanwhile is a 404/409, not a 500."""
    try:
        return await wait_for_cluster(call, *args, **kwargs)
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


@router.post("/{name}/project", openapi_extra=rows_body(), responses=ROWS_ANSWERS)
async def project(name: ModelName, body: ProjectRequest, request: Request, serving: ServingDep,
                  format: Format = None) -> ProjectResponse:
    """Kernel principal components of ``rows``: one row of ``n_components`` values per input row
    (at most ``max_rows_per_request`` rows: 413 on ``rows``; at most ``max_serving_work``, rows x model
    points x features: 413 on ``rows``; past ``serving_deadline_s`` a 503 with ``Retry-After``). A small
    model's projection is checked and computed in one trip to the thread pool (`project_now`); a larger
    one goes to the workers, watched for its deadline and its client. ``Accept: application/octet-stream``
    (or ``format=npy``): the components as ``.npy`` bytes."""
    models, datasets, backend, settings = serving
    check_rows(len(body.rows), settings.max_rows_per_request)
    model, rows, values, components = await run_in_threadpool(project_now, name, body.rows, models, datasets,
                                                              backend, settings)
    if components is None:
        components = await watched(request, settings, models, name, model, backend.project, name, rows,
                                   model_values=values)
    return rows_answer(ProjectResponse, "components", components, settings.stream_response_values,
                       wants_npy(request, format))


def project_now(name: str, body_rows: list, models, datasets, backend, settings) -> tuple:
    """``(model, rows, model_values, components)``: the request checked against the model (`served_job_now`,
    the work budget, `checked_rows`), and its components when the backend computes them in this process
    (`workers.backend.Backend.projects_here`), else None (the caller sends the rows to the workers). A model
    deleted or refitted meanwhile is a 404/409, not a 500. Blocking: call it from the thread pool."""
    model, n_features, points = served_job_now(name, models, datasets)
    check_serving_work(len(body_rows), points, n_features, settings.max_serving_work)
    rows = checked_rows(body_rows, n_features)
    values = points * n_features
    if not backend.projects_here(values, len(rows)):
        return model, rows, values, None
    try:
        return model, rows, values, backend.project(name, rows, model_values=values)
    except Exception:
        changed_while_serving(models, name, model)
        raise


async def _reconstruct(name, body, request, serving: Serving, answer=ReconstructResponse, format=None):
    """``/reconstruct`` (and ``/denoise`` with ``tune="off"``): the rows' pre-images as ``answer``
    (`service.responses.rows_answer`: the model, or its JSON streamed when large)."""
    models, datasets, backend, settings = serving
    check_rows(len(body.rows), settings.max_rows_per_request)
    model, n_features, points = await run_in_threadpool(served_job_now, name, models, datasets)
    rows = await run_in_threadpool(checked_rows, body.rows, n_features)  # off the event loop
    options = body.options.model_dump(exclude_none=True)
    method = checked_preimage(model, body.method, options)  # 422 on method / options.<name>, before any work
    work = check_serving_work(len(rows), points, n_features, settings.max_serving_work, method, options)
    block_rows = max(1, len(rows) * settings.serving_block_work // max(work, 1))
    try:
        out = await watched(request, settings, models, name, model, backend.reconstruct, name, rows, body.method,
                            options, block_rows=block_rows)
    except ValueError as exc:  # a value the method refuses against the data (checked_preimage saw the names)
        raise invalid_preimage(exc) from None
    return rows_answer(answer, "rows", out, settings.stream_response_values, wants_npy(request, format))


@router.post("/{name}/reconstruct", openapi_extra=rows_body(), responses=ROWS_ANSWERS)
async def reconstruct(name: ModelName, body: ReconstructRequest, request: Request, serving: ServingDep,
                      format: Format = None) -> ReconstructResponse:
    """Rows -> their projection onto the components -> back to input space (a pre-image per row).
    Bounded as ``/denoise``; ``.npy`` bytes as ``/project``."""
    return await _reconstruct(name, body, request, serving, format=format)


@router.post("/{name}/denoise", openapi_extra=rows_body(), responses=ROWS_ANSWERS)
async def denoise(name: ModelName, body: DenoiseRequest, request: Request, serving: ServingDep,
                  format: Format = None) -> DenoiseResponse:
    """Denoise rows: the pre-image of their projection onto the leading components (same maths as
    ``/reconstruct``; the name says what it is for). With ``tune="auto"`` the noise is estimated from
    the rows (they must be more than their columns) and the rank and pre-image chosen by an unbiased
    estimate of the denoising error; ``chosen`` and ``steps`` say what and how long.

    Bounded before any work: rows x model points x features x the method's starts and iterations at most
    ``max_serving_work`` (413 naming the option, ``options.n_iter``, or ``rows``); with ``tune="off"`` run
    as tasks of about ``serving_block_work`` behind any projection, tuned as one task at the same low
    priority; either way past ``serving_deadline_s`` a 503 with ``Retry-After``, and a client that
    disconnects has its tasks not yet run cancelled. ``.npy`` bytes as ``/project``; a tuned answer's
    ``chosen``, ``noise`` and ``steps`` then come as JSON in the header ``X-KPCA-Fields``."""
    models, datasets, backend, settings = serving
    if body.tune == "off":
        if body.n_components is not None:
            raise ApiError(422, "invalid", "n_components is for tune=auto; with tune=off every component is used",
                           "n_components")
        return await _reconstruct(name, body, request, serving, DenoiseResponse, format)
    check_rows(len(body.rows), settings.max_rows_per_request)
    model, n_features, points = await run_in_threadpool(served_job_now, name, models, datasets)
    rows = await run_in_threadpool(checked_rows, body.rows, n_features)  # off the event loop
    options = body.options.model_dump(exclude_none=True)
    method = None if body.method == "auto" else checked_preimage(model, body.method, options)
    budget = (method, options) if method else (checked_preimage(model, "auto", {}), {})  # tuned: the default's
    check_serving_work(len(rows), points, n_features, settings.max_serving_work,
                       *budget)
    fixed = {"n_components": body.n_components, "method": method, "options": options}
    try:
        out, info = await watched(request, settings, models, name, model, backend.denoise_rows_tuned, name, rows,
                                  fixed)
    except ValueError as exc:
        raise invalid_preimage(exc) from None
    return rows_answer(DenoiseResponse, "rows", out, settings.stream_response_values, wants_npy(request, format),
                       chosen=info["chosen"],
                       noise=info["noise"], steps=info["steps"])


#: what an image route answers and accepts (``/v1/models/{name}/denoise-image``, ``/v1/denoise-image``)
PNG_ROUTE = {"responses": {**SERVING_ERRORS, 200: {"content": {PNG_MEDIA_TYPE: {}}, "description": "the denoised PNG"}},
             "response_class": Response}
#: the ``job`` query parameter of an image route
JobQuery = Annotated[str | None, Query(pattern=NAME_PATTERN, max_length=NAME_MAX_LENGTH, description=(
    "name this request: follow it at GET /v1/image-jobs/{job}, cancel it at POST /v1/image-jobs/{job}/cancel"))]


@router.post("/{name}/denoise-image", openapi_extra={**access(READ, PNG_MEDIA_TYPE), **PNG_REQUEST_BODY},
             **PNG_ROUTE)
async def denoise_image(
    name: ModelName,
    request: Request,
    serving: ServingDep,
    stride: Annotated[int, Query(ge=1, le=64, description="grid step between patches")] = 2,
    method: Annotated[PreimageMethod, Query()] = "auto",
    upscale: Annotated[int, Query(ge=1, le=8, description="pixel-replication factor (hyperresolution)")] = 1,
    compare: Annotated[bool, Query(description=(
        "true: answer one 8-bit PNG picture with the input and the denoised image side by side, labelled, "
        "for a person to look at; false: the denoised image itself"))] = False,
    tune: Annotated[Tune, Query(description=(
        "auto: estimate the noise from the image and choose the rank and pre-image method by an unbiased "
        "estimate of the denoising error (explicit method and n_components kept); off: as given"))] = "auto",
    n_components: Annotated[int | None, Query(ge=1, le=10_000, description=(
        "use the model's leading components only (at most its n_components); default: tuned, or all"))] = None,
    constrained: Annotated[bool, Query(description=(
        "hyperresolution: make the answer reproduce the input when downsampled by block means (upscale x "
        "upscale blocks), by back-projection; false: seed 002's unconstrained reconstruction"))] = True,
    job: JobQuery = None,
    second_stage: Annotated[SecondStage, Query(description=SECOND_STAGE_HELP + "; upscale > 1: auto or off")] = "auto",
) -> Response:
    """PNG in, PNG out: overlapping patches (the model's patch size) denoised through the model and
    averaged where they overlap; with ``upscale`` > 1 the image is first enlarged by pixel replication
    and the model fills in the detail (hyperresolution), by default constrained so that the answer's
    ``upscale x upscale`` block means are the input. Grey and colour PNGs keep their mode and bit depth.

    ``tune=auto`` (the default; denoising only): the noise level is estimated from the image and the
    rank (at most the model's) and pre-image method chosen by an unbiased estimate of the denoising
    error computed from the image alone (docs/denoising.md); an explicit ``method`` or ``n_components``
    is kept; then the empirical Wiener second stage where the same estimate says it helps
    (``second_stage``: ``auto``, ``wiener`` always, ``off`` never). The answer's ``X-KPCA-Chosen``
    header (JSON) says what was chosen, ``Server-Timing`` how long each step took. With ``job`` the
    request can be followed and cancelled at ``/v1/image-jobs/{job}``.

    Bounded before any work: the PNG's pixels (read from its header) and the upscaled image's are at most
    ``max_image_pixels`` (413 on ``body`` / ``upscale``), its patches at most ``max_patches`` (422 on
    ``stride``).

    With ``compare=true`` the answer is a picture of the input (pixel-replicated ``upscale`` times) and
    the denoised image side by side, each labelled and both enlarged by the same integer factor when
    small, placed pixel for pixel (`service.plots.compare_png`); the same request and limits, so the
    option lives on this route rather than on another."""
    models, datasets, backend, settings = serving
    if upscale > 1 and second_stage == "wiener":
        raise ApiError(422, "invalid", "second_stage: hyperresolution (upscale > 1) has no second stage; use "
                       "auto or off", "second_stage")
    image = decode_png(await read_body(request), settings.max_image_pixels)
    model, n_features, points = await run_in_threadpool(served_job_now, name, models, datasets)
    patch, height, width = image_patch_plan(image, n_features, upscale, name)  # 422 on image
    check_pixels(height, width, settings.max_image_pixels, "upscale", f"the image upscaled {upscale} times")
    if patch > min(height, width):
        raise ApiError(422, "invalid", f"the model's {patch}x{patch} patches do not fit in a {height}x{width} "
                       "image", "image")
    if stride > patch:
        raise ApiError(422, "invalid", f"stride {stride} is larger than the patch size {patch}: pixels between "
                       "patches would not be covered", "stride")
    count = check_patches(height, width, patch, stride, settings.max_patches, "KPCA_MAX_PATCHES")
    check_serving_work(count, points, n_features, settings.max_serving_work,
                       checked_preimage(model, method, None), None, rows_field="stride")
    try:
        cleaned, info = await watched(request, settings, models, name, model, backend.denoise_image_tuned, name,
                                      image, patch, stride, method, None, upscale, tune, n_components, constrained,
                                      job, second_stage=second_stage)
    except ValueError as exc:  # a rank the model does not have, a method its kernel does not allow
        raise invalid_preimage(exc) from None
    headers = chosen_headers(info)
    if compare:
        labels = ("input" + (f" (x{upscale} pixel replication)" if upscale > 1 else ""),
                  "denoised" if upscale == 1 else "hyper-resolved")
        title = f"model {name!r}: denoise-image, {patch}x{patch} patches, stride {stride}, method {method}"
        body, _ = await run_in_threadpool(plots.compare_png, image, cleaned, labels, title)
        return Response(content=body, media_type=PNG_MEDIA_TYPE, headers=headers)
    return Response(content=encode_png(cleaned), media_type=PNG_MEDIA_TYPE, headers=headers)


@router.post("/{name}/transform", openapi_extra=access(WRITE, JSON_MEDIA_TYPE), status_code=status.HTTP_201_CREATED,
             responses=ERRORS)
async def transform_dataset(name: ModelName, body: TransformRequest, models: ModelsDep, datasets: DatasetsDep,
                            backend: BackendDep, response: Response) -> DatasetPublic:
    """Project (rows -> components) or denoise (rows -> pre-images) a whole ready data set into a new
    data set, as one dask task per chunk of rows on the workers; answers when the output is committed."""
    model, width = await served_job(name, models, datasets)
    options = body.options.model_dump(exclude_none=True)
    if body.operation == "denoise":
        checked_preimage(model, body.method, options)  # the same validation as /denoise, before any work
    elif options or body.method != "auto":
        field = "method" if body.method != "auto" else f"options.{sorted(options)[0]}"
        raise ApiError(422, "invalid", f"{field}: only operation 'denoise' takes a pre-image method and "
                       "options; operation 'project' takes none", field)
    source = await run_in_threadpool(datasets.ready, body.dataset, "dataset")  # 404/409 name ``dataset``
    if source.corrupt_chunks:
        raise Corrupt(body.dataset, source.version, source.corrupt_chunks, "found damaged, not yet repaired")
    if await run_in_threadpool(datasets.exists, body.output):
        raise ApiError(409, "conflict", f"data set {body.output!r} already exists; choose another output name "
                       "or delete it first", "output")
    if source.n_features != width:
        raise ApiError(422, "invalid", f"data set {body.dataset!r} has {source.n_features} features; model "
                       f"{name!r} expects {width}", "dataset")
    try:
        meta = await serve(models, name, model, backend.transform_dataset, name, body.dataset, body.output,
                            body.operation, body.method, options)
    except ValueError as exc:  # as /denoise: the output was deleted by the backend
        raise invalid_preimage(exc) from None
    response.headers["Location"] = f"/v1/datasets/{body.output}"
    return dataset_public(meta)
