"""Serving an image through a completed patch model: ``/v1/models/{name}/denoise-image`` (PNG in, PNG out).

The route checks the image against the model (its patch size, the limits on pixels, patches and work),
runs the tuned denoising on the workers (`workers.operations.DenoiseImageTuned`), watched for its
deadline and its client, and answers the PNG (or a comparison picture, `service.plots`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from service import plots
from service.deps import ServingDep
from service.errors import ApiError
from service.images import (
    check_pixels,
    chosen_headers,
    decode_png,
    encode_png,
    image_patch_plan,
    png_answer,
    png_body,
)
from service.job_checks import checked_preimage, fit_kernel, own_decoder
from service.limits import check_patches, fit_owner
from service.payloads import ThreadParsedRoute, read_body
from service.routes.models import ModelName
from service.routes.served import (
    BACKGROUND_HELP,
    PNG_RESPONSES,
    JobQuery,
    background_fields,
    invalid_preimage,
    served_job_now,
    start_background,
    watched,
)
from service.schemas.serving import SECOND_STAGE_HELP, PreimageMethod, SecondStage, Tune
from service.security import READ
from service.serving_work import check_serving_work, check_tuned_work, image_tuning_rows
from workers.operations import DenoiseImageTuned

router = APIRouter(prefix="/v1/models", tags=["serving"], route_class=ThreadParsedRoute)


@router.post("/{name}/denoise-image", openapi_extra=png_body(READ),
             responses=PNG_RESPONSES, response_class=Response)
async def denoise_image(
    name: ModelName,
    request: Request,
    serving: ServingDep,
    stride: Annotated[int, Query(ge=1, le=64, description="grid step between patches")] = 2,
    method: Annotated[PreimageMethod, Query()] = "auto",
    upscale: Annotated[int, Query(ge=1, le=8, description="pixel-replication factor (hyperresolution)")] = 1,
    compare: Annotated[bool, Query(description=(
        "true: answer one 8-bit PNG picture with the input and the denoised image side by side, labelled, "
        "for a person to look at; false: the denoised image itself"))] = False,
    tune: Annotated[Tune, Query(description=(
        "auto: estimate the noise from the image and choose the rank and pre-image method by an unbiased "
        "estimate of the denoising error (explicit method and n_components kept); off: as given"))] = "auto",
    n_components: Annotated[int | None, Query(ge=1, le=10_000, description=(
        "use the model's leading components only (at most its n_components); default: tuned, or all"))] = None,
    constrained: Annotated[bool, Query(description=(
        "hyperresolution: make the answer reproduce the input when downsampled by block means (upscale x "
        "upscale blocks), by back-projection; false: seed 002's unconstrained reconstruction"))] = True,
    job: JobQuery = None,
    second_stage: Annotated[SecondStage, Query(description=SECOND_STAGE_HELP + "; upscale > 1: auto or off")] = "auto",
    background: Annotated[bool, Query(description=BACKGROUND_HELP)] = False,
) -> Response:
    """PNG in, PNG out: overlapping patches (the model's patch size) denoised through the model and
    averaged where they overlap; with ``upscale`` > 1 the image is first enlarged by pixel replication
    and the model fills in the detail (hyperresolution), by default constrained so that the answer's
    ``upscale x upscale`` block means are the input. Grey and colour PNGs keep their mode and bit depth.

    ``tune=auto`` (the default; denoising only): the noise level is estimated from the image and the
    rank (at most the model's) and pre-image method chosen by an unbiased estimate of the denoising
    error computed from the image alone (docs/denoising.md); an explicit ``method`` or ``n_components``
    is kept; then the empirical Wiener second stage where the same estimate says it helps
    (``second_stage``: ``auto``, ``wiener`` always, ``off`` never). The answer's ``X-KPCA-Chosen``
    header (JSON) says what was chosen, ``Server-Timing`` how long each step took. With ``job`` the
    request can be followed and cancelled at ``/v1/image-jobs/{job}``.

    Bounded before any work: the PNG's pixels (read from its header) and the upscaled image's are at most
    ``max_image_pixels`` (413 on ``body`` / ``upscale``); its patches at most ``max_patches`` (422 on
    ``stride``) where they are all held at once (``tune=off``, hyperresolution: tuned denoising reads them a
    band at a time); its work at most ``max_serving_work`` (413) unless it runs in the background.

    With ``compare=true`` the answer is a picture of the input (pixel-replicated ``upscale`` times) and
    the denoised image side by side, each labelled and both enlarged by the same integer factor when
    small, placed pixel for pixel (`service.plots.compare_png`); the same request and limits, so the
    option lives on this route rather than on another.

    With ``background=true`` (and ``job``) it answers 202 at once with the job's progress (``Location``:
    ``/v1/image-jobs/{job}``), runs without the serving deadline and counts as a fit of its API key until it
    ends (``max_fits_per_key``: a 429 beyond); its PNG is at ``GET /v1/image-jobs/{job}/result``."""
    background_fields(background, job, compare)
    models, datasets, backend, settings = serving
    if upscale > 1 and second_stage == "wiener":
        raise ApiError(422, "invalid", "second_stage: hyperresolution (upscale > 1) has no second stage; use "
                       "auto or off", "second_stage")
    image = decode_png(await read_body(request), settings.max_image_pixels)
    model, n_features, points = await run_in_threadpool(served_job_now, name, models, datasets)
    patch, height, width = image_patch_plan(image, n_features, upscale, name)  # 422 on image
    check_pixels(height, width, settings.max_image_pixels, "upscale", f"the image upscaled {upscale} times")
    if patch > min(height, width):
        raise ApiError(422, "invalid", f"the model's {patch}x{patch} patches do not fit in a {height}x{width} "
                       "image", "image")
    if stride > patch:
        raise ApiError(422, "invalid", f"stride {stride} is larger than the patch size {patch}: pixels between "
                       "patches would not be covered", "stride")
    tuned = tune == "auto" and upscale == 1 and not own_decoder(model)  # its answer read a band of patches at a time
    count = check_patches(height, width, patch, stride, None if tuned else settings.max_patches, "KPCA_MAX_PATCHES")
    resolved = checked_preimage(model, method, None)
    # a background job has no serving deadline: the serving work limit is not its bound, its key's count is
    limit = None if background else settings.max_serving_work
    if tuned:  # counted as the tuning runs it
        try:
            check_tuned_work(image_tuning_rows(height, width, patch, stride), count, points, n_features,
                             limit, n_components or model.n_components, fit_kernel(model).type,
                             {"n_components": n_components, "method": None if method == "auto" else method},
                             rows_field="stride", offers_background=True)
        except ValueError as exc:  # a rank the model does not have, a method its kernel does not allow
            raise invalid_preimage(exc) from None
    else:
        check_serving_work(count, points, n_features, limit, resolved, None, rows_field="stride")
    if background:
        assert job is not None
        owner = await run_in_threadpool(fit_owner, request)  # counted as a fit of its key while it runs
        return await start_background(
            request.app.state.image_jobs, backend, job, "hyperresolution" if upscale > 1 else "denoise-image",
            owner, DenoiseImageTuned(name, image, patch, stride, method, None, upscale, tune, n_components,
                                     constrained, job, second_stage, background=True), settings.image_job_keep_s)
    try:
        cleaned, info = await watched(request, settings, models, name, model, backend, DenoiseImageTuned(
            name, image, patch, stride, method, None, upscale, tune, n_components, constrained, job, second_stage))
    except ValueError as exc:  # a rank the model does not have, a method its kernel does not allow
        raise invalid_preimage(exc) from None
    headers = chosen_headers(info)
    if compare:
        labels = ("input" + (f" (x{upscale} pixel replication)" if upscale > 1 else ""),
                  "denoised" if upscale == 1 else "hyper-resolved")
        title = f"model {name!r}: denoise-image, {patch}x{patch} patches, stride {stride}, method {method}"
        body, _ = await run_in_threadpool(plots.compare_png, image, cleaned, labels, title)
        return png_answer(request, body, headers)
    return png_answer(request, encode_png(cleaned), headers)
