"""A model moved between services: ``GET /v1/models/{name}/export`` and ``POST /v1/models/import``.

The archive (`store.jobs.archive`) is a tar of the model's record, the checkpoint
it serves from, its training rows and a manifest of sha256 digests. Export
streams it; import streams the request body to a temporary file in the data
folder, then hands it to the backend (`workers.operations.ImportModel`), which
checks that its checkpoint serves and lets the store verify it and create the
model. The blocking work runs in the threadpool.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path as FilePath
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status
from fastapi.responses import StreamingResponse
from starlette.concurrency import iterate_in_threadpool, run_in_threadpool
from starlette.requests import ClientDisconnect

from service.binary_answers import BYTES_MEDIA_TYPE, answer_media_type, binary_content
from service.deps import BackendDep, ModelsDep
from service.errors import ApiError
from service.limits import DataUsageDep, principal
from service.public import model_public
from service.routes.models import ERRORS, ModelName
from service.routes.models import router as models_router
from service.schemas.common import NAME_MAX_LENGTH, NAME_PATTERN
from service.schemas.errors import ErrorBody
from service.schemas.models import ModelPublic
from service.security import READ, WRITE, access
from service.threads import wait_for_cluster
from store.jobs.archive import MEDIA_TYPE, ModelExport
from store.places import local_folder, where_of
from workers.operations import ImportModel

router = APIRouter(prefix=models_router.prefix, tags=["models"])

#: what an import writes besides the archive streamed to disk, in archives' bytes: its members extracted
#: for their checks (`store.jobs.archive.import_archive`), then its rows as a data set (at most as large)
IMPORT_COPIES = 2

#: an import's body and an export's answer: ``application/x-tar``, or the same bytes as octet-stream
#: (`service.binary_answers`); an import's is checked member by member either way
_IMPORT_MEDIA_TYPES = (MEDIA_TYPE, BYTES_MEDIA_TYPE)
_TAR = {"content": binary_content(MEDIA_TYPE)}
_IMPORT_BODY = {"requestBody": {"required": True, "description": "a model archive made by GET "
                                "/v1/models/{name}/export (an uncompressed tar)", **_TAR}}


@router.get("/{name}/export", openapi_extra=access(READ), response_class=StreamingResponse,
            responses={**ERRORS, 200: {**_TAR, "description": "the model archive"}})
async def export_model(name: ModelName, request: Request, models: ModelsDep) -> StreamingResponse:
    """The completed model ``name`` as one archive (``application/x-tar``, with its ``Content-Length``):
    ``model.json`` (its record, history included), ``checkpoint.npz`` (the checkpoint it serves from, a
    sharded one joined), ``rows.npy`` (its training rows: the data set version it was fitted on) and
    ``manifest.json`` (format version, names, the size and sha256 of every member).

    Streamed chunk by chunk (memory: one data chunk). A model that is not completed is a 409 on
    ``name`` saying what to do; so is one whose data set has been deleted (its rows cannot travel).
    ``POST /v1/models/import`` on another service (or this one) serves it again.
    """
    archive = await run_in_threadpool(ModelExport, where_of(models), name)
    headers = {"Content-Length": str(archive.size),
               "Content-Disposition": f'attachment; filename="{name}.kpca.tar"'}
    return StreamingResponse(iterate_in_threadpool(iter(archive)), media_type=answer_media_type(request, MEDIA_TYPE),
                             headers=headers)


async def _body_to_file(request: Request, folder: FilePath, usage) -> FilePath:
    """The request body written to a new file in ``folder`` (its size bounded by
    `service.limits.BodyLimitMiddleware`, ``max_import_bytes``), each piece counted against ``max_data_bytes``
    before it is written (`service.limits.DataUsage.take`), so that no import, nor all of them together,
    holds more on disk than the limit at any moment, with or without a ``Content-Length`` (a declared one
    over the room left is refused before any byte is read); removed on failure."""
    declared = request.headers.get("content-length", "")
    usage.check(int(declared) if declared.isdigit() else 0)
    folder.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=folder, prefix=".upload-", suffix=".tar")
    path, taken = FilePath(name), 0
    try:
        with os.fdopen(handle, "wb") as out:
            async for part in request.stream():
                usage.take(len(part))
                taken += len(part)
                await run_in_threadpool(out.write, part)
    except BaseException as exc:
        path.unlink(missing_ok=True)
        usage.release(taken)
        if isinstance(exc, ClientDisconnect):
            raise ApiError(400, "bad_request", "the client disconnected before the whole archive arrived",
                           "body") from None
        raise
    return path


@router.post("/import", status_code=status.HTTP_201_CREATED,
             openapi_extra={**access(WRITE, *_IMPORT_MEDIA_TYPES), **_IMPORT_BODY},
             responses={**ERRORS, 413: {"model": ErrorBody, "description": "the archive is over max_import_bytes, "
                                        "or the data folder is full"},
                        415: {"model": ErrorBody, "description": "the body is not a tar"}})
async def import_model(
    request: Request, response: Response, models: ModelsDep, backend: BackendDep, usage: DataUsageDep,
    name: Annotated[str | None, Query(pattern=NAME_PATTERN, max_length=NAME_MAX_LENGTH,
                                      description="import the model under this name; default the archive's")] = None,
    dataset: Annotated[str | None, Query(pattern=NAME_PATTERN, max_length=NAME_MAX_LENGTH,
                                         description="the data set of its training rows; default the archive's "
                                                     "data set name")] = None,
) -> ModelPublic:
    """Create a completed model from an archive of ``GET /v1/models/{name}/export`` (body
    ``application/x-tar``, at most ``max_import_bytes``: it is streamed to disk); it serves ``/project``,
    ``/reconstruct`` and ``/denoise`` at once, with the same results as the original. While it runs it
    holds up to three times the archive's bytes on disk (the archive, its members extracted, its rows as
    a data set): all three are counted against ``max_data_bytes`` before they are written (413
    ``storage_full``), the archive piece by piece as it arrives.

    Everything is verified before anything is created: member names (no paths, links or duplicates),
    sizes and sha256 against the manifest, the format version, the record, the checkpoint against the
    record and the rows, the rows against their data set checksum; a refusal is a 422 on ``body``
    naming what is wrong. A model ``name`` that exists is a 409 on ``name``. The training rows become
    data set ``dataset``, or reuse it when it already holds the same rows (same checksum); a data set
    of that name with other rows is a 409 on ``dataset``. A failed import leaves nothing behind.
    """
    folder = local_folder(where_of(models)) / ".imports"
    path = await _body_to_file(request, folder, usage)
    size = path.stat().st_size
    try:
        usage.take(IMPORT_COPIES * size)  # the members extracted for their checks, then the rows as a data set
        try:
            record = await wait_for_cluster(backend.serve, ImportModel(path, name, dataset, principal(request)))
        except BaseException:
            usage.release(IMPORT_COPIES * size)  # a failed import leaves nothing behind
            raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        usage.release(size)  # the archive itself is gone
    response.headers["Location"] = f"{router.prefix}/{record.name}"
    return model_public(record)
