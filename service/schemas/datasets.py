"""Schemas of the ``/v1/datasets`` resource."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from service.schemas.common import Name, Number


class ZarrSource(BaseModel):
    """An existing zarr array to register without copying."""

    model_config = ConfigDict(extra="forbid", from_attributes=True)

    zarr: str = Field(
        min_length=1,
        max_length=4096,
        description="absolute local path or fsspec URL of a 2-D integer or float zarr array; "
        "it must lie below one of the service's register_prefixes",
        examples=["/data/arrays/digits.zarr"],
    )


class DatasetCreate(BaseModel):
    """``POST /v1/datasets`` body: either an empty set to upload into, or an existing zarr array.

    ``{"name", "n_features", "dtype"}`` creates an open set (dtype defaults to
    float32); ``{"name", "source": {"zarr": ...}, "dtype"}`` registers an
    existing array as a ready, read-only set (dtype defaults to the array's if
    float32/float64, else float64).
    """

    model_config = ConfigDict(extra="forbid")

    name: Name
    n_features: int | None = Field(default=None, ge=1, le=100_000, description="columns of every row")
    dtype: Literal["float32", "float64"] | None = Field(
        default=None, description="stored number type; default float32 (a registered array: its own if float)")
    source: ZarrSource | None = Field(default=None, description="register this zarr array instead of uploading")


class DatasetVersion(BaseModel):
    """One committed version of a data set."""

    model_config = ConfigDict(from_attributes=True)

    version: int = Field(description="version number, from 1")
    n_rows: int = Field(description="rows of this version")
    n_chunks: int = Field(description="chunks of this version")
    checksum: str = Field(description="checksum of this version's rows")
    committed_at: str | float | None = Field(default=None, description="when this version was committed")


class DatasetPublic(BaseModel):
    """A data set's metadata as the store reports it (read from `store.DatasetInfo`'s attributes)."""

    model_config = ConfigDict(extra="ignore", from_attributes=True)

    name: str = Field(description="the data set's name")
    n_features: int = Field(description="columns of every row")
    dtype: str = Field(description="stored number type: float32 or float64")
    status: str = Field(description='"open" until a version is committed, then "ready"; "corrupt" while '
                        "stored or staged chunks are damaged")
    n_rows: int = Field(default=0, description="rows of the latest version (open: of the received chunks)")
    chunks: list[int] = Field(
        default_factory=list, description="chunk indices of the latest version (open: received indices)"
    )
    checksum: str | None = Field(default=None, description="checksum of the latest version")
    created_at: str | float | None = Field(default=None, description="when the data set was created")
    committed_at: str | float | None = Field(default=None, description="when the latest version was committed")
    version: int = Field(default=0, description="latest committed version, 0 if none")
    versions: list[DatasetVersion] = Field(default_factory=list, description="every committed version, oldest first")
    staged: list[int] = Field(default_factory=list, description="indices uploaded but not yet committed")
    zarr_chunk_rows: int | None = Field(default=None, description="rows per stored chunk")
    source: ZarrSource | None = Field(default=None, description="the registered zarr array, if any")
    source_dtype: str | None = Field(default=None, description="dtype of the registered array")
    corrupt_chunks: list[int] = Field(
        default_factory=list, description='committed chunks found damaged (status "corrupt" until repaired: '
        "upload them again with their original rows and commit, or delete the data set)")
    damaged_staged: list[int] = Field(
        default_factory=list, description="staged chunks whose file is damaged: upload them again")
    error: str | None = Field(default=None, description="why a damaged data set cannot be described")


class DatasetVerified(BaseModel):
    """``GET /v1/datasets/{name}/verify``: every chunk of a version re-hashed against its sha256."""

    ok: bool = Field(description="whether every chunk matches its digest")
    version: int = Field(description="the version checked")
    chunks_checked: int = Field(description="chunks re-hashed")
    corrupt_chunks: list[int] = Field(description="chunks whose stored rows fail their digest")


class DatasetsPublic(BaseModel):
    """A page of data sets, sorted by name."""

    datasets: list[DatasetPublic] = Field(description="the data sets of this page, in name order")
    next_cursor: str | None = Field(default=None, description="pass as cursor= for the next page; None on the last")


class ChunkRows(BaseModel):
    """``PUT /v1/datasets/{name}/chunks/{index}`` JSON body."""

    model_config = ConfigDict(extra="forbid")

    rows: list[list[Number]] = Field(description="rows of the chunk, each with n_features numbers")
