"""The fit on a dask worker: any solver of the registry, checkpointed, resumable, reported pass by pass.

`run_fit` is the task the service submits for a model; `FitJob` is the
driver every kind of job shares (`workers.cluster` runs clusterings with it).
It takes the model's *fit lease* (an flock the kernel releases if the process
dies, so at most one live runner per model), reads the model record
(`store.jobs.records.ModelRecord`) and the data set version from `store/`,
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

import logging
import time
import traceback
from pathlib import Path

import numpy as np

from kpca._threads import tile_threads
from kpca._tiles import thread_niceness
from kpca.array_rows import ArrayRows, namespace
from kpca.driver import PassHooks
from kpca.errors import Degenerate
from kpca.fitting import FitRequest, PreparedFit, prepare_fit
from kpca.params import ParamError
from kpca.rows import KernelRows
from kpca.solvers import Diverged, Iteration, SolverState, Stopped, as_state, get_solver
from store import ModelRegistry, NotFound
from store.atomic import disk_full
from store.errors import Corrupt, Damaged
from store.jobs.records import ACTIVE, Convergence, JobRecord, PassRecord, Progress
from store.jobs.registry import JobRegistry
from store.objects.interface import StoreRefused, StoreUnavailable
from store.places import Datasets, checkpoints_of, datasets_at, location, registry_at
from workers.placement import fit_threads, machine_cores, running_fits
from workers.priority import fit_nice, run_niced, thread_policy
from workers.progress import (
    ConvergenceFigure,
    FitFigure,
    ModelGone,
    PassReporter,
    completed_checkpoint,
    completion_warnings,
    save_while_present,
    still_ours,
)
from workers.settings import tune_store
from workers.sharded_fit import fit_sharded, shard_request

log = logging.getLogger(__name__)


def open_rows(datasets: Datasets, record: JobRecord, for_fit: bool = False) -> KernelRows:
    """Kernel rows over the model's committed data set version, with the kernel the fit uses
    (`ModelRecord.fit_kernel`, ``"auto"`` resolved once, at the fit's first start; before it, the
    kernel as asked, which `kpca.fitting.prepare_fit` resolves), float64, a fit's on the GPU its
    placement names (`kpca.array_rows`; ``placement.device``). `kpca.fitting.prepare_fit` sets a fit's
    resolved ``kernel_precision`` on them, so that with float32 the solver's GEMMs against them run in
    float32 too (`kpca.solvers._blocked`, *Precision*)."""
    source = datasets.open_array(record.dataset, record.dataset_version)
    kernel = record.fit_kernel or record.kernel
    xp = namespace(record.placement.device) if for_fit else None
    return KernelRows(source, kernel) if xp is None else ArrayRows(source, kernel, xp)


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
        self.root = location(data_dir)  # a folder's path or an object store's URL (`store.places`)
        tune_store(self.root)  # an object store's lease time and read cache: this worker's settings
        self.registry = registry_at(self.registry_type, self.root)
        self.datasets = datasets_at(self.root)
        self.checkpoints = checkpoints_of(self.registry)

    def open_rows(self, record: JobRecord) -> KernelRows:
        """The rows the solver runs on: the centred kernel rows of the record's data set version."""
        return open_rows(self.datasets, record, for_fit=True)

    def check_data(self, record: JobRecord, rows: KernelRows) -> None:
        """What the kind of job checks of its data besides its solver's parameters
        (`kpca.fitting.prepare_fit` checks those), before any pass: `kpca.params.ParamError` naming the
        field. Nothing by default."""

    def prepare(self, record: JobRecord, rows: KernelRows, resume: SolverState | None = None,
                **options) -> PreparedFit:
        """The record's fit prepared over ``rows`` (`kpca.fitting.prepare_fit`, ``options`` passed on),
        after this kind's own `check_data`. ``rows.kernel`` is then the kernel the fit uses,
        ``"auto"`` resolved: the caller's first write to the record sets it as ``fit_kernel``, so that
        every later run and every server uses that one."""
        self.check_data(record, rows)
        return prepare_fit(rows, self.request(record), resume=resume, **options)

    def request(self, record: JobRecord) -> FitRequest:
        """The fit the record asks for (`kpca.fitting.FitRequest`). O(parameters)."""
        return FitRequest(record.solver, record.n_components, record.params, record.placement.exact_limit)

    def figure(self, record: JobRecord, rows: KernelRows) -> FitFigure:
        """The convergence figure of the record's fit over ``rows`` (`workers.progress.ConvergenceFigure`)."""
        return ConvergenceFigure(rows, record.n_components, record.placement.exact_limit)

    def restored(self, state: SolverState) -> SolverState:
        """A checkpoint's state as the passes continue from it (`annotate` may have added to it)."""
        return state

    def annotate(self, rows: KernelRows, state: SolverState) -> tuple[SolverState, dict]:
        """After each pass (and a one-shot fit): the state to checkpoint and the fields of the pass's
        record besides a model's (``pass_record``)."""
        return state, {}

    def finish(self, record: JobRecord, rows: KernelRows, state: SolverState) -> dict:
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
        except Damaged as exc:  # its record cannot be read: nothing to fit, nowhere to write (store.quarantine)
            log.warning("%s %s not fitted: %s", registry.kind, name, exc.message)
            return "corrupt"

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
        except (Corrupt, Damaged) as exc:  # stored rows or documents damaged; the message says what to do
            registry.update(name, status="failed", error={"code": "corrupt", "message": exc.message})
        except ParamError as exc:  # a parameter the data refuses, found only now (the data set changed)
            registry.update(name, status="failed", error={"code": "invalid", "message": str(exc)})
        except StoreUnavailable:
            # the object store did not answer through its retries: the record cannot be written either. It stays
            # running; once its lease expires the API's watchdog resubmits the fit, which resumes from its last
            # checkpoint (docs/scaling.md, *An object store instead of a shared folder*)
            raise
        except StoreRefused as exc:  # a quota or a policy: the last checkpoint is intact (objects are put whole)
            registry.update(name, status="failed", error={
                "code": "insufficient_storage",
                "message": f"the object store refused a write ({exc}); raise its quota or free space, then resume: "
                           f"POST {record.route}/{name}/resume"})
            return "failed"
        except Exception as exc:  # the record must say why, whatever happened
            if disk_full(exc):  # the last checkpoint is intact (atomic writes): a resume continues from it
                registry.update(name, status="failed", error={
                    "code": "insufficient_storage",
                    "message": f"no space left on the data folder's disk ({exc}); free space (delete data sets, "
                               f"models or old checkpoints), then resume: POST {record.route}/{name}/resume"})
                return "failed"
            log.error("fit %s failed:\n%s", name, traceback.format_exc())
            registry.update(name, status="failed", error={
                "code": "internal",
                "message": f"{type(exc).__name__}: {exc}. The last checkpoint is kept; "
                           f"POST {record.route}/{name}/resume may continue, or report this error."})
        return "failed"


