"""Pydantic schemas, one family per resource; kernels, solvers and pre-image methods come from the
registries of `kpca` (`service.schemas.declared`)."""

from service.schemas.datasets import (
    ChunkRows,
    DatasetCreate,
    DatasetPublic,
    DatasetsPublic,
    DatasetVersion,
    ZarrSource,
)
from service.schemas.errors import ErrorBody, ErrorDetail
from service.schemas.models import ModelCreate, ModelPublic, ModelResume, ModelsPublic
from service.schemas.serving import ProjectRequest, ProjectResponse, ReconstructRequest, TransformRequest

__all__ = [
    "ChunkRows",
    "DatasetCreate",
    "DatasetPublic",
    "DatasetsPublic",
    "DatasetVersion",
    "ErrorBody",
    "ErrorDetail",
    "ModelCreate",
    "ModelPublic",
    "ModelResume",
    "ModelsPublic",
    "ProjectRequest",
    "ProjectResponse",
    "ReconstructRequest",
    "TransformRequest",
    "ZarrSource",
]
