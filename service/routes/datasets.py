"""``/v1/datasets``: create, list, inspect, delete; upload chunks; commit."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response, status
from starlette.concurrency import run_in_threadpool

from service.deps import DatasetsDep
from service.errors import ApiError
from service.payloads import JSON_MEDIA_TYPE, NPY_MEDIA_TYPE, media_type, read_body, rows_from_json, rows_from_npy
from service.schemas.common import NAME_PATTERN
from service.schemas.datasets import ChunkRows, DatasetCreate, DatasetPublic, DatasetsPublic
from service.schemas.errors import ErrorBody

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])

DatasetName = Annotated[str, Path(pattern=NAME_PATTERN, description="data set name")]
ChunkIndex = Annotated[int, Path(ge=0, le=1_000_000, description="position of the chunk, from 0")]

_ERRORS = {
    404: {"model": ErrorBody, "description": "unknown data set"},
    409: {"model": ErrorBody, "description": "conflicts with the stored state"},
    422: {"model": ErrorBody, "description": "invalid request"},
}


@router.post("", status_code=status.HTTP_201_CREATED, responses=_ERRORS)
def create_dataset(body: DatasetCreate, datasets: DatasetsDep, response: Response) -> DatasetPublic:
    """Create an empty data set ready to receive chunks."""
    record = datasets.create(body.name, body.n_features, body.dtype)
    response.headers["Location"] = f"{router.prefix}/{body.name}"
    return DatasetPublic.model_validate(record)


@router.get("")
def list_datasets(datasets: DatasetsDep) -> DatasetsPublic:
    return DatasetsPublic(datasets=[DatasetPublic.model_validate(r) for r in datasets.list()])


@router.get("/{name}", responses=_ERRORS)
def get_dataset(name: DatasetName, datasets: DatasetsDep) -> DatasetPublic:
    return DatasetPublic.model_validate(datasets.get(name))


@router.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT, responses=_ERRORS)
def delete_dataset(name: DatasetName, datasets: DatasetsDep) -> Response:
    datasets.delete(name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.put(
    "/{name}/chunks/{index}",
    responses={
        **_ERRORS,
        400: {"model": ErrorBody, "description": "unparseable body"},
        413: {"model": ErrorBody, "description": "body over the size limit"},
        415: {"model": ErrorBody, "description": "neither .npy bytes nor JSON"},
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                NPY_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}},
                JSON_MEDIA_TYPE: {"schema": ChunkRows.model_json_schema()},
            },
        }
    },
)
async def put_chunk(name: DatasetName, index: ChunkIndex, request: Request, datasets: DatasetsDep) -> DatasetPublic:
    """Store chunk ``index`` of the data set: ``.npy`` bytes or ``{"rows": [[...]]}``.

    Idempotent: re-sending the same rows under the same index is a no-op, so an
    interrupted upload resumes by re-sending the missing indices.
    """
    dataset = await run_in_threadpool(datasets.get, name)  # 404 before reading the body
    kind = media_type(request)
    if kind not in (NPY_MEDIA_TYPE, JSON_MEDIA_TYPE):
        raise ApiError(
            415,
            "unsupported_media_type",
            f"Content-Type must be {NPY_MEDIA_TYPE} (.npy bytes) or {JSON_MEDIA_TYPE} "
            f'({{"rows": [[...]]}}), not {kind or "absent"}',
            "content-type",
        )
    body = await read_body(request)
    if kind == NPY_MEDIA_TYPE:
        rows = await run_in_threadpool(rows_from_npy, body)
    else:
        rows = await run_in_threadpool(rows_from_json, body, dataset["n_features"])
    record = await run_in_threadpool(datasets.put_chunk, name, index, rows)
    return DatasetPublic.model_validate(record)


@router.post("/{name}/commit", responses=_ERRORS)
def commit_dataset(name: DatasetName, datasets: DatasetsDep) -> DatasetPublic:
    """Check that chunks are contiguous from 0, then freeze the set (``status: ready``)."""
    return DatasetPublic.model_validate(datasets.commit(name))
