"""``/v1/models``: start fits, read their progress, project rows through them.

The registry record is the only source of a model's state: the service writes
it once (``queued``) and then only reads it; the worker that runs the fit
writes status, progress, history and errors. No route ever waits on a fit.
"""

from __future__ import annotations

import logging
from typing import Annotated

import numpy as np
from fastapi import APIRouter, Path, Response, status
from starlette.concurrency import run_in_threadpool

from service.deps import BackendDep, DatasetsDep, ModelsDep, SettingsDep
from service.errors import ApiError
from service.payloads import rows_to_array
from service.schemas.common import NAME_PATTERN
from service.schemas.errors import ErrorBody
from service.schemas.models import ModelCreate, ModelPublic, ModelsPublic, ProjectRequest, ProjectResponse
from store.errors import NotFound

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


@router.post("/{name}/project", responses=_ERRORS)
async def project(
    name: ModelName, body: ProjectRequest, models: ModelsDep, datasets: DatasetsDep, backend: BackendDep
) -> ProjectResponse:
    """Kernel principal components of ``rows``: one row of ``n_components`` values per input row."""
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

    rows = rows_to_array(body.rows)
    n_features = int(dataset["n_features"])
    if rows.shape[1] != n_features:
        raise ApiError(
            422, "invalid", f"rows must have {n_features} columns (the data set's n_features), got {rows.shape[1]}", "rows"
        )
    finite = np.isfinite(rows).all(axis=1)
    if not finite.all():
        bad = int(np.argmin(finite))
        raise ApiError(422, "invalid", f"rows must be finite: row {bad} contains NaN or infinity", "rows")

    try:
        components = await run_in_threadpool(backend.project, name, rows)
    except Exception:
        # deleted (or refitted) while we were projecting: say so instead of a 500
        current = await run_in_threadpool(models.get, name)  # NotFound -> 404
        if current.get("status") != "completed" or current.get("created_at") != model.get("created_at"):
            raise ApiError(409, "conflict", f"model {name!r} changed while projecting; retry", "name") from None
        raise
    return ProjectResponse(components=np.asarray(components, dtype=np.float64).tolist())
