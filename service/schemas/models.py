"""Schemas of the ``/v1/models`` resource."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from service.schemas.common import Name, Number, PositiveFloat

# ---------------------------------------------------------------- kernels


class _Kernel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GaussianKernel(_Kernel):
    """k(x, y) = exp(-||x - y||^2 / (2 sigma^2))."""

    type: Literal["gaussian"]
    sigma: PositiveFloat


class LaplacianKernel(_Kernel):
    """k(x, y) = exp(-||x - y|| / sigma)."""

    type: Literal["laplacian"]
    sigma: PositiveFloat


class PolynomialKernel(_Kernel):
    """k(x, y) = (gamma <x, y> + offset)^degree."""

    type: Literal["polynomial"]
    degree: int = Field(default=2, ge=1, le=64)
    offset: float = Field(default=1.0, ge=0, allow_inf_nan=False)
    gamma: PositiveFloat = 1.0


class LinearKernel(_Kernel):
    """k(x, y) = <x, y>."""

    type: Literal["linear"]


class TanhKernel(_Kernel):
    """k(x, y) = tanh(gamma <x, y> + offset)."""

    type: Literal["tanh"]
    gamma: PositiveFloat = 1.0
    offset: float = Field(default=0.0, allow_inf_nan=False)


KernelSpec = Annotated[
    Union[GaussianKernel, LaplacianKernel, PolynomialKernel, LinearKernel, TanhKernel],
    Field(discriminator="type"),
]

Solver = Literal["kha", "kha-t", "kha-et", "kha-smd", "exact"]

# ---------------------------------------------------------------- models


class FitParams(BaseModel):
    """Solver parameters; ``None`` means "let the fit choose" (reported in ``params_used``)."""

    model_config = ConfigDict(extra="forbid")

    passes: int = Field(default=20, ge=1, le=10_000)
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    eta0: PositiveFloat | None = Field(default=None, description="initial gain")
    mu: float | None = Field(default=None, ge=0, allow_inf_nan=False, description="SMD meta-gain")
    xi: float = Field(default=0.99, ge=0, le=1, description="SMD decay factor")
    block_size: int | None = Field(default=None, ge=1, le=4096, description="kernel rows per step")
    tol: float | None = Field(
        default=None, gt=0, allow_inf_nan=False,
        description="stop early once the per-pass convergence figure falls below this",
    )
    init: Literal["random", "subset"] = Field(
        default="random",
        description="start of the iterative solvers: random (the paper's) or subset (warm start from the leading "
                    "components within the span of init_size random rows)",
    )
    init_size: int | None = Field(
        default=None, ge=1,
        description="rows in the subset of init=subset, between n_components and the data set's n_rows "
                    "(default min(n_rows, max(10 n_components, 1000)), capped by memory); ignored by init=random",
    )
    kernel_precision: Literal["float64", "float32"] = Field(
        default="float64",
        description="precision of the kernel tiles (GEMM and exp), the kernel rows and the solver's GEMM that "
                    "reads them; centring and the solver state stay float64. float32 is about twice as fast "
                    "(bench/kha_speed.py) at ~1e-7 relative error per kernel entry",
    )


class ModelCreate(BaseModel):
    """``POST /v1/models`` body."""

    model_config = ConfigDict(extra="forbid")

    name: Name
    dataset: Name
    kernel: KernelSpec
    n_components: int = Field(ge=1, description="must be below the data set's n_rows")
    solver: Solver = "kha-smd"
    params: FitParams = Field(default_factory=FitParams)


class ModelPublic(BaseModel):
    """A model record as the registry holds it (written by the service and the worker)."""

    model_config = ConfigDict(extra="ignore")

    name: str
    dataset: str
    dataset_checksum: str | None = None
    kernel: dict[str, Any]
    n_components: int
    solver: str
    params: dict[str, Any] = Field(default_factory=dict, description="parameters as requested")
    status: str = Field(description="queued | running | completed | failed | cancelled")
    progress: dict[str, Any] | None = None
    history: list[dict[str, Any]] = Field(default_factory=list)
    error: str | dict[str, Any] | None = None
    params_used: dict[str, Any] | None = Field(default=None, description="parameters the fit actually used")
    dataset_version: int | None = Field(default=None, description="data set version the model is fit on")
    stopped_early: bool | None = Field(default=None, description="the fit met params.tol before all passes")
    best_checkpoint: dict[str, Any] | None = Field(default=None, description="pass and figure of the best checkpoint")
    created_at: str | float | None = None
    updated_at: str | float | None = None


class ModelResume(BaseModel):
    """``POST /v1/models/{name}/resume`` body (optional)."""

    model_config = ConfigDict(extra="forbid")

    passes: int | None = Field(default=None, ge=1, le=10_000, description="new total number of passes")
    dataset_version: int | None = Field(
        default=None, ge=1, description="continue on this (newer) version of the data set: appended rows"
    )


class CheckpointPublic(BaseModel):
    model_config = ConfigDict(extra="ignore")

    pass_: int = Field(alias="pass", serialization_alias="pass")
    size_bytes: int
    created_at: str
    best: bool = False


class CheckpointsPublic(BaseModel):
    checkpoints: list[CheckpointPublic]


class ModelsPublic(BaseModel):
    models: list[ModelPublic]


# ---------------------------------------------------------------- projection

MAX_PROJECT_ROWS = 100_000


class ProjectRequest(BaseModel):
    """``POST /v1/models/{name}/project`` body."""

    model_config = ConfigDict(extra="forbid")

    rows: list[list[Number]] = Field(
        min_length=1, max_length=MAX_PROJECT_ROWS, description="rows with the data set's n_features columns"
    )


class ProjectResponse(BaseModel):
    components: list[list[float]] = Field(description="one row of n_components values per input row")


# ---------------------------------------------------------------- pre-images

PreimageMethod = Literal["auto", "fixed-point", "kwok-tsang", "gradient", "learned"]


class PreimageOptions(BaseModel):
    """Options of the pre-image methods (each method reads the ones it knows)."""

    model_config = ConfigDict(extra="forbid")

    n_iter: int | None = Field(default=None, ge=1, le=1000, description="fixed-point iterations")
    tol: float | None = Field(default=None, gt=0, allow_inf_nan=False, description="convergence tolerance")
    restarts: int | None = Field(default=None, ge=1, le=20, description="fixed-point restarts")
    n_neighbors: int | None = Field(default=None, ge=1, le=1000, description="Kwok-Tsang neighbours")
    max_iter: int | None = Field(default=None, ge=1, le=5000, description="gradient descent iterations")


class ReconstructRequest(BaseModel):
    """``POST /v1/models/{name}/reconstruct`` and ``/denoise`` body."""

    model_config = ConfigDict(extra="forbid")

    rows: list[list[Number]] = Field(min_length=1, max_length=MAX_PROJECT_ROWS)
    method: PreimageMethod = Field(default="auto", description="auto: fixed-point for Gaussian kernels, "
                                   "gradient descent otherwise")
    options: PreimageOptions = Field(default_factory=PreimageOptions)


class ReconstructResponse(BaseModel):
    rows: list[list[float]] = Field(description="one pre-image per input row, in input space")


class TransformRequest(BaseModel):
    """``POST /v1/models/{name}/transform`` body: a whole data set through the model."""

    model_config = ConfigDict(extra="forbid")

    dataset: Name = Field(description="input data set (its latest version)")
    output: Name = Field(description="name of the new data set that receives the result")
    operation: Literal["project", "denoise"] = "project"
    method: PreimageMethod = "auto"
    options: PreimageOptions = Field(default_factory=PreimageOptions)
