"""``POST /v1/denoise-image``: a noisy PNG in, the denoised PNG out, in one request, for a user who has
only the noisy image; ``/v1/image-jobs/{job}``: the progress of a named image request, and its cancel.

The route validates and delegates: the worker estimates the noise, fits kernel PCA models to the
image's own tiles, tunes the kernel width, rank and pre-image on the image alone, and denoises it
(`workers.operations.DenoiseImageFit`). With ``keep`` a model of all the image's patches with the tuned
width and rank is also kept under that name (a data set of the patches and a fit, as ``POST
/v1/datasets/{name}/from-image`` and ``POST /v1/models`` would make them), for images like it.
"""

from __future__ import annotations

import contextlib
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from service import jobs, plots
from service.deps import BackendDep, DatasetsDep, ImageJobsDep, ModelsDep, SettingsDep
from service.errors import ApiError
from service.images import chosen_headers, decode_png, encode_png, png_answer, png_body
from service.limits import FitOwner, check_patches, data_usage
from service.payloads import JSON_MEDIA_TYPE, read_body
from service.public import image_job_public
from service.routes.models import ERRORS
from service.routes.served import (
    BACKGROUND_HELP,
    PNG_RESPONSES,
    JobQuery,
    background_fields,
    invalid_preimage,
    start_background,
    until_ended,
)
from service.schemas.common import NAME_MAX_LENGTH, NAME_PATTERN
from service.schemas.image_jobs import ImageJobPublic
from service.schemas.serving import SECOND_STAGE_HELP, PatchMethod, SecondStage, Tune
from service.security import READ, WRITE, access
from service.threads import wait_for_cluster
from store.errors import Damaged, NotFound
from workers.operations import DenoiseImageFit

router = APIRouter(tags=["denoising"])

DEFAULT_TILE = 32


@router.post("/v1/denoise-image", openapi_extra=png_body(WRITE),
             responses=PNG_RESPONSES, response_class=Response)
async def denoise_image_fit(
    request: Request, datasets: DatasetsDep, models: ModelsDep, backend: BackendDep, settings: SettingsDep,
    owner: FitOwner, image_jobs: ImageJobsDep,
    patch: Annotated[int, Query(ge=3, le=16, description="patch side in pixels")] = 7,
    stride: Annotated[int, Query(ge=1, le=16, description="grid step between patches, at most the patch")] = 1,
    tile: Annotated[int, Query(ge=0, le=4096, description=(
        "side in pixels of the tiles that get a model each; 0: one model for the whole image"))] = DEFAULT_TILE,
    tune: Annotated[Tune, Query(description=(
        "auto: estimate the noise and choose the kernel width, rank and pre-image by an unbiased estimate of "
        "the denoising error computed from the image alone; off: the values given (or their defaults)"))] = "auto",
    sigma: Annotated[float | None, Query(gt=0, le=1e6, description="Gaussian kernel width (default: tuned)")] = None,
    n_components: Annotated[int | None, Query(ge=1, le=64, description="components per tile (default: tuned)")] = None,
    method: Annotated[PatchMethod | None, Query(description="pre-image method (default: tuned)")] = None,
    noise: Annotated[float | None, Query(gt=0, le=1, description=(
        "noise standard deviation, pixels in [0, 1] (default: estimated from the image)"))] = None,
    keep: Annotated[str | None, Query(pattern=NAME_PATTERN, max_length=NAME_MAX_LENGTH, description=(
        "also keep a model (and its data set of patches) of this name, fitted to all the image's patches with "
        "the tuned width and rank"))] = None,
    job: JobQuery = None,
    compare: Annotated[bool, Query(description="answer a picture of the input and the result side by side")] = False,
    second_stage: Annotated[SecondStage, Query(description=SECOND_STAGE_HELP)] = "auto",
    background: Annotated[bool, Query(description=BACKGROUND_HELP)] = False,
) -> Response:
    """Denoise a PNG with nothing but the PNG: kernel PCA models of its own patches, one per tile of
    ``tile`` pixels, and every parameter left out chosen from the image (docs/denoising.md). The
    answer's ``X-KPCA-Chosen`` header (JSON) says what was chosen (noise level, kernel width ``sigma``,
    rank, method, ``second_stage``: the Wiener stage, by default kept where its estimated error is
    lower), ``Server-Timing`` how long each step took; with ``keep``, ``X-KPCA-Model`` names the
    kept model, whose fit runs after the answer (poll ``GET /v1/models/{keep}``).

    Bounded before any work: the PNG's pixels at most ``max_image_pixels`` (413 on ``body``); with
    ``tile=0`` (one model of every patch) or ``keep`` (a data set of every patch) its patches at most
    ``max_patches`` (422 on ``stride``; the tiles are otherwise read a band at a time, memory following
    the pixels); a stride over the patch is a 422 on ``stride``. The tuning reads the kernel candidates' risk on at
    most 16384 pixels of the image. While it runs it counts as a fit of its API key
    (``max_fits_per_key``: a 429 beyond); past ``serving_deadline_s`` it is a 503 with ``Retry-After``,
    and when its client leaves it stops, at its next tuning candidate or tile either way.

    With ``background=true`` (and ``job``) it answers 202 at once with the job's progress (``Location``:
    ``/v1/image-jobs/{job}``) and runs without the serving deadline, counted as a fit of its key until it
    ends; its PNG is at ``GET /v1/image-jobs/{job}/result`` (``keep`` and ``compare`` are not available)."""
    background_fields(background, job, compare, keep)
    if sigma is not None and method == "linear":
        raise ApiError(422, "invalid", "sigma: method 'linear' has no kernel width; leave sigma out", "sigma")
    image = decode_png(await read_body(request), settings.max_image_pixels)
    height, width = image.shape[:2]
    if patch > min(height, width):
        raise ApiError(422, "invalid", f"patch {patch} is larger than the {height}x{width} image", "patch")
    if stride > patch:
        raise ApiError(422, "invalid", f"stride {stride} is larger than the patch size {patch}: pixels between "
                       "patches would not be covered", "stride")
    if not tile or keep is not None:  # all the image's patches at once: one model, or the kept data set
        count = check_patches(height, width, patch, stride, settings.max_patches, "KPCA_MAX_PATCHES")
    if keep is not None:
        if await run_in_threadpool(datasets.exists, keep):
            raise ApiError(409, "conflict", f"data set {keep!r} already exists; choose another name for keep",
                           "keep")
        if await run_in_threadpool(models.exists, keep):
            raise ApiError(409, "conflict", f"model {keep!r} already exists; choose another name for keep", "keep")
        data_usage(request).check(count * patch * patch * (1 if image.ndim == 2 else image.shape[2]) * 4, "keep")
    fixed = {"sigma": sigma, "n_components": n_components, "method": method}
    if background:
        assert job is not None
        return await start_background(image_jobs, backend, job, "denoise-image-fit", owner, DenoiseImageFit(
            image, patch, stride, tile or None, tune, fixed, noise, job, second_stage, background=True),
            settings.image_job_keep_s)
    try:
        with request.app.state.running.hold(owner):  # counted as a fit of its key while it runs
            operation = DenoiseImageFit(image, patch, stride, tile or None, tune, fixed, noise, job, second_stage)
            cleaned, info = await until_ended(request, settings,
                                              lambda watch: wait_for_cluster(backend.serve, operation, watch),
                                              "body", "with a smaller image, a larger stride or tune=off, or as "
                                              "an image job without the deadline (background=true&job=NAME)")
    except ValueError as exc:
        raise invalid_preimage(exc) from None
    headers = chosen_headers(info)
    if keep is not None:
        headers["X-KPCA-Model"] = await wait_for_cluster(
            jobs.start_patch_model, keep, image, patch, stride, info["chosen"], datasets, models, backend, settings,
            owner)
    if compare:
        title = f"denoise-image: {patch}x{patch} patches, stride {stride}, tuned {tune}"
        body, _ = await run_in_threadpool(plots.compare_png, image, cleaned, ("noisy input", "denoised"), title)
        return png_answer(request, body, headers)
    return png_answer(request, encode_png(cleaned), headers)


