"""Schemas of serving a model: projection, reconstruction and denoising, whole-data-set transforms."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from kpca.images.denoising import PATCH_METHODS
from kpca.images.second_stage import STAGE_CHOICES
from kpca.preimage import METHODS
from service.schemas.common import Name, Number
from service.schemas.declared import options_model

MAX_PROJECT_ROWS = 100_000

Tune = Literal["auto", "off"]
if TYPE_CHECKING:
    # Literals built at run time from the registries of methods, which a type checker cannot read: a str
    # to it; pydantic and FastAPI (which read the annotations at run time) see the Literal, its enum
    PreimageMethod = str
    SecondStage = str
    PatchMethod = str
else:
    PreimageMethod = Literal[("auto", *METHODS)]
    SecondStage = Literal[STAGE_CHOICES]  # auto: kept where its estimated risk is lower; wiener: always; off: never
    PatchMethod = Literal[PATCH_METHODS]
SECOND_STAGE_HELP = (
    "the empirical Wiener second stage after the patch denoiser: auto (with tune=auto) keeps it, or a variant of "
    "it (patch size, two passes, gain), only where an unbiased estimate of the denoising error, computed from the "
    "image alone, is lower with it than without "
    "(with tune=off, auto is off); wiener: always; off: never")


def _all_options():
    seen = {}
    for method in METHODS.values():
        for param in method.options:
            seen.setdefault(param.name, param)
    return tuple(seen.values())


if TYPE_CHECKING:
    PreimageOptions = BaseModel  # its fields are the methods' options, declared at run time (below)
else:
    PreimageOptions = options_model(
        "PreimageOptions", _all_options(),
        "Options of the pre-image methods; each method reads the ones it declares, "
        + "; ".join(f"{m.name}: {', '.join(p.name for p in m.options) or 'none'}" for m in METHODS.values()) + ".")


class ProjectRequest(BaseModel):
    """``POST /v1/models/{name}/project`` body."""

    model_config = ConfigDict(extra="forbid")

    rows: list[list[Number]] = Field(
        min_length=1, max_length=MAX_PROJECT_ROWS, description="rows with the data set's n_features columns"
    )


class ProjectResponse(BaseModel):
    components: list[list[float]] = Field(description="one row of n_components values per input row")


class ReconstructRequest(BaseModel):
    """``POST /v1/models/{name}/reconstruct`` and ``/denoise`` body."""

    model_config = ConfigDict(extra="forbid")

    rows: list[list[Number]] = Field(min_length=1, max_length=MAX_PROJECT_ROWS,
                                     description="rows to reconstruct, each with the model's n_features numbers")
    method: PreimageMethod = Field(
        default="auto", description="auto: fixed-point for Gaussian kernels, gradient descent otherwise; "
        + "; ".join(f"{m.name}: {m.summary}" for m in METHODS.values()))
    options: PreimageOptions = Field(default_factory=PreimageOptions, description="tuning of the pre-image search")


class ReconstructResponse(BaseModel):
    rows: list[list[float]] = Field(description="one pre-image per input row, in input space")


class TransformRequest(BaseModel):
    """``POST /v1/models/{name}/transform`` body: a whole data set through the model."""

    model_config = ConfigDict(extra="forbid")

    dataset: Name = Field(description="input data set (its latest version)")
    output: Name = Field(description="name of the new data set that receives the result")
    operation: Literal["project", "denoise"] = Field(
        default="project", description="project: the component scores of each row; denoise: its pre-image")
    method: PreimageMethod = Field(default="auto", description="pre-image method (denoise), as in /denoise")
    options: PreimageOptions = Field(default_factory=PreimageOptions, description="tuning of the pre-image "
                                     "search (denoise)")


class DenoiseRequest(ReconstructRequest):
    """``POST /v1/models/{name}/denoise`` body: a reconstruction, optionally tuned on the rows."""

    tune: Tune = Field(default="off", description=(
        "auto: estimate the noise from the rows (more rows than columns needed) and choose the rank and "
        "pre-image by an unbiased estimate of the denoising error (an explicit method is kept); off: as given"))
    n_components: int | None = Field(default=None, ge=1, le=10_000, description=(
        "tune=auto: use this many leading components (at most the model's) instead of tuning the rank"))


class DenoiseResponse(BaseModel):
    rows: list[list[float]] = Field(description="one denoised row per input row")
    chosen: dict | None = Field(default=None, description="tune=auto: the rank, method and options chosen")
    noise: float | None = Field(default=None, description="tune=auto: the noise level estimated from the rows")
    steps: list[dict] | None = Field(default=None, description="tune=auto: seconds per step (tuning, denoising)")
