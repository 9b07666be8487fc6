"""What a job (a model's fit, a clustering) shows through the API: the public view, its own classes.

These classes are the API's contract, not the stored records (`store.jobs.records.JobRecord` and its
kinds): a record can rename or add a field without changing them. `service.public` maps a record to its
view, one function per resource; nothing else copies a record's fields into a response. The views leave
out what only the service needs (the record's schema version, its owner, the exact limit of its
placement) and show the kernel the fit used in ``params_used.kernel``.

The nested classes keep the names the OpenAPI document has always given them (``Progress``,
``PassRecord``, ...): clients generated from it see the same components.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema

from kpca import defaults
from kpca.params import Param
from store.jobs.records import kernel_json_schema

WORKERS = Param(
    "workers", int, None, low=1, high=4096, words=("all",),
    description="dask workers one KHA-family fit is sharded over: an integer, or \"all\" (every worker that offers "
                "fits); left out: all when the data set has at least KPCA_SHARD_MIN_ROWS rows, else 1. Each pass's "
                "record says how many ran it")


DEVICE = Param("device", str, "auto", choices=("auto", "cpu", "gpu"),
               description="where the fit's full passes run: gpu, a CUDA GPU of the worker (through CuPy: the [gpu] "
                           "extra); cpu, the worker's cores; auto, a GPU where the worker sees one. A sharded fit runs "
                           "on cores")

#: a kernel as the API shows it: ``{"type", parameters}`` (`kpca.kernels.KernelSpec.to_dict`)
KernelShown = Annotated[dict[str, Any], WithJsonSchema(kernel_json_schema())]
ParamValue = int | float | str | bool | None
Status = Literal["queued", "running", "completed", "failed", "cancelled"]


class _View(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class PlacementPublic(BaseModel):
    """Where a job runs, as asked (``placement`` of a model request)."""

    model_config = ConfigDict(extra="forbid")

    workers: Annotated[int | str | None, PlainValidator(lambda value: WORKERS.check(value, "placement")),
                       WithJsonSchema(WORKERS.json_schema())] = None
    device: Annotated[str, PlainValidator(lambda value: DEVICE.check(value, "placement")),
                      WithJsonSchema(DEVICE.json_schema())] = "auto"


class Convergence(_View):
    """A pass's convergence figure (`workers.progress`): ``metric`` (``excess_error``, the reconstruction
    error's excess over the best possible one, where computing that optimum is affordable;
    ``relative_error`` where the data spans exactly r directions; else the proxy ``eigenvalue_change``),
    its ``value`` for the served components, and ``iterate``, the same figure for the solver's raw
    iterate."""

    metric: str = Field(description="excess_error: how much larger the reconstruction error is than the "
                                    "best possible one (E/E_min - 1, 0 at the optimum); relative_error (E/||K'||, "
                                    "where E_min = 0); above exact_limit rows, residual (see residual) where the "
                                    "fit measured it, else eigenvalue_change, the change of the eigenvalue "
                                    "estimates since the previous pass (a proxy)")
    value: float | None = Field(default=None, description="the figure for the served components (what a "
                                "projection gets); None where it is not yet defined")
    iterate: float | None = Field(default=None, description="the figure for the solver's raw iterate (before "
                                  "the served components are made orthonormal); None where not computed")
    residual: float | None = Field(default=None, description="max_i ||C w_i - lambda_i w_i|| / lambda_i of the "
                                   "served components w_i, where the fit measured it (its start and its "
                                   "Rayleigh-Ritz passes do): what params.tol stops on; None where not measured")


class PassRecord(_View):
    """One completed pass of a fit."""

    pass_: int = Field(alias="pass", description="passes completed")
    elapsed_s: float = Field(description="seconds of fitting so far")
    convergence: Convergence = Field(description="how close the fit is after this pass")
    eigenvalues: list[float] = Field(description="eigenvalue estimates of the served components, descending")
    workers: int | None = Field(default=None, description="dask workers the pass ran on (sharded fits); None: one")


class ClusteringPassRecord(PassRecord):
    """One completed pass of a clustering: a model's pass record (``convergence`` of the eigenvectors of
    L, their eigenvalues) and the figures of its labels."""

    variation_of_information: float | None = Field(
        default=None, description="VI (nats) between this pass's labels and the reference labels "
                                  "(labels_dataset); None without them. 0: the same partition")
    labels_change: float | None = Field(
        default=None, description="VI (nats) between this pass's labels and the previous pass's; 0: the "
                                  "labelling did not change. None at the first pass")


class Progress(_View):
    """Where a fit stands, after its latest pass."""

    pass_: int = Field(alias="pass", description="passes completed")
    passes: int = Field(description="passes the fit will run")
    t: int = Field(description="steps taken (rows visited)")
    fraction: float = Field(description="pass / passes")
    elapsed_s: float = Field(description="seconds of fitting so far")
    remaining_s: float = Field(description="estimated seconds to the last pass")
    eigenvalues: list[float] = Field(description="eigenvalue estimates of the served components, descending")
    gains: list[float] | None = Field(default=None, description="current per-component gains (iterative solvers)")
    convergence: Convergence = Field(description="how close the fit is after the latest pass")
    workers: int | None = Field(default=None, description="dask workers the pass ran on (sharded fits); None: one")


class FitError(_View):
    """Why a fit failed: a machine-readable ``code`` and a message that says what to do next."""

    code: str = Field(description="machine-readable cause, such as internal or dataset_changed")
    message: str = Field(description="what went wrong and what to do next")


class BestCheckpoint(_View):
    """The pass whose checkpoint has the lowest convergence figure, and that figure."""

    pass_: int = Field(alias="pass", description="the pass whose checkpoint is best")
    value: float = Field(description="its convergence figure (the lowest of all passes)")


class CheckpointRef(_View):
    """The checkpoint a completed fit serves from: its pass and its checkpoint digest
    (`store.jobs.checkpoint_format`; None for a record migrated from before digests were kept)."""

    pass_: int = Field(alias="pass", description="the pass whose checkpoint the job completed with")
    sha256: str | None = Field(default=None, description="that checkpoint's digest; None: not known (a record "
                               "completed before checkpoints had digests)")


class JobPublic(_View):
    """What every job's view shows (`ModelPublic`, `service.schemas.clusterings.ClusteringPublic`)."""

    name: str = Field(description="the job's name, unique among its kind")
    dataset: str = Field(description="the data set the job is fit on")
    dataset_version: int | None = Field(default=None, description="data set version the job is fit on")
    dataset_checksum: str | None = Field(default=None, description="checksum of the data set when the fit was asked")
    n_features: int | None = Field(default=None, description="columns of the data set the job is fit on")
    kernel: KernelShown = Field(description="kernel type and parameters, as asked")
    solver: str = Field(description="a solver of GET /v1/solvers")
    params: dict[str, ParamValue] = Field(default_factory=dict, description="solver parameters as requested")
    placement: PlacementPublic = Field(default_factory=PlacementPublic, description="where the job runs, as asked")
    checkpoint_keep: int = Field(default=defaults.CHECKPOINT_KEEP, description="checkpoints kept (plus the best)")
    status: Status = Field(default="queued", description="queued | running | completed | failed | cancelled")
    progress: Progress | None = Field(default=None, description="where the fit stands after its latest "
                                      "pass; None before the first pass")
    history: list[PassRecord] = Field(default_factory=list, description="one record per completed pass")
    error: FitError | None = Field(default=None, description="why the fit failed; None unless status is failed")
    params_used: dict[str, Any] | None = Field(
        default=None, description="every parameter's value in the fit, defaults resolved; kernel: the kernel the "
                                  "fit used (\"auto\" resolved); n_rows: the rows it fits")
    stopped_early: bool | None = Field(default=None, description="the fit met params.tol before all passes")
    warnings: list[str] = Field(default_factory=list, description="what a user should know of a completed fit")
    best_checkpoint: BestCheckpoint | None = Field(default=None, description="the checkpoint with the lowest "
                                                   "convergence figure; None before the first")
    checkpoint: CheckpointRef | None = Field(default=None, description="the checkpoint a completed fit serves "
                                             "from; a missing or damaged one is a 409 corrupt. None until the fit "
                                             "completes")
    created_at: str | None = Field(default=None, description="when the job was created (ISO 8601, UTC)")
    updated_at: str | None = Field(default=None, description="when the record last changed (ISO 8601, UTC)")


class JobDamaged(BaseModel):
    """A job in a list whose record cannot be read (quarantined, `store.quarantine`): its name, status
    ``corrupt`` and, in ``error``, which file, why, and what to do (delete it). ``GET`` of it is a 409
    ``corrupt`` with the same message."""

    name: str = Field(description="the job's name")
    status: Literal["corrupt"] = Field(default="corrupt", description="corrupt: its record cannot be read")
    error: FitError = Field(description="code corrupt; the message names the damaged file and what to do")
