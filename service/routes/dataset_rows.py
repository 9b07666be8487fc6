"""Reading a data set's rows back: one chunk (``.npy`` or JSON) or a whole version streamed as ``.npy``.

Only committed versions are readable (their rows pass the integrity check of
`store.datasets.integrity` on the way out); a staged chunk is a 409 on ``index`` until
the data set is committed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

import numpy as np
from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from service.deps import DatasetsDep
from service.errors import ApiError
from service.payloads import NPY_MEDIA_TYPE
from service.responses import NPY_CONTENT, Format, npy_answer, npy_header, wants_npy
from service.routes.datasets import ChunkIndex, DatasetName
from service.routes.datasets import router as datasets_router
from service.schemas.errors import ErrorBody
from service.schemas.openapi import Responses
from service.security import READ, access

router = APIRouter(prefix=datasets_router.prefix, tags=["datasets"])

Version = Annotated[int | None, Query(ge=1, description="committed version; default the latest")]

_ERRORS: Responses = {
    404: {"model": ErrorBody, "description": "unknown data set, version or chunk"},
    409: {"model": ErrorBody, "description": "no committed version, a staged chunk, or damaged rows"},
    422: {"model": ErrorBody, "description": "invalid request"},
}


class ChunkRowsPublic(BaseModel):
    """``GET /v1/datasets/{name}/chunks/{index}`` as JSON."""

    dataset: str = Field(description="the data set's name")
    version: int = Field(description="the committed version read")
    index: int = Field(description="the chunk's position")
    n_rows: int = Field(description="rows in the chunk")
    rows: list[list[float]] = Field(description="the chunk's rows, as stored (float32 values are exact doubles)")


def _read_chunk(datasets, name: str, index: int, version: int | None) -> tuple[int, np.ndarray]:
    found, ranges = datasets.chunk_ranges(name, version)
    if index >= len(ranges):
        if version is None and index in datasets.get(name).staged:
            raise ApiError(409, "conflict", f"chunk {index} of data set {name!r} is staged, not committed: commit "
                           f"it first (POST /v1/datasets/{name}/commit)", "index")
        raise ApiError(404, "not_found", f"data set {name!r} version {found} has chunks 0..{len(ranges) - 1}, "
                       f"not {index}", "index")
    start, stop = ranges[index]
    return found, np.asarray(datasets.open_array(name, found)[start:stop])


@router.get("/{name}/chunks/{index}", openapi_extra=access(READ),
            responses={**_ERRORS, 200: {**NPY_CONTENT, "model": ChunkRowsPublic}}, response_model=ChunkRowsPublic)
async def get_chunk(name: DatasetName, index: ChunkIndex, request: Request, datasets: DatasetsDep,
                    version: Version = None, format: Format = None) -> Response:
    """The rows of committed chunk ``index`` of ``version`` (default the latest), bit for bit as stored:
    ``.npy`` bytes (``Accept: application/octet-stream`` or ``format=npy``) or JSON ``{"rows": [[...]]}``.

    Staged chunks are not readable (409 on ``index``: commit first); a chunk
    past the version's last is a 404 on ``index``; an unknown version a 404
    on ``version``; a set without a committed version a 409 on ``name``.
    """
    found, rows = await run_in_threadpool(_read_chunk, datasets, name, index, version)
    headers = {"X-Dataset-Version": str(found)}
    if wants_npy(request, format):
        return npy_answer(rows, headers)
    body = {"dataset": name, "version": found, "index": index, "n_rows": int(rows.shape[0]), "rows": rows.tolist()}
    return JSONResponse(body, headers=headers)


def _npy_stream(array, ranges: list[tuple[int, int]], header: bytes) -> Iterator[bytes]:
    yield header
    for start, stop in ranges:
        yield np.ascontiguousarray(array[start:stop]).tobytes()


@router.get("/{name}/data.npy", openapi_extra=access(READ), responses={**_ERRORS, 200: NPY_CONTENT},
            response_class=StreamingResponse, operation_id="download_dataset_npy")
@router.get("/{name}/download", openapi_extra=access(READ), responses={**_ERRORS, 200: NPY_CONTENT},
            response_class=StreamingResponse, operation_id="download_dataset")
def download(name: DatasetName, datasets: DatasetsDep, version: Version = None) -> StreamingResponse:
    """The whole committed ``version`` (default the latest) as one ``.npy`` file of shape (n_rows,
    n_features), streamed chunk by chunk (memory: one chunk) with its ``Content-Length``.

    A set without a committed version is a 409 on ``name``, an unknown version a 404 on ``version``.
    The first chunk is read (and checked) before the answer starts: damaged, it is a 409 ``corrupt``.
    Rows found damaged while streaming the others end the response early (the client sees fewer bytes
    than ``Content-Length``) and mark the set corrupt.
    """
    found, ranges = datasets.chunk_ranges(name, version)
    array = datasets.open_array(name, found)
    dtype = np.dtype(array.dtype)
    n_rows, n_features = (int(s) for s in array.shape)
    header = npy_header(dtype, (n_rows, n_features))
    headers = {"Content-Length": str(len(header) + n_rows * n_features * dtype.itemsize),
               "Content-Disposition": f'attachment; filename="{name}-v{found}.npy"', "X-Dataset-Version": str(found)}
    first = [np.ascontiguousarray(array[a:b]).tobytes() for a, b in ranges[:1]]  # a 409 if damaged, not a cut stream
    return StreamingResponse(_npy_stream(array, ranges[1:], header + b"".join(first)), media_type=NPY_MEDIA_TYPE,
                             headers=headers)
