"""``/v1/models``: start fits, read their progress, project rows through them.

The registry record is the only source of a model's state: the service writes
it once (``queued``) and then only reads it; the worker that runs the fit
writes status, progress, history and errors. No route ever waits on a fit.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import AsyncIterator
from typing import Annotated

import numpy as np
from fastapi import APIRouter, Body, Path, Query, Request, Response, status
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from service.deps import BackendDep, CheckpointsDep, DatasetsDep, ModelsDep, SettingsDep
from service.errors import ApiError
from kpca.images import from_unit, to_unit
from service.images import PNG_MEDIA_TYPE, decode_png, encode_png
from service.payloads import media_type, read_body, rows_to_array
from service.schemas.common import NAME_PATTERN
from service.schemas.errors import ErrorBody
from service.schemas.models import (
    CheckpointsPublic,
    ModelCreate,
    ModelPublic,
    ModelResume,
    ModelsPublic,
    PreimageMethod,
    ProjectRequest,
    ProjectResponse,
    ReconstructRequest,
    ReconstructResponse,
    TransformRequest,
)
from service.schemas.datasets import DatasetPublic
from store.errors import NotFound

ACTIVE = ("queued", "running")
TERMINAL = ("completed", "failed", "cancelled")
EVENT_POLL_S = 0.25
EVENT_KEEPALIVE_S = 15.0

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/models", tags=["models"])

ModelName = Annotated[str, Path(pattern=NAME_PATTERN, description="model name")]

_ERRORS = {
    404: {"model": ErrorBody, "description": "unknown model or data set"},
    409: {"model": ErrorBody, "description": "conflicts with the stored state"},
    422: {"model": ErrorBody, "description": "invalid request"},
}


@router.post("", status_code=status.HTTP_202_ACCEPTED, responses={**_ERRORS, 503: {"model": ErrorBody}})
def create_model(
    body: ModelCreate,
    datasets: DatasetsDep,
    models: ModelsDep,
    backend: BackendDep,
    settings: SettingsDep,
    response: Response,
) -> ModelPublic:
    """Register a model and start fitting it; poll ``Location`` for progress."""
    try:
        dataset = datasets.get(body.dataset)
    except NotFound:
        raise ApiError(404, "not_found", f"data set {body.dataset!r} does not exist", "dataset") from None
    if dataset.get("status") != "ready":
        raise ApiError(
            409,
            "conflict",
            f"data set {body.dataset!r} is {dataset.get('status')!r}, not 'ready': upload all its chunks "
            f"and commit it first (POST /v1/datasets/{body.dataset}/commit)",
            "dataset",
        )
    n_rows = int(dataset.get("n_rows") or 0)
    if body.n_components >= n_rows:
        raise ApiError(
            422,
            "invalid",
            f"n_components must be smaller than the data set's {n_rows} rows, got {body.n_components}",
            "n_components",
        )
    init_size = body.params.init_size
    if init_size is not None and not body.n_components <= init_size <= n_rows:
        raise ApiError(
            422,
            "invalid",
            f"params.init_size: must be between n_components = {body.n_components} and the data set's "
            f"{n_rows} rows, got {init_size}",
            "params.init_size",
        )

    record = {
        "name": body.name,
        "dataset": body.dataset,
        "dataset_checksum": dataset.get("checksum"),
        "kernel": body.kernel.model_dump(),
        "n_components": body.n_components,
        "solver": body.solver,
        "params": body.params.model_dump(),
        "status": "queued",
        "progress": None,
        "history": [],
        "error": None,
        "params_used": None,
        "exact_limit": settings.exact_limit,
        "checkpoint_keep": settings.checkpoint_keep,
        "dataset_version": dataset.get("version"),
    }
    stored = models.create(body.name, record)
    try:
        backend.submit_fit(body.name)
    except Exception as exc:  # the cluster, not the client, is at fault
        log.exception("could not submit the fit of model %r", body.name)
        message = f"the fit could not be submitted to the compute cluster: {exc}"
        try:
            models.update(body.name, status="failed", error={"code": "unavailable", "message": message})
        except Exception:
            log.exception("could not mark model %r as failed", body.name)
        raise ApiError(503, "unavailable", message + "; delete the model and retry later", None) from None

    response.headers["Location"] = f"{router.prefix}/{body.name}"
    return ModelPublic.model_validate(stored if isinstance(stored, dict) else record)


@router.get("")
def list_models(models: ModelsDep) -> ModelsPublic:
    return ModelsPublic(models=[ModelPublic.model_validate(r) for r in models.list()])


@router.get("/{name}", responses=_ERRORS)
def get_model(name: ModelName, models: ModelsDep) -> ModelPublic:
    """Status, progress, history and the parameters actually used (from the registry only)."""
    return ModelPublic.model_validate(models.get(name))


@router.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT, responses=_ERRORS)
def delete_model(name: ModelName, models: ModelsDep) -> Response:
    """Ask a running fit to stop, then delete the model and its checkpoints."""
    models.request_cancel(name)
    models.delete(name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


async def _served_model(name: str, models, datasets) -> tuple[dict, dict]:
    """The record of a completed model and its data set's metadata, or the 404/409 that explains why not."""
    model = await run_in_threadpool(models.get, name)
    if model.get("status") != "completed":
        raise ApiError(
            409,
            "conflict",
            f"model {name!r} is {model.get('status')!r}, not 'completed': wait for the fit to finish "
            f"(poll GET /v1/models/{name})",
            "name",
        )
    try:
        dataset = await run_in_threadpool(datasets.get, model["dataset"])
    except NotFound:
        raise ApiError(
            404, "not_found", f"data set {model['dataset']!r} of model {name!r} has been deleted", "dataset"
        ) from None
    return model, dataset


