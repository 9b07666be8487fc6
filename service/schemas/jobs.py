"""What a job (a model's fit, a clustering) shows through the API: its stored record without what only
the service needs (``schema_version``, ``owner``, the exact limit of its placement), with the kernel the
fit used in ``params_used.kernel``.

The stored records (`store.records.JobRecord`) are the service's own; these are the API's, one per kind
(`service.schemas.models.ModelPublic`, `service.schemas.clusterings.ClusteringPublic`), built by
`JobPublic.of`. Their parts that carry nothing of storage (progress, history, errors) are the records'.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema

from kpca.params import Param
from store.records import BestCheckpoint, FitError, JobRecord, PassRecord, Progress

WORKERS = Param(
    "workers", int, None, low=1, high=4096, words=("all",),
    description="dask workers one KHA-family fit is sharded over: an integer, or \"all\" (every worker that offers "
                "fits); left out: all when the data set has at least KPCA_SHARD_MIN_ROWS rows, else 1. Each pass's "
                "record says how many ran it")


class PlacementPublic(BaseModel):
    """Where a job runs, as asked (``placement`` of a model request)."""

    model_config = ConfigDict(extra="forbid")

    workers: Annotated[int | str | None, PlainValidator(lambda value: WORKERS.check(value, "placement")),
                       WithJsonSchema(WORKERS.json_schema())] = None


class JobPublic(BaseModel):
    """A job as the API shows it (module docstring)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    name: str = Field(description="the job's name, unique among its kind")
    dataset: str = Field(description="the data set the job is fit on")
    dataset_version: int | None = Field(default=None, description="data set version the job is fit on")
    dataset_checksum: str | None = Field(default=None, description="checksum of the data set when the fit was asked")
    n_features: int | None = Field(default=None, description="columns of the data set the job is fit on")
    kernel: dict[str, Any] = Field(description="kernel type and parameters, as asked")
    solver: str = Field(description="a solver of GET /v1/solvers")
    params: dict[str, Any] = Field(default_factory=dict, description="solver parameters as requested")
    placement: PlacementPublic = Field(default_factory=PlacementPublic, description="where the job runs, as asked")
    checkpoint_keep: int = Field(description="checkpoints kept (plus the best)")
    status: Literal["queued", "running", "completed", "failed", "cancelled"] = Field(
        description="queued | running | completed | failed | cancelled")
    progress: Progress | None = Field(default=None, description="where the fit stands after its latest "
                                      "pass; None before the first pass")
    history: list[PassRecord] = Field(default_factory=list, description="one record per completed pass")
    error: FitError | None = Field(default=None, description="why the fit failed; None unless status is failed")
    params_used: dict[str, Any] | None = Field(
        default=None, description="every parameter's value in the fit, defaults resolved; kernel: the kernel "
                                  "the fit used (\"auto\" resolved); n_rows: the rows it fits")
    stopped_early: bool | None = Field(default=None, description="the fit met params.tol before all passes")
    warnings: list[str] = Field(default_factory=list, description="what a user should know of a completed fit")
    best_checkpoint: BestCheckpoint | None = Field(default=None, description="the checkpoint with the lowest "
                                                   "convergence figure; None before the first")
    created_at: str | None = Field(default=None, description="when the job was created (ISO 8601, UTC)")
    updated_at: str | None = Field(default=None, description="when the record last changed (ISO 8601, UTC)")

    @classmethod
    def of(cls, record: JobRecord, **extra: Any):
        """The public view of ``record`` (``extra``: fields of the view the record does not hold, such as a
        page of labels). Cost O(record size)."""
        document = record.document()
        used = document.get("params_used")
        if used is not None and document.get("fit_kernel") is not None:
            document["params_used"] = {**used, "kernel": document["fit_kernel"]}
        document["placement"] = {"workers": (document.get("placement") or {}).get("workers")}
        return cls.model_validate({**document, **extra})
