"""Pictures of a model: ``/convergence.png`` (its fit per pass) and ``/components.png`` (its leading
components as images).

Routes validate and delegate: the convergence picture is drawn from the
registry record alone (`service.plots.convergence_png`); the component images
are computed on a worker from the model and its rows
(`workers.operations.ComponentImages`) and only drawn here. Drawing runs in the
thread pool, never on the event loop.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from service import plots
from service.deps import BackendDep, DatasetsDep, ModelsDep
from service.errors import ApiError
from service.images import PNG_RESPONSE_CONTENT, png_answer
from service.routes.models import ERRORS, ModelName
from service.routes.served import serve, served_job
from service.security import READ, access
from workers.operations import ComponentImages

router = APIRouter(prefix="/v1/models", tags=["pictures"])

MAX_COMPONENT_IMAGES = 64
DEFAULT_COMPONENT_IMAGES = 8
SHAPE_PATTERN = r"^[0-9]{1,5}x[0-9]{1,5}$"


def _png_response(description: str) -> dict:
    return {**ERRORS, 200: {"content": PNG_RESPONSE_CONTENT, "description": description}}


def _no_pass_message(record, name: str) -> str:
    """Why model ``name`` has nothing to draw yet, and what to do: wait for its first pass (queued,
    running) or resume it (a fit that stopped before its first pass)."""
    url = f"/v1/models/{name}"
    if record.status in ("queued", "running"):
        return (f"model {name!r} is {record.status!r} and has not completed a pass yet: wait for its first pass "
                f"(poll GET {url} until progress.pass >= 1, or follow GET {url}/events), then ask again")
    return (f"model {name!r} is {record.status!r} and has no completed pass to draw; resume it "
            f"(POST {url}/resume) or delete it and create it again")


def _title(record) -> str:
    asked = record.params_used or record.params or {}
    passes = record.progress.passes if record.progress is not None else asked.get("passes")
    done = record.history[-1].pass_ if record.history else 0
    kernel = record.kernel.type
    of = f" of {passes}" if passes else ""
    return (f"model {record.name!r}: {record.solver}, {kernel} kernel, {record.n_components} components; "
            f"{record.status}, pass {done}{of}")


@router.get("/{name}/convergence.png", openapi_extra=access(READ), response_class=Response,
            responses=_png_response("convergence figures and eigenvalue estimates per pass, as a PNG"))
async def convergence_png(
    name: ModelName,
    request: Request,
    models: ModelsDep,
    width: Annotated[int, Query(ge=400, le=4000, description="width of the picture in pixels, 400 to 4000")] = 900,
    height: Annotated[int, Query(ge=300, le=3000, description="height of the picture in pixels, 300 to 3000")] = 700,
) -> Response:
    """A picture of the fit so far, from the model's history (one record per completed pass): top, the
    convergence figure of the served components and of the solver's raw iterate (log scale, the metric
    named on the axis); bottom, the eigenvalue estimates, one line per component. Works while the fit
    runs (the passes so far) and after it. A model with no completed pass yet is a 409 on ``name`` that
    says to wait (a JSON error rather than a placeholder picture, so that a client or a cache never
    mistakes "nothing yet" for a picture of the fit)."""
    record = await run_in_threadpool(models.get, name)
    if not record.history:
        raise ApiError(409, "conflict", _no_pass_message(record, name), "name")
    history = [h.model_dump(by_alias=True) for h in record.history]
    body = await run_in_threadpool(plots.convergence_png, history, _title(record), width, height)
    return png_answer(request, body, {"Cache-Control": "no-cache"})


@router.get("/{name}/components.png", openapi_extra=access(READ), response_class=Response,
            responses=_png_response("the leading components drawn in input space, one tile each, as a PNG"))
async def components_png(
    name: ModelName,
    request: Request,
    models: ModelsDep,
    datasets: DatasetsDep,
    backend: BackendDep,
    count: Annotated[int | None, Query(ge=1, le=MAX_COMPONENT_IMAGES, description=(
        "how many leading components to draw (at most the model's n_components; default "
        f"{DEFAULT_COMPONENT_IMAGES} or n_components if fewer)"))] = None,
    shape: Annotated[str | None, Query(pattern=SHAPE_PATTERN, description=(
        "image shape HxW of a row, e.g. 28x28; rows of H*W values are grey, of 3*H*W values colour "
        "(channels last). Default: square patches, n_features = p*p (grey) or p*p*3 (colour)"))] = None,
) -> Response:
    """The first ``count`` components of a completed model as images, like seed 002 Fig. 4 (Kim, Franz
    and Schölkopf, "the first 40 kernel principal components" of image patches).

    A kernel component ``W_k = sum_i A_ki Phi'(x_i)`` has no point of input space of its own; its tile
    shows ``v_k = sum_i A_ki (x_i - x_bar)``, the same expansion with the feature map replaced by the
    identity (`kpca.model.KernelModel.input_space_components`). For the linear kernel that is exactly
    the k-th principal direction; as a Gaussian kernel widens its components approach those of linear
    PCA, which is what Fig. 4 shows. Each tile is scaled on its own, with a colour bar under it
    (`service.plots.components_figure`). Rows that are not image-shaped are a 422 on ``shape``; a model
    with its own decoder (autoencoder KPCA) a 422 on ``name``. Cost: one pass over the model's rows on
    a worker, O(count l n)."""
    model, n_features = await served_job(name, models, datasets)
    size = None
    if shape is not None:
        height, width = (int(v) for v in shape.split("x"))
        if height < 1 or width < 1:
            raise ApiError(422, "invalid", f"shape {shape!r}: height and width must be at least 1", "shape")
        size = (height, width)
    image = plots.image_shape(n_features, size)
    if image is None:
        given = f"shape {shape!r} does not fit" if shape is not None else "they are not square images"
        raise ApiError(422, "invalid", f"model {name!r} has rows of {n_features} values and {given}: pass "
                       "shape=HxW with H*W = n_features (grey) or 3*H*W = n_features (colour), or use square "
                       "patches (n_features = p*p or p*p*3)", "shape")
    if model.has_own_decoder:
        raise ApiError(422, "invalid", f"model {name!r} ({model.solver}) has its own decoder, not a kernel "
                       "expansion over its rows: its components have no input-space image", "name")
    if count is None:
        count = min(DEFAULT_COMPONENT_IMAGES, model.n_components)
    elif count > model.n_components:
        raise ApiError(422, "invalid", f"count {count} is more than the model's {model.n_components} components",
                       "count")
    components, eigenvalues = await serve(models, name, model, backend, ComponentImages(name, count))
    kind = "grey" if image[2] == 1 else "colour"
    title = (f"model {name!r}: the first {count} components as {image[0]}x{image[1]} {kind} images, "
             "sum_i A_ki (x_i - mean); each on its own scale (the bar under it)")
    body = await run_in_threadpool(plots.components_png, components, eigenvalues, image, title)
    return png_answer(request, body)