def _checked_rows(rows: list, n_features: int) -> np.ndarray:
    """Request rows as a float64 array with the data set's width, all finite (422 on ``rows`` otherwise)."""
    array = rows_to_array(rows)
    if array.shape[1] != n_features:
        raise ApiError(
            422, "invalid", f"rows must have {n_features} columns (the data set's n_features), got {array.shape[1]}",
            "rows"
        )
    finite = np.isfinite(array).all(axis=1)
    if not finite.all():
        bad = int(np.argmin(finite))
        raise ApiError(422, "invalid", f"rows must be finite: row {bad} contains NaN or infinity", "rows")
    return array


async def _serve(models, name: str, model: dict, call, *args):
    """Run a blocking backend call; a model deleted or refitted meanwhile is a 404/409, not a 500."""
    try:
        return await run_in_threadpool(call, *args)
    except Exception:
        current = await run_in_threadpool(models.get, name)  # NotFound -> 404
        if current.get("status") != "completed" or current.get("created_at") != model.get("created_at"):
            raise ApiError(409, "conflict", f"model {name!r} changed while serving the request; retry",
                           "name") from None
        raise


@router.post("/{name}/project", responses=_ERRORS)
async def project(
    name: ModelName, body: ProjectRequest, models: ModelsDep, datasets: DatasetsDep, backend: BackendDep
) -> ProjectResponse:
    """Kernel principal components of ``rows``: one row of ``n_components`` values per input row."""
    model, dataset = await _served_model(name, models, datasets)
    rows = _checked_rows(body.rows, int(dataset["n_features"]))
    components = await _serve(models, name, model, backend.project, name, rows)
    return ProjectResponse(components=np.asarray(components, dtype=np.float64).tolist())


async def _reconstruct(name, body, models, datasets, backend) -> ReconstructResponse:
    model, dataset = await _served_model(name, models, datasets)
    rows = _checked_rows(body.rows, int(dataset["n_features"]))
    options = body.options.model_dump(exclude_none=True)
    try:
        out = await _serve(models, name, model, backend.reconstruct, name, rows, body.method, options)
    except ValueError as exc:  # a method the kernel does not support, or an option the method does not take
        message = str(exc)
        field = message.split(":", 1)[0] if message.startswith("options.") else "method"
        raise ApiError(422, "invalid", message, field) from None
    return ReconstructResponse(rows=np.asarray(out, dtype=np.float64).tolist())


@router.post("/{name}/reconstruct", responses=_ERRORS)
async def reconstruct(
    name: ModelName, body: ReconstructRequest, models: ModelsDep, datasets: DatasetsDep, backend: BackendDep
) -> ReconstructResponse:
    """Rows -> their projection onto the components -> back to input space (a pre-image per row)."""
    return await _reconstruct(name, body, models, datasets, backend)


@router.post("/{name}/denoise", responses=_ERRORS)
async def denoise(
    name: ModelName, body: ReconstructRequest, models: ModelsDep, datasets: DatasetsDep, backend: BackendDep
) -> ReconstructResponse:
    """Denoise rows: the pre-image of their projection onto the leading components (same maths as
    ``/reconstruct``; the name says what it is for)."""
    return await _reconstruct(name, body, models, datasets, backend)


