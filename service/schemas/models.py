"""Schemas of the ``/v1/models`` lifecycle: create, read, resume, checkpoints.

A model as the API shows it is the stored record itself
(`store.records.ModelRecord`): one type from the registry to the response.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.schemas.common import Name
from service.schemas.declared import Kernel, SolverName, SolverParams, check_solver_params
from store.records import ModelRecord

ModelPublic = ModelRecord


class ModelCreate(BaseModel):
    """``POST /v1/models`` body."""

    model_config = ConfigDict(extra="forbid")

    name: Name
    dataset: Name
    kernel: Kernel
    n_components: int = Field(ge=1, description="number of components; must be below the data set's n_rows")
    solver: SolverName = "kha-smd"
    params: SolverParams

    @model_validator(mode="after")
    def _params_of_the_solver(self) -> "ModelCreate":
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


class ModelsPublic(BaseModel):
    models: list[ModelPublic] = Field(description="every model, in name order")