def run_fit(data_dir: str, model_name: str) -> str:
    """Fit (or resume) the named model (`FitJob.run`) at the fits' lowered priority
    (`workers.priority.fit_nice`); returns its final status."""
    return run_niced(FitJob(data_dir).run, model_name, nice=fit_nice())


def _fit(job: FitJob, record: JobRecord) -> str:
    """Run the fit: sharded over several workers (`workers.sharded_fit`), or on this one with its kernel
    tiles on every core when no other fit runs, its share of them when others do (`fit_threads`)."""
    job.registry.update(record.name, status="running", error=None)
    rows = job.open_rows(record)
    iterative = get_solver(record.solver).iterative
    shards = shard_request(job, record, rows) if iterative else None
    if shards is not None:
        return fit_sharded(job, record, rows, *shards)
    threads = fit_threads(machine_cores(), running_fits(job.root))
    log.info("%s %s: kernel tiles on %d thread(s) at niceness %d, %s policy", job.registry.kind, record.name,
             threads, thread_niceness(), thread_policy())
    with tile_threads(threads):
        if not iterative:
            return _fit_once(job, record, rows, job.prepare(record, rows))
        return _fit_passes(job, record, rows)


def _fit_passes(job: FitJob, record: JobRecord, rows: KernelRows) -> str:
    registry, checkpoints, name = job.registry, job.checkpoints, record.name
    latest = checkpoints.latest_intact(name)  # a damaged later checkpoint is skipped: resume from the last good one
    # a checkpoint's entries, read as its solver's state (`kpca.solvers.as_state`: any written since the
    # state had a record type, and those written before, as plain dicts with the same keys)
    resume = None if latest is None else job.restored(as_state(checkpoints.load(name, latest)))
    prepared = job.prepare(record, rows, resume)
    if prepared.state is None:  # `_fit` sends only iterative solvers here, and prepare_fit gives them a state
        raise RuntimeError(f"the {record.solver} fit was prepared without the state its passes start from")
    history = [] if prepared.started else record.history[: int(prepared.state.pass_)]
    report = PassReporter(job, record, rows, job.figure(record, rows), prepared, history)

    def should_stop() -> bool:
        return report.stop_early or registry.cancel_requested(name)

    registry.update(name, params_used=prepared.used(prepared.state), fit_kernel=rows.kernel)
    state, stopped = prepared.run(rows, PassHooks(on_pass=report, should_stop=should_stop), passes=record.passes)
    if stopped and not report.stop_early:
        registry.update(name, status="cancelled")
        return "cancelled"
    return complete(job, record, rows, state, report)