@router.post(
    "/{name}/denoise-image",
    responses={**_ERRORS, 200: {"content": {PNG_MEDIA_TYPE: {}}, "description": "the denoised PNG"}},
    response_class=Response,
)
async def denoise_image(
    name: ModelName,
    request: Request,
    models: ModelsDep,
    datasets: DatasetsDep,
    backend: BackendDep,
    stride: Annotated[int, Query(ge=1, le=64, description="grid step between patches")] = 2,
    method: Annotated[PreimageMethod, Query()] = "auto",
    upscale: Annotated[int, Query(ge=1, le=8, description="pixel-replication factor (hyperresolution)")] = 1,
) -> Response:
    """PNG in, PNG out: overlapping patches (the model's patch size) denoised through the model and
    averaged (seed 000 §5.2); with ``upscale`` > 1 the image is first enlarged by pixel replication
    (hyperresolution, seed 002 §4.2). Grey and colour PNGs keep their mode and bit depth."""
    if media_type(request) != PNG_MEDIA_TYPE:
        raise ApiError(415, "unsupported_media_type", f"send the image as {PNG_MEDIA_TYPE}", "body")
    image = decode_png(await read_body(request))
    model, dataset = await _served_model(name, models, datasets)
    channels = 1 if image.ndim == 2 else image.shape[2]
    n_features = int(dataset["n_features"])
    patch = math.isqrt(n_features // channels)
    if patch * patch * channels != n_features:
        kind = "grey" if channels == 1 else "colour"
        raise ApiError(422, "invalid", f"model {name!r} was trained on rows of {n_features} values, which are not "
                       f"square {kind} patches ({channels} channel(s)); send an image whose patches match "
                       "its training patches", "image")
    height, width = image.shape[0] * upscale, image.shape[1] * upscale
    if patch > min(height, width):
        raise ApiError(422, "invalid", f"the model's {patch}x{patch} patches do not fit in a {height}x{width} "
                       "image", "image")
    if stride > patch:
        raise ApiError(422, "invalid", f"stride {stride} is larger than the patch size {patch}: pixels between "
                       "patches would not be covered", "stride")
    unit, info = to_unit(image)
    cleaned = await _serve(models, name, model, backend.denoise_image, name, unit, patch, stride, method, None,
                           upscale)
    return Response(content=encode_png(from_unit(np.clip(cleaned, 0.0, 1.0), info)), media_type=PNG_MEDIA_TYPE)


@router.post("/{name}/transform", status_code=status.HTTP_201_CREATED, responses=_ERRORS)
async def transform_dataset(
    name: ModelName, body: TransformRequest, models: ModelsDep, datasets: DatasetsDep, backend: BackendDep,
    response: Response,
) -> DatasetPublic:
    """Project (rows -> components) or denoise (rows -> pre-images) a whole ready data set into a new
    data set, as one dask task per chunk of rows on the workers; answers when the output is committed."""
    model, trained_on = await _served_model(name, models, datasets)
    source = await run_in_threadpool(datasets.get, body.dataset)
    if source.get("status") != "ready":
        raise ApiError(409, "conflict", f"data set {body.dataset!r} is not committed; commit it first", "dataset")
    if int(source["n_features"]) != int(trained_on["n_features"]):
        raise ApiError(422, "invalid", f"data set {body.dataset!r} has {source['n_features']} features; model "
                       f"{name!r} expects {trained_on['n_features']}", "dataset")
    options = body.options.model_dump(exclude_none=True)
    meta = await _serve(models, name, model, backend.transform_dataset, name, body.dataset, body.output,
                        body.operation, body.method, options)
    response.headers["Location"] = f"/v1/datasets/{body.output}"
    return DatasetPublic.model_validate(meta)


@router.post("/{name}/cancel", status_code=status.HTTP_202_ACCEPTED, responses=_ERRORS)
def cancel_model(name: ModelName, models: ModelsDep) -> ModelPublic:
    """Ask a queued or running fit to stop after its current block; the last checkpoint is kept."""
    record = models.get(name)
    if record.get("status") not in ACTIVE:
        raise ApiError(409, "conflict", f"model {name!r} is {record.get('status')!r}; only a queued or running "
                       "fit can be cancelled", "name")
    models.request_cancel(name)
    return ModelPublic.model_validate(models.get(name))


@router.post("/{name}/resume", status_code=status.HTTP_202_ACCEPTED, responses={**_ERRORS, 503: {"model": ErrorBody}})
def resume_model(
    name: ModelName,
    models: ModelsDep,
    datasets: DatasetsDep,
    backend: BackendDep,
    response: Response,
    body: Annotated[ModelResume | None, Body()] = None,
) -> ModelPublic:
    """Continue a cancelled, failed or completed fit from its last checkpoint.

    ``passes`` raises the total number of passes; ``dataset_version`` continues
    on a newer version of the data set (rows appended since), starting the new
    rows' coefficients at zero.
    """
    body = body or ModelResume()
    record = models.get(name)
    if record.get("status") in ACTIVE:
        raise ApiError(409, "conflict", f"model {name!r} is already {record['status']}", "name")
    if record.get("solver") == "exact":
        raise ApiError(409, "conflict", "an exact model has nothing to resume; fit a new model instead", "name")
    params = dict(record.get("params") or {})
    done = int((record.get("progress") or {}).get("pass") or 0)
    passes = body.passes if body.passes is not None else int(params.get("passes", 20))
    if passes <= done and (body.passes is not None or body.dataset_version is None):
        if body.passes is None and record.get("status") == "completed":
            raise ApiError(409, "conflict", f"model {name!r} completed all {done} passes; ask for more passes "
                           '(e.g. {"passes": %d}) or a newer dataset_version' % (done + 10), "passes")
        raise ApiError(422, "invalid", f"passes must exceed the {done} passes already done, got {passes}", "passes")
    version = record.get("dataset_version")
    if body.dataset_version is not None:
        meta = datasets.get(record["dataset"])
        known = [v["version"] for v in meta.get("versions") or []]
        if body.dataset_version not in known:
            raise ApiError(404, "not_found", f"data set {record['dataset']!r} has no version {body.dataset_version}"
                           f" (versions: {known})", "dataset_version")
        if version is not None and body.dataset_version < version:
            raise ApiError(422, "invalid", f"dataset_version must not go back from {version} to "
                           f"{body.dataset_version}", "dataset_version")
        version = body.dataset_version
        if passes <= done:
            passes = done + int(params.get("passes", 20))
    models.clear_cancel(name)
    params["passes"] = passes
    models.update(name, status="queued", params=params, dataset_version=version, error=None, stopped_early=None)
    backend.submit_fit(name)
    response.headers["Location"] = f"{router.prefix}/{name}"
    return ModelPublic.model_validate(models.get(name))


@router.get("/{name}/checkpoints", responses=_ERRORS)
def list_checkpoints(name: ModelName, models: ModelsDep, checkpoints: CheckpointsDep) -> CheckpointsPublic:
    """The retained checkpoints of a model (pass, size, time), the best one marked."""
    record = models.get(name)
    best = (record.get("best_checkpoint") or {}).get("pass")
    listed = checkpoints.list(name)
    return CheckpointsPublic.model_validate(
        {"checkpoints": [{**c, "best": c["pass"] == best} for c in listed]}
    )


def _sse(event: str, data: dict, event_id: str | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data)}\n\n".encode()


