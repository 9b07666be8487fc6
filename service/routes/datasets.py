"""``/v1/datasets``: create or register, list, inspect, delete; upload chunks; commit versions."""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import APIRouter, Header, Path, Query, Request, Response, status
from starlette.concurrency import run_in_threadpool

from service import jobs
from service.content_digest import DESCRIPTION as DIGEST_DESCRIPTION
from service.content_digest import check_content_digest
from service.deps import BackendDep, ClusteringsDep, DatasetsDep, ModelsDep, SettingsDep
from service.errors import ApiError
from service.images import decode_png, png_body, png_plan
from service.limits import DataUsageDep, check_image_dataset, check_patches, check_rows, data_usage
from service.pagination import DEFAULT_LIMIT, LIST_RESPONSES, PageCursor, PageLimit, page
from service.payloads import (
    CSV_MEDIA_TYPE,
    JSON_MEDIA_TYPE,
    NPY_MEDIA_TYPE,
    media_type,
    read_body,
    rows_from_csv,
    rows_from_json,
    rows_from_npy,
)
from service.public import dataset_public, dataset_verified
from service.schemas.common import NAME_MAX_LENGTH, NAME_PATTERN
from service.schemas.datasets import ChunkRows, DatasetCreate, DatasetPublic, DatasetsPublic, DatasetVerified
from service.schemas.errors import ErrorBody
from service.schemas.openapi import Responses
from service.security import READ, WRITE, access
from service.sources import allowed_source
from service.threads import wait_for_cluster
from workers.operations import PatchDataset

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])

DatasetName = Annotated[str, Path(pattern=NAME_PATTERN, max_length=NAME_MAX_LENGTH, description="data set name")]
ChunkIndex = Annotated[int, Path(ge=0, le=1_000_000, description="position of the chunk, from 0")]

_ERRORS: Responses = {
    404: {"model": ErrorBody, "description": "unknown data set"},
    409: {"model": ErrorBody, "description": "conflicts with the stored state"},
    422: {"model": ErrorBody, "description": "invalid request"},
}


@router.post(
    "",
    openapi_extra=access(WRITE, JSON_MEDIA_TYPE),
    status_code=status.HTTP_201_CREATED,
    responses={**_ERRORS, 403: {"model": ErrorBody, "description": "source outside register_prefixes"}},
)
def create_dataset(
    body: DatasetCreate, datasets: DatasetsDep, settings: SettingsDep, response: Response, usage: DataUsageDep
) -> DatasetPublic:
    """Create an empty data set, or register an existing zarr array as a ready one.

    * ``{"name", "n_features", "dtype"}``: an open set that receives chunks.
    * ``{"name", "source": {"zarr": "/abs/path.zarr" or URL}, "dtype"?}``:
      the array is read once (checksum and finiteness; the request lasts as
      long as that read) and never copied or written. The location must lie
      below one of the ``register_prefixes`` setting's prefixes (403
      otherwise); a relative path or an array zarr cannot open is a 422 on
      ``source``.
    """
    usage.check(4096, "name")  # room for its metadata at least (max_data_bytes)
    if body.source is not None:
        if body.n_features is not None:
            raise ApiError(
                422,
                "invalid",
                "give either n_features (a new, empty data set) or source (register an existing zarr "
                "array, whose shape gives n_features), not both",
                "n_features",
            )
        prefixes = cast(list[str], settings.register_prefixes)  # a list: `Settings`' validator made it one
        location = allowed_source(body.source.zarr, prefixes)
        record = datasets.register(body.name, location, body.dtype)
    else:
        if body.n_features is None:
            raise ApiError(
                422, "invalid", "n_features: field required (or give source to register a zarr array)",
                "n_features",
            )
        record = datasets.create(body.name, body.n_features, body.dtype or "float32")
    response.headers["Location"] = f"{router.prefix}/{body.name}"
    return dataset_public(record)


@router.get("", openapi_extra=access(READ), responses=LIST_RESPONSES)
def list_datasets(datasets: DatasetsDep, cursor: PageCursor = None, limit: PageLimit = DEFAULT_LIMIT) -> DatasetsPublic:
    """A page of data sets' metadata, sorted by name (`service.pagination`)."""
    records, next_cursor = page(datasets.list, cursor, limit)
    return DatasetsPublic(datasets=[dataset_public(r) for r in records], next_cursor=next_cursor)


