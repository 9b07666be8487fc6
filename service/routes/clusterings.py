"""``/v1/clusterings``: spectral clustering of a data set (seed 000 §5.3) as a job like a model's fit.

Create (start), list, read (status, progress, history and, once completed, a
page of labels), delete, cancel, resume, and predict the clusters of new
rows. The record (`store.jobs.clusterings.ClusteringRecord`) is the only source
of a clustering's state: the service writes it once (``queued``), the worker
(`workers.cluster`) writes the rest; routes share the models' job helpers
(`service.jobs`) and serving checks (`service.routes.served`).

Labels come with the record, a page at a time: ``GET
/v1/clusterings/{name}?labels_offset=0&labels_limit=10000`` gives ``labels``
(rows ``labels_offset`` onwards), ``labels_total`` and ``next``, the URL of
the next page (None on the last). One resource rather than a ``/labels``
sub-resource: the poll that sees ``completed`` has the labels of a small
data set already, and a large one is read by following ``next``;
``labels_limit=0`` polls without them.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from fastapi import APIRouter, Body, Path, Query, Request, Response, status
from starlette.concurrency import run_in_threadpool

from service import jobs, plots
from service.deps import BackendDep, ClusteringsDep, DatasetsDep, SettingsDep
from service.errors import ApiError
from service.images import PNG_RESPONSE_CONTENT, png_answer
from service.job_checks import checked_clustering_params
from service.limits import FitOwner, check_rows
from service.pagination import DEFAULT_LIMIT, LIST_RESPONSES, PageCursor, PageLimit, page
from service.payloads import JSON_MEDIA_TYPE, ThreadParsedRoute
from service.public import clustering_labelled, clustering_public, listed
from service.responses import NPY_CONTENT, Format, npy_answer, wants_npy
from service.routes.models import ERRORS
from service.routes.served import checked_rows, rows_body, serve, served_job
from service.schemas.clusterings import (
    LABELS_PAGE,
    MAX_LABELS_PAGE,
    ClusteringCreate,
    ClusteringLabelled,
    ClusteringPublic,
    ClusteringResume,
    ClusteringsPublic,
    PredictResponse,
)
from service.schemas.common import NAME_MAX_LENGTH, NAME_PATTERN
from service.schemas.errors import ErrorBody
from service.schemas.serving import ProjectRequest
from service.security import READ, WRITE, access
from store.jobs.clusterings import ClusteringRecord
from store.jobs.records import Placement
from workers.operations import PredictClusters

router = APIRouter(prefix="/v1/clusterings", tags=["clusterings"], route_class=ThreadParsedRoute)  # predict's rows

ClusteringName = Annotated[str, Path(pattern=NAME_PATTERN, max_length=NAME_MAX_LENGTH, description="clustering name")]


@router.post("", openapi_extra=access(WRITE, JSON_MEDIA_TYPE), status_code=status.HTTP_202_ACCEPTED,
             responses={**ERRORS, 503: {"model": ErrorBody}})
def create_clustering(body: ClusteringCreate, datasets: DatasetsDep, clusterings: ClusteringsDep,
                      backend: BackendDep, settings: SettingsDep, response: Response,
                      owner: FitOwner) -> ClusteringPublic:
    """Register a clustering and start it; poll ``Location`` for progress, then labels.

    Checked here against the data set (``n_clusters`` in 2 .. n_rows - 1, an affinity kernel, the
    solver's parameters) and the reference labels (``labels_dataset``: committed, one column, a row per
    row), each refusal a 4xx naming its field.
    """
    dataset = datasets.ready(body.dataset, field="dataset")
    params = checked_clustering_params(datasets, dataset, body.kernel, body.solver, body.n_clusters, body.params,
                                       settings.exact_limit)
    labels = datasets.ready(body.labels_dataset, field="labels_dataset") if body.labels_dataset else None
    record = ClusteringRecord.new(body.name, dataset, labels, kernel=body.kernel, n_clusters=body.n_clusters,
                                  solver=body.solver, params=params, checkpoint_keep=settings.checkpoint_keep,
                                  placement=Placement(exact_limit=settings.exact_limit))
    return clustering_public(jobs.start(backend, clusterings, record, response, owner))


@router.get("", openapi_extra=access(READ), responses=LIST_RESPONSES)
def list_clusterings(
    clusterings: ClusteringsDep, cursor: PageCursor = None, limit: PageLimit = DEFAULT_LIMIT,
) -> ClusteringsPublic:
    """A page of clusterings' records (without labels), sorted by name (`service.pagination`)."""
    records, next_cursor = page(clusterings.entries, cursor, limit)
    return ClusteringsPublic(clusterings=[listed(r, clustering_public) for r in records], next_cursor=next_cursor)


@router.get("/{name}", openapi_extra=access(READ), responses=ERRORS)
def get_clustering(
    name: ClusteringName,
    clusterings: ClusteringsDep,
    labels_offset: Annotated[int, Query(ge=0, description="row of the first label returned")] = 0,
    labels_limit: Annotated[int, Query(ge=0, le=MAX_LABELS_PAGE, description="labels returned at most; "
                                       "0: none")] = LABELS_PAGE,
) -> ClusteringLabelled:
    """Status, progress, history (with the variation of information per pass) and, once completed, a
    page of labels with ``labels_total`` and the ``next`` page's URL (module docstring)."""
    record = clusterings.get(name)
    if record.status != "completed" or labels_limit == 0:
        return clustering_labelled(record)
    labels, total = clusterings.labels(name, labels_offset, labels_limit, record.labels_sha256)
    after = labels_offset + len(labels)
    following = f"{router.prefix}/{name}?labels_offset={after}&labels_limit={labels_limit}" if after < total else None
    return clustering_labelled(record, labels=labels, labels_offset=labels_offset, labels_total=total,
                               next=following)


