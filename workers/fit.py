"""The fit on a dask worker: any solver of the registry, checkpointed, resumable, reported pass by pass.

`run_fit` is the task the service submits for a model; `FitJob` is the
driver every kind of job shares (`workers.cluster` runs clusterings with it).
It takes the model's *fit lease* (an flock the kernel releases if the process
dies, so at most one live runner per model), reads the model record
(`store.records.ModelRecord`) and the data set version from `store/`,
streams kernel rows from the zarr chunks
(`kpca.rows.KernelRows`) and runs the record's solver (`kpca.solvers.SOLVERS`):

* an iterative solver through `kpca.driver.run_passes`, writing a
  checkpoint (the solver state, which carries its centring) and a progress
  record after every pass (`workers.progress.PassReporter`). If checkpoints
  exist it resumes from the latest one, so a fit restarted after a crash
  continues where it stopped and, with the same seed, ends in the same
  state as an uninterrupted run. If the model's data set version grew since
  the checkpoint (rows were appended), the state is extended to the new
  rows (`kpca.streaming`) and the passes continue;
* a one-shot solver in one call, saved as checkpoint 1.

Every outcome is written to the record: ``completed``, ``cancelled`` (after a
cancel request, last checkpoint kept) or ``failed`` with an ``error`` a user
can act on.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import traceback
from pathlib import Path

import numpy as np

from kpca.driver import PassHooks, run_passes
from kpca.errors import Degenerate
from kpca.kernels import KernelSpec
from kpca.params import ParamError
from kpca.rows import Centering, KernelRows
from kpca.solvers import Diverged, FitContext, Iteration, Stopped, get_solver, used_params
from kpca.streaming import extend_state
from store import CheckpointStore, DatasetStore, ModelRegistry, NotFound
from store.errors import Corrupt
from store.jobs import JobRegistry
from store.records import ACTIVE, Convergence, JobRecord, ModelRecord, PassRecord, Progress
from workers.progress import (ConvergenceFigure, ModelGone, PassReporter, completion_warnings, params_used_of,
                              still_ours)
from workers.sharded_fit import fit_sharded, shard_request

log = logging.getLogger(__name__)


def open_rows(datasets: DatasetStore, record: ModelRecord, for_fit: bool = False) -> KernelRows:
    """Kernel rows over the model's committed data set version, with the kernel the fit used
    (`ModelRecord.fit_kernel`: ``"auto"`` resolved once, at the fit's start), computed by kernel tiles
    in the fit's ``kernel_precision`` (float64 unless the fit asked for float32). Rows for serving
    are float64; a fit's rows are in the kernel precision itself, so that with float32 the solver's
    GEMMs against them run in float32 too (`kpca.solvers._blocked`, *Precision*)."""
    source = datasets.open_array(record.dataset, record.dataset_version)
    precision = np.dtype(record.params.get("kernel_precision") or "float64")
    return KernelRows(source, KernelSpec.from_dict(record.fit_kernel), dtype=precision if for_fit else np.float64,
                      compute_dtype=precision)


class FitJob:
    """One kind of job as the fit driver runs it; this class runs a model's fit.

    The driver (`run`) is the same for every kind: the lease, the record's
    status, the start or the resume from the latest checkpoint, the passes
    (`kpca.driver.run_passes`, reported by `workers.progress.PassReporter`) or
    the one-shot fit, cancel, and the errors a user can act on. A kind of job
    subclasses it (`workers.cluster.ClusteringJob`) to name its registry and
    pass records and to say what it adds: the rows it fits on (`open_rows`),
    its own checks (`check`), what a checkpoint holds besides the solver's
    state (`restored`, `annotate`) and what the end writes (`finish`). One
    instance runs one job once.
    """

    registry_type: type[JobRegistry] = ModelRegistry
    shardable = True  # a KHA-family fit may run over several workers (`workers.sharded_fit`)
    pass_record: type[PassRecord] = PassRecord

    def __init__(self, data_dir: str | Path):
        root = Path(data_dir)
        self.registry = self.registry_type(root)
        self.datasets = DatasetStore(root)
        self.checkpoints = CheckpointStore.of(self.registry)

    def open_rows(self, record: JobRecord) -> KernelRows:
        """The rows the solver runs on: the centred kernel rows of the record's data set version."""
        return open_rows(self.datasets, record, for_fit=True)

    def check(self, record: JobRecord, context: FitContext) -> None:
        """`kpca.params.ParamError` if the data (``context``) refuses the record's parameters."""
        get_solver(record.solver).check(record.params, context)

    def restored(self, state: dict) -> dict:
        """A checkpoint's state as the passes continue from it (`annotate` may have added to it)."""
        return state

    def annotate(self, rows: KernelRows, state: dict) -> tuple[dict, dict]:
        """After each pass (and a one-shot fit): the state to checkpoint and the fields of the pass's
        record besides a model's (``pass_record``)."""
        return state, {}

    def finish(self, record: JobRecord, rows: KernelRows, state: dict) -> dict:
        """Before the record says ``completed``: write what the result needs; the record's fields to set."""
        return {}

    def run(self, name: str) -> str:
        """Fit (or resume) job ``name``; returns its final status.

        Returns at once (writing nothing) if another live process holds the
        lease, or if the record is not queued or running.
        """
        registry = self.registry
        try:
            with registry.fit_lease(name) as ours:
                if not ours:
                    return "already-running"
                record = registry.get(name)
                if record.status not in ACTIVE:
                    return record.status
                if registry.cancel_requested(name):
                    registry.update(name, status="cancelled")
                    return "cancelled"
                return self._guarded(record)
        except (NotFound, ModelGone):
            log.info("%s %s was deleted or replaced during its fit; stopped", registry.kind, name)
            return "deleted"

    def _guarded(self, record: JobRecord) -> str:
        name, registry = record.name, self.registry
        try:
            return _fit(self, record)
        except (ModelGone, NotFound):
            raise
        except Diverged as exc:
            registry.update(name, status="failed", error={"code": "diverged", "message": str(exc)})
        except Degenerate as exc:
            registry.update(name, status="failed", error={"code": "degenerate", "message": str(exc)})
        except Corrupt as exc:  # stored rows failed their digest: the set is marked; the message says what to do
            registry.update(name, status="failed", error={"code": "corrupt", "message": exc.message})
        except ParamError as exc:  # a parameter the data refuses, found only now (the data set changed)
            registry.update(name, status="failed", error={"code": "invalid", "message": str(exc)})
        except Exception as exc:  # the record must say why, whatever happened
            log.error("fit %s failed:\n%s", name, traceback.format_exc())
            registry.update(name, status="failed", error={
                "code": "internal",
                "message": f"{type(exc).__name__}: {exc}. The last checkpoint is kept; "
                           f"POST {record.route}/{name}/resume may continue, or report this error."})
        return "failed"


def run_fit(data_dir: str, model_name: str) -> str:
    """Fit (or resume) the named model (`FitJob.run`); returns its final status."""
    return FitJob(data_dir).run(model_name)


def _fit(job: FitJob, record: JobRecord) -> str:
    registry, checkpoints = job.registry, job.checkpoints
    solver = get_solver(record.solver)
    registry.update(record.name, status="running", error=None)
    rows = job.open_rows(record)
    context = FitContext(n_rows=rows.n_rows, n_components=record.n_components, dense_limit=record.exact_limit,
                         kernel=rows.kernel)
    job.check(record, context)  # before any pass over the data
    if rows.kernel.unresolved:  # the first run of this fit: resolve "auto" from the data, once
        registry.update(record.name, params_used={"kernel": rows.resolve_kernel().to_dict()})
    if not solver.iterative:
        return _fit_once(job, solver, record, rows, context)
    shards = shard_request(job, record, rows)
    if shards is not None:
        return fit_sharded(job, record, rows, context, *shards)

    name = record.name
    latest = checkpoints.latest_pass(name)
    grown = False
    if latest is not None:
        state = job.restored(checkpoints.load(name, latest))
        history = record.history[: int(state["pass"])]
        if int(state["n_rows"]) != rows.n_rows:  # rows were appended: continue on the new version
            state, _ = extend_state(state, Centering.from_state(state), rows)
            grown = True
        else:
            rows.restore_centering(state)
    else:
        rows.fit_centering().require_variance()
        state, history = None, []
    given = dict(record.params)
    if grown:  # the state fits the old rows only: the gains of a start that knows nothing of the new ones
        given["init"] = "random"
    elif state is not None:  # resolve as for the start the state had (a warm start's subset size)
        given.update({k: state[k] for k in ("init", "init_size") if k in state})
    params = solver.resolved(given, dataclasses.replace(context, mean_diagonal=rows.centering.mean_diagonal))
    if state is None:
        state = dict(solver.start(rows, record.n_components, params), elapsed_s=0.0)
    elif grown:
        state = solver.regain(state, params)

    def params_used(state: dict) -> dict:
        return params_used_of(params, rows, record, state, workers=1 if "workers" in params else None)

    registry.update(name, params_used=params_used(state))
    report = PassReporter(job, record, rows, ConvergenceFigure(rows, record.n_components, record.exact_limit, record.components_field),
                          params_used, history, state)

    def should_stop() -> bool:
        return report.stop_early or registry.cancel_requested(name)

    state, stopped = run_passes(rows, state, record.passes, params["block_size"],
                                PassHooks(on_pass=report, should_stop=should_stop))
    if stopped and not report.stop_early:
        registry.update(name, status="cancelled")
        return "cancelled"
    warnings = completion_warnings(rows, state)
    registry.update(name, status="completed", stopped_early=report.stop_early, warnings=warnings,
                    **job.finish(record, rows, state))
    return "completed"


def _fit_once(job: FitJob, solver, record: JobRecord, rows: KernelRows, context: FitContext) -> str:
    """A one-shot fit; one progress and history record per iteration it reports (an eigensolver's), and
    a final one with the convergence figure; a cancel request stops it between iterations."""
    registry = job.registry
    started = time.monotonic()
    params = solver.resolved(record.params, context)
    used = {**params, "kernel": rows.kernel.to_dict(), "exact_limit": record.exact_limit, "n_rows": rows.n_rows}
    history: list[PassRecord] = []

    def report(it: Iteration) -> bool:
        elapsed = time.monotonic() - started
        lam = np.asarray(it.eigenvalues, dtype=np.float64).tolist()
        convergence = Convergence(metric=it.metric, value=it.value)
        history.append(job.pass_record(pass_=it.iteration, elapsed_s=elapsed, convergence=convergence,
                                       eigenvalues=lam))
        remaining = elapsed / it.iteration * max(it.iterations - it.iteration, 0)
        still_ours(registry, record)
        registry.update(record.name, params_used=used, history=history, progress=Progress(
            pass_=it.iteration, passes=it.iterations, t=0, fraction=min(it.iteration / it.iterations, 1.0),
            elapsed_s=elapsed, remaining_s=remaining, eigenvalues=lam, convergence=convergence))
        return registry.cancel_requested(record.name)

    try:
        state = solver.fit(rows, record.n_components, params, dataclasses.replace(context, kernel=rows.kernel),
                           report=report)
    except Stopped:
        registry.update(record.name, status="cancelled")
        return "cancelled"
    used.update(used_params(state))  # what the fit settled on from the data (a number of centres)
    done = len(history) + 1
    state = dict(state, **{"pass": done})
    convergence, eigenvalues = ConvergenceFigure(rows, record.n_components, record.exact_limit, record.components_field)(rows, state)
    if convergence.metric == "eigenvalue_change":  # no previous pass to compare with
        convergence = Convergence(metric=convergence.metric, value=None)
    saved, fields = job.annotate(rows, state)
    still_ours(registry, record)
    job.checkpoints.save(record.name, done, saved)
    elapsed = time.monotonic() - started
    progress = Progress(pass_=done, passes=done, t=0, fraction=1.0, elapsed_s=elapsed, remaining_s=0.0,
                        eigenvalues=eigenvalues.tolist(), gains=None, convergence=convergence)
    history.append(job.pass_record(pass_=done, elapsed_s=elapsed, convergence=convergence,
                                   eigenvalues=eigenvalues.tolist(), **fields))
    warnings = completion_warnings(rows, state)
    registry.update(record.name, status="completed", progress=progress, history=history, params_used=used,
                    warnings=warnings, **job.finish(record, rows, state))
    return "completed"
