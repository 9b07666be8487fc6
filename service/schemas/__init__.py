"""Pydantic schemas, one family per resource."""

from service.schemas.datasets import (
    ChunkRows,
    DatasetCreate,
    DatasetPublic,
    DatasetsPublic,
    DatasetVersion,
    ZarrSource,
)
from service.schemas.errors import ErrorBody, ErrorDetail
from service.schemas.models import (
    FitParams,
    KernelSpec,
    ModelCreate,
    ModelPublic,
    ModelsPublic,
    ProjectRequest,
    ProjectResponse,
)

__all__ = [
    "ChunkRows",
    "DatasetCreate",
    "DatasetPublic",
    "DatasetsPublic",
    "DatasetVersion",
    "ErrorBody",
    "ErrorDetail",
    "FitParams",
    "KernelSpec",
    "ModelCreate",
    "ModelPublic",
    "ModelsPublic",
    "ProjectRequest",
    "ProjectResponse",
    "ZarrSource",
]