@router.get("/{name}/clusters.png", openapi_extra=access(READ), response_class=Response,
            responses={**ERRORS, 200: {"content": PNG_RESPONSE_CONTENT, "description": "the clusters drawn, a PNG"}})
async def clusters_png(name: ClusteringName, request: Request, clusterings: ClusteringsDep,
                       datasets: DatasetsDep) -> Response:
    """The clustering drawn (`service.plots.clusters_png`): each row at its two leading spectral coordinates
    (after the top eigenvector), coloured by its cluster, and beside it, where the clustering has reference
    labels, coloured by those. A 409 on ``name`` until it has completed, and for one that completed before
    the coordinates were kept (it says to fit it again); a damaged coordinates file is a 409 ``corrupt``."""
    record = await run_in_threadpool(clusterings.get, name)
    if record.status != "completed" or record.coordinates_sha256 is None:
        why = (f"clustering {name!r} is {record.status!r}: its picture is drawn once it has completed"
               if record.status != "completed" else
               f"clustering {name!r} completed before its rows' coordinates were kept; create it again (or resume "
               "it with more passes) to draw it")
        raise ApiError(409, "conflict", why, "name")
    drawn = record.coordinates_sha256

    def draw() -> bytes:
        coordinates = clusterings.coordinates(name, drawn)
        labels = clusterings.labels_array(name, record.labels_sha256)
        reference = None
        if record.labels_dataset is not None:
            rows = datasets.open_array(record.labels_dataset, record.labels_dataset_version)
            reference = np.asarray(rows[:, 0]).ravel()
        title = (f"clustering {name!r}: {record.n_clusters} clusters of {record.dataset}"
                 + (f", VI {record.variation_of_information:.3g} against {record.labels_dataset}"
                    if record.variation_of_information is not None else ""))
        return plots.clusters_png(coordinates, labels, reference, title)

    body = await run_in_threadpool(draw)
    return png_answer(request, body, {"Cache-Control": "no-cache"})


@router.delete("/{name}", openapi_extra=access(WRITE), status_code=status.HTTP_204_NO_CONTENT, responses=ERRORS)
def delete_clustering(name: ClusteringName, clusterings: ClusteringsDep) -> Response:
    """Ask a running clustering to stop, then delete it, its checkpoints and labels."""
    return jobs.delete(clusterings, name)


@router.post("/{name}/cancel", openapi_extra=access(WRITE, JSON_MEDIA_TYPE), status_code=status.HTTP_202_ACCEPTED,
             responses=ERRORS)
def cancel_clustering(name: ClusteringName, clusterings: ClusteringsDep) -> ClusteringPublic:
    """Ask a queued or running clustering to stop after its current block; the last checkpoint is kept."""
    return clustering_public(jobs.cancel(clusterings, name))


@router.post("/{name}/resume", openapi_extra=access(WRITE, JSON_MEDIA_TYPE), status_code=status.HTTP_202_ACCEPTED,
             responses={**ERRORS, 503: {"model": ErrorBody}})
def resume_clustering(name: ClusteringName, clusterings: ClusteringsDep, backend: BackendDep, response: Response,
                      body: Annotated[ClusteringResume | None, Body()] = None) -> ClusteringPublic:
    """Continue a cancelled, failed or completed clustering from its last checkpoint; ``passes`` is the
    new TOTAL number of passes. With the same seed it ends where an uninterrupted run ends."""
    body = body or ClusteringResume()
    return clustering_public(jobs.resume(backend, clusterings, name, response, body.passes))


@router.post("/{name}/predict", openapi_extra=rows_body(), responses={**ERRORS, 200: NPY_CONTENT},
             response_model=PredictResponse)
async def predict(name: ClusteringName, body: ProjectRequest, request: Request, clusterings: ClusteringsDep,
                  datasets: DatasetsDep, backend: BackendDep, settings: SettingsDep,
                  format: Format = None) -> PredictResponse | Response:
    """The cluster of each of ``rows`` (the data set's columns): the Nystrom extension of the eigenvectors,
    normalised, then the nearest k-means centre. A 409 naming the clustering's state until it completes;
    at most ``max_rows_per_request`` rows (413 on ``rows``). A large body is decoded, validated and
    made an array off the event loop. ``Accept: application/octet-stream`` (or ``format=npy``): the labels
    as ``.npy`` bytes (int64), as the other serving routes answer."""
    check_rows(len(body.rows), settings.max_rows_per_request)
    record, n_features = await served_job(name, clusterings, datasets)
    rows = await run_in_threadpool(checked_rows, body.rows, n_features)
    labels = np.asarray(await serve(clusterings, name, record, backend, PredictClusters(name, rows)), dtype=np.int64)
    if wants_npy(request, format):
        return npy_answer(labels)
    return PredictResponse(labels=labels.tolist())
