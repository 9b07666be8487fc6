"""Serving a whole data set through a completed model: ``/v1/models/{name}/transform`` writes its
projection or its pre-images as a new data set, one task per chunk of rows on the workers
(`workers.operations.TransformDataset`)."""

from __future__ import annotations

from fastapi import APIRouter, Response, status
from starlette.concurrency import run_in_threadpool

from service.deps import BackendDep, DatasetsDep, ModelsDep
from service.errors import ApiError
from service.job_checks import checked_preimage
from service.payloads import JSON_MEDIA_TYPE, ThreadParsedRoute
from service.public import dataset_public
from service.routes.models import ERRORS, ModelName
from service.routes.served import invalid_preimage, serve, served_job
from service.schemas.datasets import DatasetPublic
from service.schemas.serving import TransformRequest
from service.security import WRITE, access
from store.errors import Corrupt
from workers.operations import TransformDataset

router = APIRouter(prefix="/v1/models", tags=["serving"], route_class=ThreadParsedRoute)


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
        meta = await serve(models, name, model, backend, TransformDataset(name, body.dataset, body.output,
                                                                          body.operation, body.method, options))
    except ValueError as exc:  # as /denoise: the output was deleted by the backend
        raise invalid_preimage(exc) from None
    response.headers["Location"] = f"/v1/datasets/{body.output}"
    return dataset_public(meta)
