"""``/v1/models`` lifecycle: create (start a fit), list, read, delete, cancel, resume, checkpoints.

The registry record (`store.jobs.records.ModelRecord`) is the only source of a
model's state: the service writes it once (``queued``) and then only reads
it; the worker that runs the fit writes status, progress, history and
errors. No route ever waits on a fit.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path, Query, Request, Response, status
from starlette.concurrency import run_in_threadpool

from service import jobs
from service.deps import BackendDep, CheckpointsDep, DatasetsDep, ModelsDep, SettingsDep
from service.job_checks import checked_fit_params
from service.limits import FitOwner
from service.pagination import DEFAULT_LIMIT, LIST_RESPONSES, PageCursor, PageLimit, page
from service.payloads import JSON_MEDIA_TYPE
from service.public import checkpoints_public, listed, model_public, model_summary
from service.schemas.common import NAME_MAX_LENGTH, NAME_PATTERN
from service.schemas.errors import ErrorBody
from service.schemas.models import CheckpointsPublic, ModelCreate, ModelPublic, ModelResume, ModelsPublic
from service.schemas.openapi import Responses
from service.security import READ, WRITE, access
from store.jobs.records import ModelRecord, Placement

router = APIRouter(prefix="/v1/models", tags=["models"])

ModelName = Annotated[str, Path(pattern=NAME_PATTERN, max_length=NAME_MAX_LENGTH, description="model name")]

ERRORS: Responses = {
    404: {"model": ErrorBody, "description": "unknown model or data set"},
    409: {"model": ErrorBody, "description": "conflicts with the stored state"},
    422: {"model": ErrorBody, "description": "invalid request"},
}


@router.post("", openapi_extra=access(WRITE, JSON_MEDIA_TYPE), status_code=status.HTTP_202_ACCEPTED,
             responses={**ERRORS, 429: {"model": ErrorBody, "description": "too many fits"}, 503: {"model": ErrorBody}})
def create_model(body: ModelCreate, datasets: DatasetsDep, models: ModelsDep, backend: BackendDep,
                 settings: SettingsDep, response: Response, owner: FitOwner) -> ModelPublic:
    """Register a model and start fitting it; poll ``Location`` for progress.

    The solver's parameters are checked against the data set (its rows) here,
    so that a fit the data cannot take is a 422 now, not a failed fit later.
    """
    dataset = datasets.ready(body.dataset, field="dataset")
    params = checked_fit_params(datasets, dataset, body.kernel, body.solver, body.n_components, body.params,
                                settings.exact_limit)
    record = ModelRecord.new(body.name, dataset, kernel=body.kernel, n_components=body.n_components,
                             solver=body.solver, params=params, checkpoint_keep=settings.checkpoint_keep,
                             placement=Placement(workers=body.placement.workers, device=body.placement.device,
                                                 exact_limit=settings.exact_limit))
    return model_public(jobs.start(backend, models, record, response, owner))


@router.get("", openapi_extra=access(READ), responses=LIST_RESPONSES)
def list_models(
    models: ModelsDep, cursor: PageCursor = None, limit: PageLimit = DEFAULT_LIMIT,
    full: Annotated[bool, Query(description="every field of each model (history included), not a summary")] = False,
) -> ModelsPublic:
    """A page of models sorted by name (`service.pagination`): a summary of each (status, progress,
    no history) unless ``full=true``; a model whose record cannot be read shows status ``corrupt`` and why."""
    records, next_cursor = page(models.entries, cursor, limit)
    return ModelsPublic(models=[listed(r, lambda record: model_summary(record, full)) for r in records],
                        next_cursor=next_cursor)


# response_model: the view's model, which the route answers as its JSON bytes (kept, `service.record_views`)
@router.get("/{name}", openapi_extra=access(READ), responses=ERRORS, response_model=ModelPublic)
async def get_model(name: ModelName, models: ModelsDep, request: Request) -> Response:
    """Status, progress, history and the parameters actually used (from the registry only; the encoded
    view kept until the record is written again, `service.record_views`: a poll between two writes is a
    ``stat`` on the event loop, a record read and its encoding go to the thread pool)."""
    views = request.app.state.record_views
    body = views.kept(models, name)
    if body is None:
        body = await run_in_threadpool(views.json, models, name,
                                       lambda record: model_public(record).model_dump_json(by_alias=True).encode())
    return Response(body, media_type="application/json")


@router.delete("/{name}", openapi_extra=access(WRITE), status_code=status.HTTP_204_NO_CONTENT, responses=ERRORS)
def delete_model(name: ModelName, models: ModelsDep) -> Response:
    """Ask a running fit to stop, then delete the model and its checkpoints."""
    return jobs.delete(models, name)


@router.post("/{name}/cancel", openapi_extra=access(WRITE, JSON_MEDIA_TYPE), status_code=status.HTTP_202_ACCEPTED,
             responses=ERRORS)
def cancel_model(name: ModelName, models: ModelsDep) -> ModelPublic:
    """Ask a queued or running fit to stop after its current block; the last checkpoint is kept."""
    return model_public(jobs.cancel(models, name))


@router.post("/{name}/resume", openapi_extra=access(WRITE, JSON_MEDIA_TYPE), status_code=status.HTTP_202_ACCEPTED,
             responses={**ERRORS, 503: {"model": ErrorBody}})
def resume_model(name: ModelName, models: ModelsDep, datasets: DatasetsDep, backend: BackendDep, response: Response,
                 body: Annotated[ModelResume | None, Body()] = None) -> ModelPublic:
    """Continue a cancelled, failed or completed fit from its last checkpoint.

    ``passes`` is the new TOTAL number of passes; ``dataset_version``
    continues on a newer version of the data set (rows appended since),
    starting the new rows' coefficients at zero.
    """
    body = body or ModelResume()
    record = models.get(name)
    versions = [v.version for v in datasets.get(record.dataset).versions] if body.dataset_version is not None else []
    return model_public(jobs.resume(backend, models, name, response, body.passes, body.dataset_version, versions))


@router.get("/{name}/checkpoints", openapi_extra=access(READ), responses=ERRORS)
def list_checkpoints(name: ModelName, models: ModelsDep, checkpoints: CheckpointsDep) -> CheckpointsPublic:
    """The retained checkpoints of a model (pass, size, time), the best one marked."""
    best = models.get(name).best_checkpoint
    best_pass = best.pass_ if best is not None else None
    return checkpoints_public(checkpoints.list(name), best_pass)
