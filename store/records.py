"""The job records: one typed, versioned document per model (and per clustering), the authoritative job state.

`JobRecord` holds what every job records (the data set, kernel, solver and
parameters, and status, progress and history of its fit); `ModelRecord`
adds a model's ``n_components``, `store.clusterings.ClusteringRecord` a
clustering's ``n_clusters`` and labels. `ModelRecord` is what ``models/{name}/model.json`` holds and what every layer
reads and writes: the service creates it (``queued``) from a request, the
worker running the fit writes status, progress and history into it, the
service answers from it. Two parts:

* what was asked (set at creation; ``params.passes`` and
  ``dataset_version`` change on resume): ``dataset``, ``dataset_version``,
  ``dataset_checksum``, ``n_features`` (the data set's columns: what a
  model over centres serves without its data set; None in records written
  before it), ``kernel`` (`kpca.kernels.KernelSpec.to_dict`),
  ``n_components``, ``solver``, ``params`` (the parameters the user gave,
  checked against the solver's declaration, `kpca.solvers.SOLVERS`; the
  others take their declared defaults), ``exact_limit``,
  ``checkpoint_keep``;
* what the fit did (written by the worker): ``status``, ``progress``,
  ``history`` (one `PassRecord` per pass), ``error``, ``params_used`` (every
  parameter's value, defaults resolved), ``stopped_early``,
  ``best_checkpoint``.

Versions: 2 (this one). Version 1 records (written before the solver
registry) are migrated when read (`migrate`): their ``params`` listed every
parameter of every solver, None where left out; version 2 keeps only the
given ones that the solver declares. An ``error`` that was a bare string
becomes ``{"code": "internal", "message": ...}``. The file is rewritten in
version 2 at its next update.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from kpca import defaults
from kpca.kernels import KernelSpec
from kpca.solvers import SOLVERS, FitContext, get_solver
from store.dataset_meta import DatasetInfo
from store.errors import Conflict, Invalid, NotFound

MODEL_SCHEMA_VERSION = 2
STATUSES = ("queued", "running", "completed", "failed", "cancelled")
ACTIVE = ("queued", "running")
TERMINAL = ("completed", "failed", "cancelled")

Status = Literal["queued", "running", "completed", "failed", "cancelled"]
ParamValue = int | float | str | bool | None


class _Document(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class Convergence(_Document):
    """A pass's convergence figure (`workers.progress`): ``metric`` (``excess_error``, the reconstruction
    error's excess over the best possible one, where computing that optimum is affordable;
    ``relative_error`` where the data spans exactly r directions; else the proxy ``eigenvalue_change``),
    its ``value`` for the served components, and ``iterate``, the same figure for the solver's raw
    iterate."""

    metric: str = Field(description="excess_error: how much larger the reconstruction error is than the "
                                    "best possible one (E/E_min - 1, 0 at the optimum); relative_error (E/||K'||, "
                                    "where E_min = 0); or eigenvalue_change, the change of the eigenvalue "
                                    "estimates since the previous pass (a proxy, above exact_limit rows)")
    value: float | None = Field(default=None, description="the figure for the served components (what a "
                                "projection gets); None where it is not yet defined")
    iterate: float | None = Field(default=None, description="the figure for the solver's raw iterate (before "
                                  "the served components are made orthonormal); None where not computed")


class PassRecord(_Document):
    """One completed pass of a fit."""

    pass_: int = Field(alias="pass", description="passes completed")
    elapsed_s: float = Field(description="seconds of fitting so far")
    convergence: Convergence = Field(description="how close the fit is after this pass")
    eigenvalues: list[float] = Field(description="eigenvalue estimates of the served components, descending")
    workers: int | None = Field(default=None, description="dask workers the pass ran on (sharded fits); None: one")


class Progress(_Document):
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


class FitError(_Document):
    """Why a fit failed: a machine-readable ``code`` and a message that says what to do next."""

    code: str = Field(description="machine-readable cause, such as internal or dataset_changed")
    message: str = Field(description="what went wrong and what to do next")


class BestCheckpoint(_Document):
    """The pass whose checkpoint has the lowest convergence figure, and that figure."""

    pass_: int = Field(alias="pass", description="the pass whose checkpoint is best")
    value: float = Field(description="its convergence figure (the lowest of all passes)")


class JobRecord(_Document):
    """What every job records (a model's fit, a clustering; module docstring): the data set, kernel,
    solver and parameters asked for, and the state of the fit the worker writes. A kind of job
    subclasses it with what it asks for besides (`ModelRecord.n_components`) and names itself
    (``kind``, ``route``) in the messages of `resumed`. Every kind has ``n_components``, the components
    its solver fits (a field of a model, a property of a clustering), and ``components_field``, the
    request field that sets it (what an error names)."""

    kind: ClassVar[str] = "job"
    route: ClassVar[str] = "/v1/jobs"
    components_field: ClassVar[str] = "n_components"

    schema_version: int = Field(default=MODEL_SCHEMA_VERSION, description="version of this record's layout")
    name: str = Field(description="the job's name, unique among its kind")
    dataset: str = Field(description="the data set the job is fit on")
    dataset_version: int | None = Field(default=None, description="data set version the job is fit on")
    dataset_checksum: str | None = Field(default=None, description="checksum of the data set when the fit was asked")
    n_features: int | None = Field(default=None, description="columns of the data set the job is fit on")
    kernel: dict[str, Any] = Field(description="kernel type and parameters")
    solver: str = Field(description="a solver of GET /v1/solvers")
    params: dict[str, ParamValue] = Field(default_factory=dict, description="solver parameters as requested")
    exact_limit: int = Field(default=defaults.EXACT_LIMIT, description="largest l whose exact figure is computed")
    checkpoint_keep: int = Field(default=defaults.CHECKPOINT_KEEP, description="checkpoints kept (plus the best)")
    status: Status = Field(default="queued", description="queued | running | completed | failed | cancelled")
    progress: Progress | None = Field(default=None, description="where the fit stands after its latest "
                                      "pass; None before the first pass")
    history: list[PassRecord] = Field(default_factory=list, description="one record per completed pass")
    error: FitError | None = Field(default=None, description="why the fit failed; None unless status is failed")
    params_used: dict[str, Any] | None = Field(
        default=None, description="every parameter's value in the fit, defaults resolved; kernel: the kernel "
                                  "the fit used (\"auto\" resolved)")
    stopped_early: bool | None = Field(default=None, description="the fit met params.tol before all passes")
    warnings: list[str] = Field(default_factory=list, description="what a user should know of a completed fit")
    best_checkpoint: BestCheckpoint | None = Field(default=None, description="the checkpoint with the lowest "
                                                   "convergence figure; None before the first")
    created_at: str | None = Field(default=None, description="when the job was created (ISO 8601, UTC)")
    updated_at: str | None = Field(default=None, description="when the record last changed (ISO 8601, UTC)")
    owner: str | None = Field(default=None, description="id of the API key that created the job (None: no keys)")

    def document(self) -> dict:
        """The document stored on disk (aliases such as ``pass``), as plain Python values: writing it
        (`store.atomic.dump_json`) refuses NaN and infinities wherever they are. Cost O(record size)."""
        return self.model_dump(by_alias=True)

    @property
    def fit_kernel(self) -> dict:
        """The kernel the fit used: ``params_used.kernel`` once the fit resolved ``"auto"``, else the
        kernel as asked."""
        return (self.params_used or {}).get("kernel") or self.kernel

    @property
    def passes(self) -> int:
        """Passes the fit runs: ``params.passes``, else the solver's declared default."""
        if "passes" in self.params:
            return int(self.params["passes"])
        solver = SOLVERS.get(self.solver)
        declared = solver.param("passes") if solver is not None else None
        return int(declared.default) if declared is not None else defaults.PASSES

    @property
    def resumable(self) -> bool:
        """Whether its solver runs pass by pass, so that a stopped fit can be resumed (`resumed`)."""
        solver = SOLVERS.get(self.solver)
        return solver is not None and solver.iterative

    @property
    def passes_done(self) -> int:
        """Passes completed so far (0 before the first)."""
        return self.progress.pass_ if self.progress is not None else 0

    def resumed(self, passes: int | None, dataset_version: int | None = None, versions: list[int] = ()) -> dict:
        """The fields a resume sets: status ``queued``, the new total ``params.passes`` and
        ``dataset_version``; `Conflict` / `Invalid` naming the field when the resume makes no sense.

        ``passes`` is the new total (not a number of further passes); without
        it a resume on a newer ``dataset_version`` runs the job's passes
        again over the grown data, and a resume of an unfinished fit runs to
        the passes it had. ``versions`` are the data set's committed versions.
        Cost O(1).
        """
        kind = self.kind
        if self.status in ACTIVE:
            raise Conflict(f"{kind} {self.name!r} is already {self.status}", field="name")
        solver = SOLVERS.get(self.solver)
        if solver is None or not solver.iterative:
            raise Conflict(f"a {self.solver} {kind} is fit in one go and has nothing to resume; fit a new {kind} "
                           "instead", field="name")
        done = self.passes_done
        total = passes if passes is not None else self.passes
        if total <= done and (passes is not None or dataset_version is None):
            if passes is None and self.status == "completed":
                raise Conflict(f"{kind} {self.name!r} completed all {done} passes; ask for more passes "
                               f'(e.g. {{"passes": {done + 10}}}, the new total) or a newer dataset_version',
                               field="passes")
            raise Invalid("passes", f"passes is the new total and must exceed the {done} passes already done, "
                                    f"got {total}")
        version = self.dataset_version
        if dataset_version is not None:
            if dataset_version not in versions:
                raise NotFound("version", str(dataset_version), field="dataset_version",
                               message=f"data set {self.dataset!r} has no version {dataset_version} "
                                       f"(versions: {versions})")
            if version is not None and dataset_version < version:
                raise Invalid("dataset_version", f"dataset_version must not go back from {version} to "
                                                 f"{dataset_version}")
            version = dataset_version
            if total <= done:
                total = done + self.passes
        return {"status": "queued", "params": {**self.params, "passes": total}, "dataset_version": version,
                "error": None, "stopped_early": None}


class ModelRecord(JobRecord):
    """A model: its configuration and its fit's state (module docstring)."""

    kind: ClassVar[str] = "model"
    route: ClassVar[str] = "/v1/models"

    n_components: int = Field(ge=1, description="number of components r")

    @classmethod
    def new(cls, name: str, dataset: DatasetInfo, *, kernel: dict, n_components: int, solver: str, params: dict,
            exact_limit: int = defaults.EXACT_LIMIT, checkpoint_keep: int = defaults.CHECKPOINT_KEEP) -> "ModelRecord":
        """A ``queued`` record for a fit on ``dataset`` (its public metadata, `store.DatasetStore.get`).

        The solver's parameters are checked against the data set's rows
        (`kpca.solvers.Solver.check`: ``n_components`` below the rows,
        ``init_size`` in range, the exact solver's limit), raising
        `kpca.params.ParamError` naming the field. Cost O(parameters).
        """
        checked = check_solver(solver, params, dataset, n_components, kernel, exact_limit)
        return cls(name=name, **dataset_fields(dataset), kernel=kernel, n_components=n_components, solver=solver,
                   params=checked, exact_limit=exact_limit, checkpoint_keep=checkpoint_keep)

    @property
    def serves_without_dataset(self) -> bool:
        """Whether the model serves from its checkpoint alone (a solver over centres,
        `kpca.solvers.Solver.serves`) and knows its width, so that it serves after its data set is gone."""
        solver = SOLVERS.get(self.solver)
        return solver is not None and solver.serves == "centres" and self.n_features is not None

    @property
    def has_own_decoder(self) -> bool:
        """Whether the model is not a kernel expansion but has a model of its own with a decoder
        (autoencoder KPCA, `kpca.solvers.Solver.model`): its components have no input-space image."""
        solver = SOLVERS.get(self.solver)
        return solver is not None and solver.model is not None


def check_solver(solver: str, params: dict, dataset: DatasetInfo, n_components: int, kernel: dict,
                 exact_limit: int) -> dict:
    """The solver's parameters checked against the data set's rows (`kpca.solvers.Solver.check`),
    raising `kpca.params.ParamError` naming the field. Cost O(parameters)."""
    context = FitContext(n_rows=dataset.n_rows, n_components=int(n_components), dense_limit=exact_limit,
                         kernel=KernelSpec.from_dict(kernel))
    return get_solver(solver).check(params, context)


def dataset_fields(dataset: DatasetInfo) -> dict:
    """The fields a job record takes from its data set's public metadata (`store.DatasetStore.get`)."""
    return {"dataset": dataset.name, "dataset_version": dataset.version, "dataset_checksum": dataset.checksum,
            "n_features": dataset.n_features}


def migrate(doc: dict) -> dict:
    """A stored record document brought to `MODEL_SCHEMA_VERSION` (module docstring). Cost O(size)."""
    doc = dict(doc)
    if doc.get("schema_version", 1) < 2:
        solver = SOLVERS.get(doc.get("solver"))
        params = {k: v for k, v in (doc.get("params") or {}).items() if v is not None}
        if solver is not None:
            params = {k: v for k, v in params.items() if solver.param(k) is not None}
        doc["params"] = params
        if isinstance(doc.get("error"), str):
            doc["error"] = {"code": "internal", "message": doc["error"]}
        doc["schema_version"] = 2
    return doc
