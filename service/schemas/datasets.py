"""Schemas of the ``/v1/datasets`` resource."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from service.schemas.common import Name, Number


class DatasetCreate(BaseModel):
    """``POST /v1/datasets`` body."""

    model_config = ConfigDict(extra="forbid")

    name: Name
    n_features: int = Field(ge=1, le=100_000, description="columns of every row")
    dtype: Literal["float32", "float64"] = "float32"


class DatasetPublic(BaseModel):
    """A data set's metadata as the store reports it."""

    model_config = ConfigDict(extra="ignore")

    name: str
    n_features: int
    dtype: str
    status: str = Field(description='"open" while chunks arrive, "ready" once committed')
    n_rows: int = 0
    chunks: list[int] = Field(default_factory=list, description="indices of received chunks")
    checksum: str | None = None
    created_at: str | float | None = None
    committed_at: str | float | None = None


class DatasetsPublic(BaseModel):
    datasets: list[DatasetPublic]


class ChunkRows(BaseModel):
    """``PUT /v1/datasets/{name}/chunks/{index}`` JSON body."""

    model_config = ConfigDict(extra="forbid")

    rows: list[list[Number]] = Field(description="rows of the chunk, each with n_features numbers")