@router.get("/v1/image-jobs/{job}", openapi_extra=access(READ), responses=ERRORS)
def get_image_job(job: str, image_jobs: ImageJobsDep) -> ImageJobPublic:
    """The progress of the image request named ``job``: the step running now and its units done, the
    steps finished with their times, and at the end what was chosen."""
    return image_job_public(image_jobs.get(job))


@router.get("/v1/image-jobs/{job}/result", openapi_extra=access(READ), responses=PNG_RESPONSES,
            response_class=Response)
def get_image_job_result(job: str, request: Request, image_jobs: ImageJobsDep) -> Response:
    """The PNG a background image job (``background=true``) answered, with the headers its request would
    have had (``X-KPCA-Chosen``, ``Server-Timing``); 409 while it runs (``Retry-After``) or if it failed or
    was cancelled, 404 for a job that answered its own request."""
    record = image_jobs.get(job)
    if record.status == "running":
        error = ApiError(409, "conflict", f"image job {job!r} is still running ({record.phase}); fetch its result "
                         f"once GET /v1/image-jobs/{job} says completed", "job")
        error.headers = {"Retry-After": "2"}
        raise error
    if record.status != "completed":
        raise ApiError(409, "conflict", f"image job {job!r} ended {record.status}"
                       + (f" ({record.error})" if record.error else "") + "; send the request again", "job")
    if not record.background:
        raise ApiError(404, "not_found", f"image job {job!r} answered its own request; only a background job "
                       "(background=true) keeps its answer", "job")
    image, info = image_jobs.result(job)
    return png_answer(request, encode_png(image), chosen_headers(info))


@router.post("/v1/image-jobs/{job}/cancel", openapi_extra=access(WRITE, JSON_MEDIA_TYPE), status_code=202,
             responses=ERRORS)
def cancel_image_job(job: str, image_jobs: ImageJobsDep) -> ImageJobPublic:
    """Ask the running image request ``job`` to stop at its next tile (it then answers 409 on ``job``);
    409 if it has ended."""
    return image_job_public(image_jobs.request_cancel(job))


@router.delete("/v1/image-jobs/{job}", openapi_extra=access(WRITE), status_code=204, responses=ERRORS)
def delete_image_job(job: str, image_jobs: ImageJobsDep) -> Response:
    """Remove the record of the image request named ``job`` once it has ended (409 while it runs), or
    whose record is damaged; 404 if there is none."""
    with contextlib.suppress(NotFound, Damaged):
        if image_jobs.get(job).status == "running":
            raise ApiError(409, "conflict", f"image job {job!r} is running; cancel it first (POST "
                           f"/v1/image-jobs/{job}/cancel)", "job")
    image_jobs.delete(job)
    return Response(status_code=204)
