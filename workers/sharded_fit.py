"""A KHA-family fit sharded over several dask workers (docs/scaling.md): the fit task is the
coordinator; each worker holds a `workers.shards.ShardActor` with its rows' columns of the state.

The coordinator runs the same fit as `workers.fit` -- the lease, the record, progress pass by pass,
cancel, resume, the errors a user can act on -- with the passes of `kpca.sharded.passes.run_sharded_passes`.
What differs:

* the centring is a sharded pass (`kpca.sharded.passes.ShardedProducts`), which for the default Nystrom
  start also makes the start's extension to every row, as one process's does; the start is computed by
  the coordinator as in one process and sent to the shards (`kpca.sharded.passes.send_start`), or read by
  each shard from the checkpoint it resumes from;
* a checkpoint is a consistent cut: after a pass every shard writes its part (its columns, on its
  worker), then the coordinator writes the manifest with its own state
  (`store.CheckpointStore.save`, ``parts``); a cut without its manifest is never read;
* the convergence figure: where l is small enough for the exact figure the columns are gathered
  (l <= exact_limit); above, the Rayleigh-Ritz eigenvalues come from r x r reductions
  (`kpca.solvers._ritz.ritz_values`);
* a worker lost mid-fit (`workers.shards.ShardLost`): the shards are placed again on the workers that
  remain and the fit continues from the last consistent checkpoint (up to `MAX_LOSSES` times); with
  the same seed it ends where an uninterrupted fit ends (the reductions' order does not depend on the
  split, `kpca.sharded.passes.reduction_unit`).
"""

from __future__ import annotations

import logging

import numpy as np

from kpca.driver import PassHooks
from kpca.rows import KernelRows
from kpca.sampled_kernel import kernel_spread
from kpca.sharded.passes import (
    ShardedProducts,
    coordinator_state,
    join_state,
    reduction_unit,
    run_sharded_passes,
    send_start,
    unit_bounds,
)
from kpca.sharded.shards import STATE_COLUMNS, ShardGroup, state_rows
from kpca.solvers import KHAState, SolverState, as_state, get_solver
from kpca.solvers._rayleigh_ritz import GUARD_KEYS
from kpca.solvers._ritz import ritz_values
from store.jobs.records import Convergence, JobRecord
from workers.placement import running_fits, shard_count, shard_min_rows
from workers.progress import ConvergenceFigure, PassReporter, completed_checkpoint, completion_warnings, still_ours
from workers.shards import ActorGroup, ShardLost, fit_workers

log = logging.getLogger(__name__)

MAX_LOSSES = 3  # workers a fit may lose before it fails (resumable)


def shard_request(job, record: JobRecord, rows) -> tuple | None:
    """``(client, shards)`` if the fit should be sharded (more than one shard), else None: a model fit of a
    shardable solver (`kpca.solvers.Solver.shardable`) running on a dask worker, on the rows its
    checkpoints were made on (a data set grown since is extended in one process), with
    `workers.placement.shard_count` > 1 for ``placement.workers``."""
    requested = record.placement.workers
    if not getattr(job, "shardable", False) or not get_solver(record.solver).shardable or requested == 1 or \
            (requested is None and rows.n_rows < shard_min_rows()):
        return None
    from distributed import get_client, get_worker

    try:
        get_worker()
    except ValueError:  # not on a dask worker (a direct call): one process
        return None
    client = get_client()
    if job.checkpoints.latest_pass(record.name) is not None and \
            (record.params_used or {}).get("n_rows", rows.n_rows) != rows.n_rows:
        return None
    n = shard_count(requested, rows.n_rows, len(fit_workers(client)), shard_min_rows())
    return (client, n) if n > 1 else None


def fit_sharded(job, record: JobRecord, rows, client, shards: int) -> str:
    """Run job ``record`` sharded over ``shards`` workers (`_run`), starting over from the last
    consistent checkpoint on the remaining workers when one is lost. Returns the final status."""
    lost: set[str] = set()
    losses = 0
    while True:
        try:
            return _run(job, record, rows, client, shards, lost)
        except ShardLost as exc:
            lost.update(exc.addresses)
            losses += 1
            if losses > MAX_LOSSES:
                raise RuntimeError(f"the fit lost its shards {losses} times ({exc}); the last checkpoint is kept: "
                                   f"check the cluster, then POST {record.route}/{record.name}/resume") from exc
            log.warning("%s %s lost a worker (%s); continuing from its last checkpoint on the workers that remain",
                        job.registry.kind, record.name, exc)
            record = job.registry.get(record.name)
            still_ours(job.registry, record)