@router.get("/{name}", openapi_extra=access(READ), responses=_ERRORS)
def get_dataset(name: DatasetName, datasets: DatasetsDep) -> DatasetPublic:
    return dataset_public(datasets.get(name))


@router.get("/{name}/verify", openapi_extra=access(READ), responses=_ERRORS)
def verify_dataset(
    name: DatasetName,
    datasets: DatasetsDep,
    version: Annotated[int | None, Query(ge=1, description="committed version; default the latest")] = None,
) -> DatasetVerified:
    """Re-hash every chunk of a committed version against the sha256 recorded at commit.

    Damaged chunks are listed in ``corrupt_chunks`` and mark the data set
    ``corrupt``; chunks that pass are unmarked. Cost: one read and one sha256
    of the version's rows, O(bytes), run in a worker thread.
    """
    return dataset_verified(datasets.verify(name, version))


@router.delete("/{name}", openapi_extra=access(WRITE), status_code=status.HTTP_204_NO_CONTENT, responses=_ERRORS)
def delete_dataset(
    name: DatasetName, datasets: DatasetsDep, models: ModelsDep, clusterings: ClusteringsDep,
    cascade: Annotated[bool, Query(description="also delete the models and clusterings that use it")] = False,
) -> Response:
    """Delete a data set; a 409 naming the models and clusterings that use it, unless ``cascade=true``,
    which deletes them first (their running fits are asked to stop)."""
    return jobs.delete_dataset(datasets, name, (models, clusterings), cascade)


@router.put(
    "/{name}/chunks/{index}",
    responses={
        **_ERRORS,
        400: {"model": ErrorBody, "description": "unparseable body"},
        413: {"model": ErrorBody, "description": "body over the size limit"},
        415: {"model": ErrorBody, "description": "neither .npy bytes, JSON nor CSV"},
    },
    openapi_extra={
        **access(WRITE, NPY_MEDIA_TYPE, JSON_MEDIA_TYPE, CSV_MEDIA_TYPE),
        "requestBody": {
            "required": True,
            "content": {
                NPY_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}},
                JSON_MEDIA_TYPE: {"schema": ChunkRows.model_json_schema()},
                CSV_MEDIA_TYPE: {"schema": {"type": "string", "example": "x1,x2\n0.5,1.25\n"}},
            },
        }
    },
)
async def put_chunk(name: DatasetName, index: ChunkIndex, request: Request, datasets: DatasetsDep,
                    content_digest: Annotated[str | None, Header(description=DIGEST_DESCRIPTION)] = None,
                    ) -> DatasetPublic:
    """Store chunk ``index``: ``.npy`` bytes, ``{"rows": [[...]]}`` or CSV text (``text/csv``).

    Versions: on a set whose latest version holds chunks 0..k-1, an index
    below k is committed: the same rows again are a no-op (200), other rows a
    409 on ``index``. Indices k and above are staged for the next version,
    which ``POST .../commit`` creates. Staged chunks are write-once too, so
    an interrupted upload resumes by re-sending the missing indices.

    Cast rule: rows of any bool, integer or float dtype (.npy), or JSON/CSV
    numbers (float64), are converted with numpy ``astype`` to the set's
    dtype: round to nearest for float64 -> float32; integers are exact up to
    2**24 in float32 and 2**53 in float64 and round beyond (uint64/int64 of
    any size are accepted); values that overflow the target dtype (|x| above
    float32's maximum 3.4028235e38), NaN and inf are a 422 on ``rows``
    naming the first such row.

    CSV: comma-separated numbers, one row per line; blank lines ignored; the
    first line is a header if none of its fields is a number. A field that is
    not a number is a 400 on ``body`` naming its line; lines of different
    lengths a 422 on ``rows`` naming the line.

    ``Content-Digest`` (optional, RFC 9530 ``sha-256`` or ``sha-512``): the body is checked against it before
    it is parsed; a mismatch is a 400 on ``content-digest`` and nothing is stored.
    """
    n_features = await run_in_threadpool(datasets.n_features, name)  # 404 before reading the body
    kind = media_type(request)  # one of the declared three: SecurityMiddleware refused any other
    usage = data_usage(request)
    body = await read_body(request, usage)  # 413 storage_full as soon as it is past the room left
    max_rows = request.app.state.settings.max_rows_per_request  # 413 while parsing, before the rows are built
    # one hand-over to the pool for the digest, the parsing and the store (docs/development.md)
    record = await run_in_threadpool(_parse_and_store, datasets, name, index, kind, body, n_features,
                                     max_rows, usage, content_digest)
    return dataset_public(record)