def complete(job: FitJob, record: JobRecord, rows: KernelRows, state: SolverState, report: PassReporter) -> str:
    """The record of a fit whose passes are over: ``completed``, with its warnings and what the job adds
    (`FitJob.finish`); a state no pass of this run recorded is reported first (`PassReporter.settle`)."""
    report.settle(state)
    warnings = completion_warnings(rows, state) + report.prepared.notes(state, rows)
    stopped_early = report.stop_early or bool(state.converged)
    job.registry.update(record.name, status="completed", stopped_early=stopped_early,
                        warnings=warnings, **job.finish(record, rows, state),
                        **completed_checkpoint(job.checkpoints, record.name))
    return "completed"


def _fit_once(job: FitJob, record: JobRecord, rows: KernelRows, prepared: PreparedFit) -> str:
    """A one-shot fit; one progress and history record per iteration it reports (an eigensolver's), and
    a final one with the convergence figure; a cancel request stops it between iterations."""
    registry = job.registry
    started = time.monotonic()
    used = prepared.used(None)
    history: list[PassRecord] = []

    def report(it: Iteration) -> bool:
        elapsed = time.monotonic() - started
        lam = np.asarray(it.eigenvalues, dtype=np.float64).tolist()
        convergence = Convergence(metric=it.metric, value=it.value)
        history.append(job.pass_record(pass_=it.iteration, elapsed_s=elapsed, convergence=convergence,
                                       eigenvalues=lam))
        remaining = elapsed / it.iteration * max(it.iterations - it.iteration, 0)
        still_ours(registry, record)
        registry.update(record.name, params_used=used, fit_kernel=rows.kernel, history=history, progress=Progress(
            pass_=it.iteration, passes=it.iterations, t=0, fraction=min(it.iteration / it.iterations, 1.0),
            elapsed_s=elapsed, remaining_s=remaining, eigenvalues=lam, convergence=convergence))
        return registry.cancel_requested(record.name)

    try:
        state, _ = prepared.run(rows, report=report)
    except Stopped:
        registry.update(record.name, status="cancelled")
        return "cancelled"
    used = prepared.used(state)  # with what the fit settled on from the data (a number of centres)
    done = len(history) + 1
    state = state.replace(pass_=done)
    convergence, eigenvalues = job.figure(record, rows)(rows, state)
    if convergence.metric == "eigenvalue_change":  # no previous pass to compare with
        convergence = Convergence(metric=convergence.metric, value=None)
    saved, fields = job.annotate(rows, state)
    still_ours(registry, record)
    save_while_present(job, record.name, done, saved)
    elapsed = time.monotonic() - started
    progress = Progress(pass_=done, passes=done, t=0, fraction=1.0, elapsed_s=elapsed, remaining_s=0.0,
                        eigenvalues=eigenvalues.tolist(), gains=None, convergence=convergence)
    history.append(job.pass_record(pass_=done, elapsed_s=elapsed, convergence=convergence,
                                   eigenvalues=eigenvalues.tolist(), **fields))
    warnings = completion_warnings(rows, state)
    registry.update(record.name, status="completed", progress=progress, history=history, params_used=used,
                    fit_kernel=rows.kernel, warnings=warnings, **job.finish(record, rows, state),
                    **completed_checkpoint(job.checkpoints, record.name))
    return "completed"