@router.get("/{name}/events", responses=_ERRORS, response_class=StreamingResponse)
async def model_events(name: ModelName, models: ModelsDep, request: Request) -> StreamingResponse:
    """Server-sent events: one ``progress`` event per finished pass (the history
    records, earlier ones first), a ``status`` event on every status change,
    and a final ``end`` event when the fit is completed, failed or cancelled."""
    await run_in_threadpool(models.get, name)  # 404 before the stream starts

    async def stream() -> AsyncIterator[bytes]:
        sent, last_status = 0, None
        loop = asyncio.get_running_loop()
        quiet_since = loop.time()
        while not await request.is_disconnected():
            try:
                record = await run_in_threadpool(models.get, name)
            except NotFound:
                yield _sse("end", {"status": "deleted"})
                return
            history = record.get("history") or []
            if len(history) < sent:  # resumed from an earlier checkpoint
                sent = 0
            for entry in history[sent:]:
                yield _sse("progress", entry, str(entry.get("pass")))
                quiet_since = loop.time()
            sent = len(history)
            status_now = record.get("status")
            if status_now != last_status:
                last_status = status_now
                yield _sse("status", {"status": status_now, "error": record.get("error")})
                quiet_since = loop.time()
            if status_now in TERMINAL:
                yield _sse("end", {"status": status_now})
                return
            if loop.time() - quiet_since > EVENT_KEEPALIVE_S:
                yield b": keep-alive\n\n"
                quiet_since = loop.time()
            await asyncio.sleep(EVENT_POLL_S)

    return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
