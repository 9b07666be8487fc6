"""Schemas of ``/v1/clusterings``: create, read (with a page of labels), resume, predict.

A clustering as the API shows it (`ClusteringPublic`) is the public view of a job (`service.schemas.jobs`)
with what a clustering adds, plus, once completed, a page of its labels (`ClusteringLabelled`); made from
its stored record by `service.public.clustering_public`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from kpca.clustering import clustering_solvers
from kpca.params import ParamError
from service.schemas.common import Name
from service.schemas.declared import Kernel, SolverParams, check_solver_params
from service.schemas.jobs import ClusteringPassRecord, JobDamaged, JobPublic

LABELS_PAGE = 10_000  # labels in a GET unless labels_limit says otherwise
MAX_LABELS_PAGE = 100_000


def _clustering_solver(name: str) -> str:
    if name not in clustering_solvers():
        raise ParamError("solver", f"spectral clustering takes the eigenvectors of L from one of "
                                   f"{', '.join(clustering_solvers())}; got {name!r}")
    return name


def _solver_enum(schema: dict) -> None:
    schema["enum"] = list(clustering_solvers())


ClusteringSolver = Annotated[str, AfterValidator(_clustering_solver), Field(
    json_schema_extra=_solver_enum, description="the solver of the k leading eigenvectors of L: the KHA family "
                                                "pass by pass (progress, cancel, resume), exact or lanczos in one go")]


class ClusteringCreate(BaseModel):
    """``POST /v1/clusterings`` body."""

    model_config = ConfigDict(extra="forbid")

    name: Name
    dataset: Name
    n_clusters: int = Field(ge=2, description="number of clusters k, 2 .. n_rows - 1 of the data set")
    # a factory, not a default: the document then declares no object as the default (generated clients refuse one:
    # openapi-python-client's "ModelProperty cannot have a default value"); the description says what it is
    kernel: Kernel = Field(default_factory=lambda: {"type": "gaussian", "sigma": "auto"}, validate_default=True,
                           description="the affinity: gaussian or laplacian (positive values); default gaussian "
                                       "with sigma auto")
    solver: ClusteringSolver = "ritz"
    params: SolverParams
    labels_dataset: Name | None = Field(
        default=None, description="a committed data set of reference labels: one column, one row per row of "
                                  "dataset; each pass's history then records the variation of information "
                                  "against them")

    @model_validator(mode="after")
    def _params_of_the_solver(self) -> ClusteringCreate:
        check_solver_params(self.solver, self.params)
        return self


class ClusteringResume(BaseModel):
    """``POST /v1/clusterings/{name}/resume`` body (optional)."""

    model_config = ConfigDict(extra="forbid")

    passes: int | None = Field(default=None, ge=1, le=10_000,
                               description="the new TOTAL number of passes (not a number of further passes)")


class ClusteringPublic(JobPublic):
    """A clustering: its configuration, its fit's state and its figures."""

    history: list[ClusteringPassRecord] = Field(  # type: ignore[assignment]  # a clustering's passes say more
        default_factory=list, description="one record per completed pass")
    n_clusters: int = Field(ge=2, description="number of clusters k (and of eigenvectors of L fitted)")
    n_rows: int | None = Field(default=None, description="rows of the data set version: the number of labels")
    labels_dataset: str | None = Field(default=None, description="data set of reference labels (one column)")
    labels_dataset_version: int | None = Field(default=None, description="its version, pinned at creation")
    variation_of_information: float | None = Field(
        default=None, description="VI (nats) of the final labels against the reference labels")
    labels_sha256: str | None = Field(default=None, description="sha256 of labels.npy as written when the "
                                      "clustering completed, checked when they are read; None before, and in "
                                      "records written before it was kept")
    coordinates_sha256: str | None = Field(
        default=None, description="sha256 of coordinates.npy, the rows' two leading spectral coordinates that "
        "clusters.png draws, as written when the clustering completed; None before, and in records written "
        "before they were kept")
    pictures: dict[str, str] = Field(
        default_factory=dict, description="URLs of its pictures: clusters (the rows at their two leading spectral "
        "coordinates, coloured by cluster and by the reference labels) once it has completed")


class ClusteringLabelled(ClusteringPublic):
    """A clustering and, once completed, a page of its labels (``GET /v1/clusterings/{name}``)."""

    labels: list[int] | None = Field(default=None, description="cluster of each row, 0 .. n_clusters-1, rows "
                                     "labels_offset .. labels_offset + len(labels) - 1; None until completed")
    labels_offset: int | None = Field(default=None, description="row of the first label in labels")
    labels_total: int | None = Field(default=None, description="labels in all: the data set's rows")
    next: str | None = Field(default=None, description="URL of the next page of labels; None on the last")


class ClusteringsPublic(BaseModel):
    """A page of clusterings (records without labels), sorted by name."""

    clusterings: list[ClusteringPublic | JobDamaged] = Field(
        description="the clusterings of this page (without labels), in name order; a clustering whose record "
                    "cannot be read is listed with status corrupt and why")
    next_cursor: str | None = Field(default=None, description="pass as cursor= for the next page; None on the last")


class PredictResponse(BaseModel):
    labels: list[int] = Field(description="the cluster of each input row (Nystrom extension of the eigenvectors)")
