"""Schemas of the ``/v1/models`` lifecycle: create, read, resume, checkpoints.

A model as the API shows it (`ModelPublic`) is the public view of a job (`service.schemas.jobs`) with its
``n_components``, made from its stored record by `service.public.model_public`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.schemas.common import Name
from service.schemas.declared import Kernel, SolverName, SolverParams, check_solver_params
from service.schemas.jobs import FitError, JobDamaged, JobPublic, PlacementPublic, Progress


class ModelPublic(JobPublic):
    """A model: its configuration and its fit's state."""

    n_components: int = Field(ge=1, description="number of components r")


class ModelCreate(BaseModel):
    """``POST /v1/models`` body."""

    model_config = ConfigDict(extra="forbid")

    name: Name
    dataset: Name
    kernel: Kernel
    n_components: int = Field(ge=1, description="number of components; must be below the data set's n_rows")
    solver: SolverName = "ritz"
    params: SolverParams
    placement: PlacementPublic = Field(default_factory=PlacementPublic,
                                       description="where the fit runs (not a parameter of its solver)")

    @model_validator(mode="after")
    def _params_of_the_solver(self) -> ModelCreate:
        check_solver_params(self.solver, self.params)
        return self


class ModelResume(BaseModel):
    """``POST /v1/models/{name}/resume`` body (optional)."""

    model_config = ConfigDict(extra="forbid")

    passes: int | None = Field(default=None, ge=1, le=10_000,
                               description="the new TOTAL number of passes (not a number of further passes)")
    dataset_version: int | None = Field(
        default=None, ge=1, description="continue on this (newer) version of the data set: appended rows")


class CheckpointPublic(BaseModel):
    model_config = ConfigDict(extra="ignore")

    pass_: int = Field(alias="pass", serialization_alias="pass", description="the pass the checkpoint was taken after")
    size_bytes: int = Field(description="size of the checkpoint on disk")
    created_at: str = Field(description="when it was written (ISO 8601, UTC)")
    best: bool = Field(default=False, description="whether it has the lowest convergence figure (kept always)")


class CheckpointsPublic(BaseModel):
    checkpoints: list[CheckpointPublic] = Field(description="the kept checkpoints, earliest pass first")


class ModelSummary(BaseModel):
    """A model in the list: where its fit stands, without its history (``?full=true``: every field of
    ``GET /v1/models/{name}``)."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(description="the model's name")
    status: str = Field(description="queued | running | completed | failed | cancelled")
    dataset: str = Field(description="the data set the model is fit on")
    dataset_version: int | None = Field(default=None, description="data set version the model is fit on")
    solver: str = Field(description="a solver of GET /v1/solvers")
    kernel: dict[str, Any] = Field(description="kernel type and parameters")
    n_components: int = Field(description="number of components")
    progress: Progress | None = Field(default=None, description="pass / passes, remaining_s, eigenvalues")
    error: FitError | None = Field(default=None, description="why the fit failed (status failed), else null")
    created_at: str | None = Field(default=None, description="when the model was created (ISO 8601, UTC)")
    updated_at: str | None = Field(default=None, description="when its record last changed (ISO 8601, UTC)")


class ModelsPublic(BaseModel):
    """A page of models, sorted by name."""

    models: list[ModelSummary | JobDamaged] = Field(
        description="the models of this page, in name order (summaries; ?full=true: whole records); a model "
                    "whose record cannot be read is listed with status corrupt and why")
    next_cursor: str | None = Field(default=None, description="pass as cursor= for the next page; None on the last")