def _place(client, wanted: int, lost: set[str]) -> list[str]:
    """Up to ``wanted`` fit workers not known lost: this task's own worker first (its shard's calls
    stay in the process), then the others in address order."""
    from distributed import get_worker

    own = get_worker().address
    available = [a for a in fit_workers(client) if a not in lost]
    return ([own] if own in available else []) + [a for a in available if a != own][: wanted - (own in available)]


def _run(job, record: JobRecord, rows, client, shards: int, lost: set[str]) -> str:
    registry, checkpoints, name = job.registry, job.checkpoints, record.name
    r, l = record.n_components, rows.n_rows
    unit = reduction_unit(l)
    addresses = _place(client, shards, lost)
    bounds = unit_bounds(l, len(addresses), unit)
    rows.resolve_kernel()  # the shards compute their own kernel tiles: they need the widths first
    group = ActorGroup.start(client, addresses[: len(bounds)], bounds, data_dir=job.root,
                             dataset=record.dataset, version=record.dataset_version, kernel=rows.kernel,
                             precision=job.request(record).kernel_precision(l, kernel_spread=kernel_spread(rows)),
                             unit_rows=unit,
                             n_components=r, d=state_rows(r, record.solver), kind_folder=registry.kind_folder,
                             kind=registry.kind, running=running_fits(job.root), origin=rows.origin)
    try:
        latest = checkpoints.latest_intact(name)  # a damaged later checkpoint is skipped
        # the coordinator's entries and the centring; each shard reads its own columns of A, AK, B, BK
        resume = None if latest is None else job.restored(as_state(checkpoints.load(
            name, latest, without=STATE_COLUMNS + GUARD_KEYS)))
        # the start's extension pass runs over the shards too (ShardedProducts.times)
        prepared = job.prepare(record, ShardedProducts(rows, group), resume)  # its centring pass too
        if prepared.started:
            state, history = send_start(prepared.state, group), []
        else:
            group.load(name, latest, prepared.state)
            state = coordinator_state(prepared.state, group)
            history = record.history[: int(state.pass_)]

        def save(job_name: str, pass_index: int, coordinator: KHAState) -> None:
            group.save(job_name, pass_index)
            checkpoints.save(job_name, pass_index, coordinator.to_checkpoint(), parts=group.bounds)

        registry.update(name, params_used=prepared.used(state), fit_kernel=rows.kernel)
        figure = ShardedFigure(group, job.figure(record, rows))
        report = PassReporter(job, record, rows, figure, prepared, history, save=save, workers=len(group))

        def should_stop() -> bool:
            return report.stop_early or registry.cancel_requested(name)

        log.info("%s %s: %d passes sharded over %d workers (%s rows each)", registry.kind, name, record.passes,
                 len(group), [b - a for a, b in group.bounds])
        state, stopped = run_sharded_passes(state, group, record.passes, prepared.params["block_size"],
                                            PassHooks(on_pass=report, should_stop=should_stop),
                                            tol=prepared.params.get("tol"))
        if not stopped or report.stop_early:
            report.settle(state)  # while the shards are there to write their parts
    finally:
        group.close()
    if stopped and not report.stop_early:
        registry.update(name, status="cancelled")
        return "cancelled"
    final = as_state(checkpoints.load(name))  # the last pass's cut, joined from its parts (once, at the end)
    rows.restore_centering(final.centering)
    warnings = completion_warnings(rows, final) + prepared.notes(final, rows)
    registry.update(name, status="completed", stopped_early=report.stop_early or bool(state.converged),
                    warnings=warnings, **job.finish(record, rows, final), **completed_checkpoint(checkpoints, name))
    return "completed"


class ShardedFigure:
    """`workers.progress.ConvergenceFigure` of a sharded fit's coordinator state: the exact figure
    from the gathered columns where l is small enough for it, else the figure of one process above
    that limit (the residual of Rayleigh-Ritz passes, or the change of the Rayleigh-Ritz eigenvalues),
    the eigenvalues computed from r x r reductions (nothing l-sized is sent)."""

    def __init__(self, group: ShardGroup, figure: ConvergenceFigure):
        self.group, self.figure = group, figure

    def __call__(self, rows: KernelRows, state: SolverState) -> tuple[Convergence, np.ndarray]:
        if not isinstance(state, KHAState):  # the sharded passes are the KHA family's (`shard_request`)
            raise TypeError(f"a sharded fit's figure was handed a {type(state).__name__}, not a KHAState")
        if self.figure.Kc is not None:
            return self.figure(rows, join_state(state, self.group))
        eigenvalues = np.asarray(ritz_values(*self.group.grams(), *self.group.squared_norms()))
        return self.figure.without_matrix(state, eigenvalues), eigenvalues