def _parse_and_store(datasets, name: str, index: int, kind: str, body: bytes | bytearray, n_features: int,
                     max_rows: int, usage, digest: str | None = None):
    """A chunk's body checked against its ``Content-Digest`` (``digest``, if sent), parsed as its media type says,
    its rows' bytes taken from the data folder's room (``usage``, `service.limits.DataUsage.take`) and stored
    (`DatasetStore.put_chunk`): the data set's record. Blocking: call it from the thread pool."""
    check_content_digest(digest, body)
    if kind == NPY_MEDIA_TYPE:
        rows = rows_from_npy(body, max_rows)
    elif kind == CSV_MEDIA_TYPE:
        rows = rows_from_csv(body, n_features, max_rows)
    else:
        rows = rows_from_json(body, n_features, max_rows)
    check_rows(rows.shape[0], max_rows)
    usage.take(rows.nbytes)
    return datasets.put_chunk(name, index, rows)


@router.post("/{name}/commit", openapi_extra=access(WRITE, JSON_MEDIA_TYPE), responses=_ERRORS)
def commit_dataset(name: DatasetName, datasets: DatasetsDep) -> DatasetPublic:
    """Commit the staged chunks as the next version (``status: ready``, ``version`` + 1).

    Staged indices must continue the latest version without gaps (0.. for the
    first commit, k.. after a version of k chunks); missing ones are a 422 on
    ``chunks`` that lists them. The new rows are written as a new segment;
    earlier versions stay readable and unchanged. With nothing staged on a
    ready set this is a no-op that returns the metadata.
    """
    return dataset_public(datasets.commit(name))


@router.post(
    "/{name}/from-image",
    status_code=status.HTTP_201_CREATED,
    responses={**_ERRORS, 415: {"model": ErrorBody}},
    openapi_extra=png_body(WRITE),
)
async def dataset_from_image(
    name: DatasetName,
    request: Request,
    datasets: DatasetsDep,
    backend: BackendDep,
    response: Response,
    settings: SettingsDep,
    patch: Annotated[int, Query(ge=2, le=64, description="patch side in pixels")] = 11,
    stride: Annotated[int, Query(ge=1, le=64, description="grid step between patches")] = 2,
) -> DatasetPublic:
    """Create a ready data set of the ``patch`` x ``patch`` patches of a PNG image (pixels scaled to
    [0, 1], channels last), taken on a grid of step ``stride`` (11 x 11 patches on a 2-pixel grid work well for
    denoising).
    Then ``POST /v1/models`` on it and ``POST /v1/models/{model}/denoise-image`` denoise an image with
    a model of its own patches.

    Bounded before any work: the PNG's pixels (from its header) at most ``max_image_pixels`` (413 on
    ``body``), its patches (the rows) at most ``max_image_dataset_rows`` (422 on ``stride``), rows x features at most
    ``max_image_dataset_values`` (422 on ``patch``), their bytes within ``max_data_bytes`` (413
    ``storage_full``); the PNG is decoded only then."""
    body = await read_body(request)
    height, width, channels = png_plan(body, settings.max_image_pixels)  # from the header: nothing decoded yet
    if patch > min(height, width):
        raise ApiError(422, "invalid", f"patch {patch} is larger than the {height}x{width} image", "patch")
    rows = check_patches(height, width, patch, stride, settings.max_image_dataset_rows,
                         "KPCA_MAX_IMAGE_DATASET_ROWS")
    check_image_dataset(rows, patch * patch * channels, patch, stride, settings.max_image_dataset_values)
    n_bytes = rows * patch * patch * channels * 4  # float32 rows
    data_usage(request).check(n_bytes)
    image = await run_in_threadpool(decode_png, body, settings.max_image_pixels)
    meta = await wait_for_cluster(backend.serve, PatchDataset(name, image, patch, stride))
    data_usage(request).add(n_bytes)
    response.headers["Location"] = f"{router.prefix}/{name}"
    return dataset_public(meta)
