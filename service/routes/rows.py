"""Serving rows through a completed model: ``/project``, ``/reconstruct``, ``/denoise``.

Each route checks the rows against the model's data set (`service.routes.served`), runs its operation
(`workers.operations`) on the workers, watched for its deadline and its client, and answers JSON or
``.npy`` rows (`service.responses`).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from service.deps import Serving, ServingDep
from service.errors import ApiError
from service.job_checks import checked_preimage, fit_kernel, own_decoder
from service.limits import check_rows
from service.payloads import ThreadParsedRoute
from service.responses import Format, rows_answer, wants_npy
from service.routes.models import ModelName
from service.routes.served import (
    ROWS_ANSWERS,
    changed_while_serving,
    checked_rows,
    invalid_preimage,
    rows_body,
    served_job_now,
    watched,
)
from service.schemas.serving import (
    DenoiseRequest,
    DenoiseResponse,
    ProjectRequest,
    ProjectResponse,
    ReconstructRequest,
    ReconstructResponse,
)
from service.serving_work import check_serving_work, check_tuned_work
from workers.operations import DenoiseRowsTuned, Project, Reconstruct

router = APIRouter(prefix="/v1/models", tags=["serving"], route_class=ThreadParsedRoute)


# response_model: what the route answers unless it streams (`rows_answer`), the OpenAPI's 200
@router.post("/{name}/project", openapi_extra=rows_body(), responses=ROWS_ANSWERS, response_model=ProjectResponse)
async def project(name: ModelName, body: ProjectRequest, request: Request, serving: ServingDep,
                  format: Format = None) -> ProjectResponse | Response:
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
        components = await watched(request, settings, models, name, model, backend, Project(name, rows, values))
    return rows_answer(ProjectResponse, "components", components, settings.stream_response_values,
                       wants_npy(request, format))


def project_now(name: str, body_rows: list, models, datasets, backend, settings) -> tuple:
    """``(model, rows, model_values, components)``: the request checked against the model (`served_job_now`,
    the work budget, `checked_rows`), and its components when the backend computes them in this process
    (`workers.serving.Serving.projects_here`), else None (the caller sends the rows to the workers). A model
    deleted or refitted meanwhile is a 404/409, not a 500. Blocking: call it from the thread pool."""
    model, n_features, points = served_job_now(name, models, datasets)
    check_serving_work(len(body_rows), points, n_features, settings.max_serving_work)
    rows = checked_rows(body_rows, n_features)
    values = points * n_features
    if not backend.serving.projects_here(values, len(rows)):
        return model, rows, values, None
    try:
        return model, rows, values, backend.serve(Project(name, rows, values))
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
        out = await watched(request, settings, models, name, model, backend,
                            Reconstruct(name, rows, body.method, options, block_rows))
    except ValueError as exc:  # a value the method refuses against the data (checked_preimage saw the names)
        raise invalid_preimage(exc) from None
    return rows_answer(answer, "rows", out, settings.stream_response_values, wants_npy(request, format))


@router.post("/{name}/reconstruct", openapi_extra=rows_body(), responses=ROWS_ANSWERS)
async def reconstruct(name: ModelName, body: ReconstructRequest, request: Request, serving: ServingDep,
                      format: Format = None) -> ReconstructResponse:
    """Rows -> their projection onto the components -> back to input space (a pre-image per row).
    Bounded as ``/denoise``; ``.npy`` bytes as ``/project``."""
    return await _reconstruct(name, body, request, serving, format=format)


@router.post("/{name}/denoise", openapi_extra=rows_body(), responses=ROWS_ANSWERS, response_model=DenoiseResponse)
async def denoise(name: ModelName, body: DenoiseRequest, request: Request, serving: ServingDep,
                  format: Format = None) -> DenoiseResponse | Response:
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
    fixed = {"n_components": body.n_components, "method": method, "options": options}
    if own_decoder(model):  # nothing to tune: its decoder
        check_serving_work(len(rows), points, n_features, settings.max_serving_work,
                           checked_preimage(model, "auto", {}))
    else:  # counted as the tuning runs it: its candidates on the rows, then the chosen one
        try:
            check_tuned_work(len(rows), len(rows), points, n_features, settings.max_serving_work,
                             body.n_components or model.n_components, fit_kernel(model).type, fixed)
        except ValueError as exc:
            raise invalid_preimage(exc) from None
    try:
        out, info = await watched(request, settings, models, name, model, backend, DenoiseRowsTuned(name, rows, fixed))
    except ValueError as exc:
        raise invalid_preimage(exc) from None
    return rows_answer(DenoiseResponse, "rows", out, settings.stream_response_values, wants_npy(request, format),
                       chosen=info["chosen"],
                       noise=info["noise"], steps=info["steps"])
