"""The job records: one typed, versioned document per model (and per clustering), the authoritative job state.

`JobRecord` holds what every job records (the data set, kernel, solver and
parameters, and status, progress and history of its fit); `ModelRecord`
adds a model's ``n_components``, `store.jobs.clusterings.ClusteringRecord` a
clustering's ``n_clusters`` and labels. `ModelRecord` is what ``models/{name}/model.json`` holds and what every layer
reads and writes: the service creates it (``queued``) from a request, the
worker running the fit writes status, progress and history into it, the
service answers from it. Two parts:

* what was asked (set at creation; ``params.passes`` and
  ``dataset_version`` change on resume): ``dataset``, ``dataset_version``,
  ``dataset_checksum``, ``n_features`` (the data set's columns: what a
  model over centres serves without its data set; None in records written
  before it), ``kernel`` (a `kpca.kernels.KernelSpec`, stored as
  ``{"type", parameters}``; widths may be ``"auto"``), ``n_components``,
  ``solver``, ``params`` (the parameters the user gave, checked against
  the solver's declaration, `kpca.solvers.SOLVERS`, by the service; the
  others take their declared defaults), ``placement`` (where the job runs:
  the dask ``workers`` asked for and the ``exact_limit`` of the service
  that took it: settings of the job, not of its solver),
  ``checkpoint_keep``;
* what the fit did (written by the worker): ``status``, ``fit_kernel`` (the
  kernel with ``"auto"`` resolved, written once, when the fit first
  starts), ``progress``, ``history`` (one `PassRecord` per pass),
  ``error``, ``params_used`` (every parameter's value, defaults resolved),
  ``stopped_early``, ``best_checkpoint``, ``checkpoint``.

Versions: 4 (this one). Older records are migrated when read (`migrate`)
and rewritten in version 4 at their next update. Version 1 (written before
the solver registry): ``params`` listed every parameter of every solver,
None where left out; version 2 keeps only the given ones that the solver
declares, and an ``error`` that was a bare string becomes ``{"code":
"internal", "message": ...}``. Version 2 kept ``params.workers`` and
``exact_limit`` beside the solver's parameters and the resolved kernel in
``params_used.kernel``; version 3 keeps them in ``placement`` and
``fit_kernel``. Version 4 adds ``checkpoint`` (`CheckpointRef`: the pass and
digest of the checkpoint a completed fit serves from); a completed record of
version 3 names its ``progress.pass``, digest unknown.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, PlainValidator, WithJsonSchema

from kpca import defaults
from kpca.kernels import KERNEL_ALIASES, KERNELS, KernelSpec
from kpca.solvers import SOLVERS
from store.datasets.records import DatasetInfo
from store.errors import Conflict, Invalid, NotFound

MODEL_SCHEMA_VERSION = 4
STATUSES = ("queued", "running", "completed", "failed", "cancelled")
ACTIVE = ("queued", "running")
TERMINAL = ("completed", "failed", "cancelled")

Status = Literal["queued", "running", "completed", "failed", "cancelled"]
ParamValue = int | float | str | bool | None


class _Document(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


def _kernel_spec(value: Any) -> KernelSpec:
    if isinstance(value, KernelSpec):
        return value
    if isinstance(value, Mapping):
        key = _spec_key(value)
        return KernelSpec.from_dict(value) if key is None else _known_spec(key)
    raise ValueError(f'kernel: expected an object such as {{"type": "gaussian", "sigma": 3.0}}, got {value!r}')


_SCALARS = (str, int, float, bool, type(None))


def _spec_key(value: Mapping) -> tuple | None:
    """A hashable key of a kernel's JSON object whose values are all scalars, each with its type (``1``,
    ``1.0`` and ``True`` are equal keys in Python but not the same parameter); None otherwise. O(size)."""
    if len(value) > 16 or not all(isinstance(k, str) and type(v) in _SCALARS for k, v in value.items()):
        return None
    return tuple(sorted((k, type(v).__name__, v) for k, v in value.items()))


@functools.lru_cache(maxsize=256)
def _known_spec(key: tuple) -> KernelSpec:
    """`KernelSpec.from_dict` of the object `_spec_key` made ``key`` of, kept: every record read (each
    `/project` reads the model's twice) checked the same kernel against the table again. A `KernelSpec` is
    immutable, so one is shared; a refused object raises each time (errors are not kept). O(1) when kept."""
    return KernelSpec.from_dict({k: v for k, _type, v in key})


def kernel_json_schema() -> dict:
    """The JSON schema of a kernel: one object per kernel of `kpca.kernels.KERNELS` (and per alias), its type and
    parameters (widths may be ``"auto"``). Cost O(kernels)."""
    variants = []
    for kernel in KERNELS.values():
        properties: dict[str, dict] = {"type": {"const": kernel.name}}
        properties.update({p.name: p.json_schema() for p in kernel.params})
        required = ["type", *(p.name for p in kernel.params if p.required)]
        variants.append({"type": "object", "title": f"{kernel.name} kernel",
                         "description": f"k(x, y) = {kernel.formula}", "properties": properties,
                         "required": required, "additionalProperties": False})
    for alias, (target, _read) in KERNEL_ALIASES.items():
        properties = {"type": {"const": alias}, **{p.name: p.json_schema() for p in KERNELS[target].params},
                      "gamma": {"type": "number", "exclusiveMinimum": 0, "description": "sigma = 1 / sqrt(2 gamma)"}}
        variants.append({"type": "object", "title": f"{alias} kernel", "description": f"scikit-learn's name for the "
                         f"{target} kernel, stored as {target}; give sigma or gamma, not both",
                         "properties": properties, "required": ["type"], "additionalProperties": False})
    return {"oneOf": variants, "description": "the kernel: its type and parameters",
            "examples": [{"type": "gaussian", "sigma": 3.0}]}


KernelField = Annotated[KernelSpec, PlainValidator(_kernel_spec), PlainSerializer(KernelSpec.to_dict, return_type=dict),
                        WithJsonSchema(kernel_json_schema())]
"""A kernel field of a document: a `kpca.kernels.KernelSpec` in Python, ``{"type", parameters}`` in JSON
(checked against `kpca.kernels.KERNELS` when read: a `kpca.params.ParamError` naming ``kernel.<param>``)."""


class Placement(_Document):
    """Where a job runs: settings of the job, not of its solver."""

    workers: int | Literal["all"] | None = Field(
        default=None, description="dask workers a KHA-family fit is sharded over, as asked: an integer, \"all\", "
                                  "or None (all when the data set has at least KPCA_SHARD_MIN_ROWS rows, else 1)")
    exact_limit: int = Field(default=defaults.EXACT_LIMIT, description="largest l whose l x l kernel matrix the job "
                                                                       "may form (dense solvers, the exact figure)")
    device: Literal["auto", "cpu", "gpu"] = Field(default="auto", description="where the fit's full passes run: a "
                                                  "CUDA GPU (gpu; auto where one is visible to the worker) or the "
                                                  "worker's cores (cpu)")


class Convergence(_Document):
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


class CheckpointRef(_Document):
    """The checkpoint a completed fit serves from: its pass and its checkpoint digest
    (`store.jobs.checkpoint_format`; None for a record migrated from before digests were kept)."""

    pass_: int = Field(alias="pass", description="the pass whose checkpoint the job completed with")
    sha256: str | None = Field(default=None, description="that checkpoint's digest; None: not known (a record "
                               "completed before checkpoints had digests)")


class JobRecord(_Document):
    """What every job records (a model's fit, a clustering; module docstring): the data set, kernel,
    solver and parameters asked for, and the state of the fit the worker writes. A kind of job
    subclasses it with what it asks for besides (`ModelRecord.n_components`) and names itself
    (``kind``, ``route``) in the messages of `resumed`. Every kind has ``n_components``, the components
    its solver fits (a field of a model, a property of a clustering)."""

    # frozen: the registry gives one record read to every reader (`store.jobs.registry._KEPT`)
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    kind: ClassVar[str] = "job"
    route: ClassVar[str] = "/v1/jobs"

    schema_version: int = Field(default=MODEL_SCHEMA_VERSION, description="version of this record's layout")
    name: str = Field(description="the job's name, unique among its kind")
    dataset: str = Field(description="the data set the job is fit on")
    dataset_version: int | None = Field(default=None, description="data set version the job is fit on")
    dataset_checksum: str | None = Field(default=None, description="checksum of the data set when the fit was asked")
    n_features: int | None = Field(default=None, description="columns of the data set the job is fit on")
    kernel: KernelField = Field(description="kernel type and parameters, as asked")
    fit_kernel: KernelField | None = Field(default=None, description="the kernel the fit uses: \"auto\" widths "
                                           "resolved from the data when the fit first starts; None before")
    solver: str = Field(description="a solver of GET /v1/solvers")
    params: dict[str, ParamValue] = Field(default_factory=dict, description="solver parameters as requested")
    placement: Placement = Field(default_factory=Placement, description="where the job runs")
    checkpoint_keep: int = Field(default=defaults.CHECKPOINT_KEEP, description="checkpoints kept (plus the best)")
    status: Status = Field(default="queued", description="queued | running | completed | failed | cancelled")
    progress: Progress | None = Field(default=None, description="where the fit stands after its latest "
                                      "pass; None before the first pass")
    history: list[PassRecord] = Field(default_factory=list, description="one record per completed pass")
    error: FitError | None = Field(default=None, description="why the fit failed; None unless status is failed")
    params_used: dict[str, Any] | None = Field(
        default=None, description="every parameter's value in the fit, defaults resolved")
    stopped_early: bool | None = Field(default=None, description="the fit met params.tol before all passes")
    warnings: list[str] = Field(default_factory=list, description="what a user should know of a completed fit")
    best_checkpoint: BestCheckpoint | None = Field(default=None, description="the checkpoint with the lowest "
                                                   "convergence figure; None before the first")
    checkpoint: CheckpointRef | None = Field(default=None, description="the checkpoint a completed fit serves "
                                             "from; a missing or damaged one is a 409 corrupt. None until the fit "
                                             "completes")
    created_at: str | None = Field(default=None, description="when the job was created (ISO 8601, UTC)")
    updated_at: str | None = Field(default=None, description="when the record last changed (ISO 8601, UTC)")
    owner: str | None = Field(default=None, description="id of the API key that created the job (None: no keys)")

    if TYPE_CHECKING:
        # Every kind has it (the docstring above), declared here for the type checker only: a property of
        # this class would shadow `ModelRecord`'s field at run time.
        @property
        def n_components(self) -> int: ...

    def document(self) -> dict:
        """The document stored on disk (aliases such as ``pass``), as plain Python values: writing it
        (`store.atomic.dump_json`) refuses NaN and infinities wherever they are. Cost O(record size)."""
        return self.model_dump(by_alias=True)

    @property
    def passes(self) -> int:
        """Passes the fit runs: ``params.passes``, else the solver's declared default."""
        if "passes" in self.params:
            return int(cast(int, self.params["passes"]))
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

    def resumed(self, passes: int | None, dataset_version: int | None = None, versions: Sequence[int] = (),
                back_to: int | None = None) -> dict:
        """The fields a resume sets: status ``queued``, the new total ``params.passes`` and
        ``dataset_version``; `Conflict` / `Invalid` naming the field when the resume makes no sense.

        ``passes`` is the new total (not a number of further passes); without
        it a resume on a newer ``dataset_version`` runs the job's passes
        again over the grown data, and a resume of an unfinished fit runs to
        the passes it had. ``versions`` are the data set's committed versions.
        ``back_to``: the pass of the last intact checkpoint when the checkpoint
        the job completed with is damaged
        (`store.jobs.checkpoints.CheckpointStore.damaged_back_to`; None: intact):
        the passes after it count as not done, so a plain resume runs them again
        (to the same total), and a job fit in one go is fit again. Cost O(1).
        """
        kind = self.kind
        if self.status in ACTIVE:
            raise Conflict(f"{kind} {self.name!r} is already {self.status}", field="name")
        solver = SOLVERS.get(self.solver)
        if solver is not None and not solver.iterative and back_to is not None:
            return {"status": "queued", "error": None, "stopped_early": None, "checkpoint": None}  # fit again
        if solver is None or not solver.iterative:
            raise Conflict(f"a {self.solver} {kind} is fit in one go and has nothing to resume; fit a new {kind} "
                           "instead", field="name")
        done = self.passes_done if back_to is None else min(back_to, self.passes_done)
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
                "error": None, "stopped_early": None, "checkpoint": None}


class ModelRecord(JobRecord):
    """A model: its configuration and its fit's state (module docstring)."""

    kind: ClassVar[str] = "model"
    route: ClassVar[str] = "/v1/models"

    n_components: int = Field(ge=1, description="number of components r")

    @classmethod
    def new(cls, name: str, dataset: DatasetInfo, *, kernel: KernelSpec, n_components: int, solver: str,
            params: dict, placement: Placement | None = None,
            checkpoint_keep: int = defaults.CHECKPOINT_KEEP) -> ModelRecord:
        """A ``queued`` record for a fit on ``dataset`` (its public metadata, `store.DatasetStore.get`), the
        request's fields already checked (`service`); ``placement`` default: `Placement` (any workers, the
        default exact limit). Cost O(1)."""
        return cls(name=name, **dataset_fields(dataset), kernel=kernel, n_components=n_components, solver=solver,
                   params=params, placement=placement or Placement(), checkpoint_keep=checkpoint_keep)

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


def dataset_fields(dataset: DatasetInfo) -> dict:
    """The fields a job record takes from its data set's public metadata (`store.DatasetStore.get`)."""
    return {"dataset": dataset.name, "dataset_version": dataset.version, "dataset_checksum": dataset.checksum,
            "n_features": dataset.n_features}


def migrate(doc: dict) -> dict:
    """A stored record document brought to `MODEL_SCHEMA_VERSION` (module docstring). Cost O(size)."""
    doc = dict(doc)
    if doc.get("schema_version", 1) < 2:
        solver = SOLVERS.get(doc.get("solver") or "")
        params = {k: v for k, v in (doc.get("params") or {}).items() if v is not None}
        if solver is not None:
            params = {k: v for k, v in params.items() if solver.param(k) is not None}
        doc["params"] = params
        if isinstance(doc.get("error"), str):
            doc["error"] = {"code": "internal", "message": doc["error"]}
        doc["schema_version"] = 2
    if doc["schema_version"] < 3:
        doc = migrate_placement(doc, 3)
    if doc["schema_version"] < 4:
        doc = migrate_checkpoint(doc, 4)
    return doc


def migrate_checkpoint(doc: dict, version: int) -> dict:
    """A record of a version before job records named their checkpoint (models of version 3, clusterings
    of version 2) brought to ``version``: a completed job names the pass it completed with (its
    ``progress.pass``, the last checkpoint it wrote), digest unknown. Cost O(1)."""
    progress = doc.get("progress") or {}
    checkpoint = None
    if doc.get("status") == "completed" and isinstance(progress.get("pass"), int):
        checkpoint = {"pass": progress["pass"], "sha256": None}
    return {**doc, "checkpoint": checkpoint, "schema_version": version}


def migrate_placement(doc: dict, version: int) -> dict:
    """A record of a version that kept ``params.workers`` and ``exact_limit`` beside the solver's
    parameters and the resolved kernel in ``params_used.kernel`` (models of version 2, clusterings of
    version 1), brought to ``version``: ``placement``, ``fit_kernel``. Cost O(size)."""
    params = dict(doc.get("params") or {})
    placement = {"workers": params.pop("workers", None)}
    if doc.get("exact_limit") is not None:
        placement["exact_limit"] = doc.pop("exact_limit")
    used = doc.get("params_used")
    if used is not None:
        used = dict(used)
        doc["fit_kernel"] = used.pop("kernel", None)
        for key in ("workers", "exact_limit"):
            used.pop(key, None)
    if doc.get("fit_kernel") is None and doc.get("status") == "completed":  # completed before it was reported
        doc["fit_kernel"] = doc.get("kernel")
    return {**doc, "params": params, "params_used": used, "placement": placement, "schema_version": version}
