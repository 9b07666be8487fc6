"""What a fit reports after each pass: the convergence figure, the progress and history records,
and which checkpoints it keeps.

Convergence figure: where ``l <= exact_limit`` the exact optimum is
affordable and each pass reports the excess reconstruction error of seed 000
eq. 22 (``excess_error``, ``E/E_min - 1``) twice: ``value`` for the
components the model serves (what a projection gets) and ``iterate`` for the
solver's raw iterate, which is what the paper's figures plot. Where the data
spans exactly r directions in feature space ``E_min`` is 0 and the figure is
the ``relative_error`` ``E / ||K'||_F`` instead, and so where it spans fewer
than r (the components past its rank are served as zero rows of variance 0,
which the completed fit's ``warnings`` name). Above the limit, the figure is
the ``residual`` of the served components where the fit measured it (its
start and its Rayleigh-Ritz passes do, `kpca.solvers._rayleigh_ritz`: about the
square root of eq. 22's excess error), else the proxy ``eigenvalue_change``:
``max_i |lambda_i(p) - lambda_i(p-1)| / lambda_i(p)`` of the served
eigenvalue estimates between consecutive passes. A fit with Rayleigh-Ritz
passes stops once its residual is below ``params.tol`` (`kpca.driver.run_passes`);
one with stochastic passes and ``params.tol`` set completes early once
``value`` falls below it.

Checkpoint retention: the last ``checkpoint_keep`` and the best one (lowest
convergence figure) are kept.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from kpca._dense import eigvalsh
from kpca.metrics import excess_error, minimal_error, reconstruction_error
from kpca.model import KernelModel
from kpca.rows import KernelRows
from kpca.solvers import Diverged, IterativeState, SolverState, as_state, rank_warnings, served_model
from store import CheckpointStore, NotFound
from store.jobs.records import Convergence, JobRecord, PassRecord, Progress
from store.places import Registry


class ModelGone(Exception):
    """The record this fit works for (a model's, a clustering's) was deleted (or deleted and re-created)."""


# eigenvalues of K' below this fraction of the largest are rounding: the data's rank in feature space
RANK_RTOL = 1e-10
FIGURE_SAMPLE_ROWS = 1000  # rows a model with its own figure is measured on (a fixed-seed sample)


class FitFigure(Protocol):
    """What gives a pass's convergence figure and its eigenvalue estimates (`ConvergenceFigure`, a
    clustering's `workers.cluster.ClusteringFigure`, a sharded fit's `workers.sharded_fit.ShardedFigure`)."""

    def __call__(self, rows: KernelRows, state: SolverState, /) -> tuple[Convergence, np.ndarray]: ...


class ConvergenceFigure:
    """The convergence figure of successive served models: exact excess error when l is small enough,
    else the relative change of the eigenvalue estimates (module docstring).

    Cost O(l^2 n + l^3) once where l is small enough.
    """

    def __init__(self, rows: KernelRows, n_components: int, limit: int):
        self.Kc: np.ndarray | None = None  # K' where l <= limit (the exact figure), else None
        self.previous: np.ndarray | None = None  # the eigenvalue estimates of the last call
        if rows.n_rows <= limit:
            if rows.centering is None:  # a one-shot solver over centres does not centre the training data
                rows.fit_centering()
            self.Kc = rows.dense().astype(np.float64, copy=False)
            eigenvalues = eigvalsh(self.Kc)
            rank = int(np.sum(eigenvalues > RANK_RTOL * max(eigenvalues[-1], 0.0)))
            self.e_min = minimal_error(eigenvalues, n_components)
            self.metric = "excess_error" if rank > n_components else "relative_error"
            self.scale = float(np.linalg.norm(self.Kc))

    def _figure(self, Z: np.ndarray) -> float:
        """Eq. 22 for components with training images Z (r x l): excess or relative error."""
        if self.Kc is None:  # only `__call__` calls it, and only where l <= limit gave K'
            raise RuntimeError("the exact convergence figure needs K', which is kept only up to the exact limit")
        if self.metric == "excess_error":
            return excess_error(self.Kc, Z, self.e_min)
        return reconstruction_error(self.Kc, Z) / self.scale

    def __call__(self, rows: KernelRows, state: SolverState) -> tuple[Convergence, np.ndarray]:
        """The figure of the model ``state`` serves, and that model's eigenvalue estimates.

        Eq. 22 needs the components of the training points centred by their
        own mean: ``Z = A K'`` (r x l) for expansion models; for models over
        centres, whose projections are centred by the centres' mean, the
        projections of the training points minus their mean (W applied to
        ``Phi(x) - mu``). Cost O(r l^2) for the exact figure (plus a
        projection pass over centres), O(r) for the proxy.
        """
        state = as_state(state)  # a sharded fit's joined entries are read as the state
        model = served_model(state, rows)
        if not isinstance(model, KernelModel):  # a model with its own figure (autoencoder KPCA)
            metric, value = model.figure(np.asarray(rows.sample(FIGURE_SAMPLE_ROWS)))
            eigenvalues = np.asarray(model.eigenvalues if model.eigenvalues is not None else [], dtype=np.float64)
            return Convergence(metric=metric, value=value), eigenvalues
        eigenvalues = served_eigenvalues(model)
        if self.Kc is None:
            return self.without_matrix(state, eigenvalues), eigenvalues
        self.previous = eigenvalues
        if model.rows is rows:
            Z = model.AK
        else:
            Z = model.project(np.asarray(rows.source)).T
            Z -= Z.mean(axis=1, keepdims=True)
        iterate = self._figure(state.images) if state.images is not None and model.rows is rows else None
        return Convergence(metric=self.metric, value=self._figure(Z), iterate=iterate,
                           residual=state.residual), eigenvalues

    def without_matrix(self, state: SolverState, eigenvalues: np.ndarray) -> Convergence:
        """The figure above the exact limit: the relative residual the state's pass measured
        (Rayleigh-Ritz passes), else the eigenvalues' change since the last call (`proxy`). O(r)."""
        previous, self.previous = self.previous, eigenvalues
        residual = as_state(state).residual
        if residual is not None:
            return Convergence(metric="residual", value=float(residual), residual=residual)
        return self.proxy(eigenvalues, previous)

    def proxy(self, eigenvalues: np.ndarray, previous: np.ndarray | None) -> Convergence:
        """The ``eigenvalue_change`` figure between the served eigenvalues of consecutive passes. O(r)."""
        if previous is None:
            return Convergence(metric="eigenvalue_change", value=None)
        change = np.max(np.abs(eigenvalues - previous) / np.maximum(np.abs(eigenvalues), 1e-300))
        return Convergence(metric="eigenvalue_change", value=float(change))


def still_ours(registry: Registry, record: JobRecord) -> None:
    """Raise `ModelGone` unless the registry still holds the record this fit started from."""
    try:
        current = registry.get(record.name)
    except NotFound:
        raise ModelGone() from None
    if current.created_at != record.created_at:
        raise ModelGone()


class PassReporter:
    """After every pass: the progress and history records, the checkpoint, retention, early stop.

    Parameters
    ----------
    job : workers.fit.FitJob
        The job: its ``registry`` and ``checkpoints``, its ``pass_record`` type, and ``annotate(rows,
        state)``, which gives the state to checkpoint and the pass record's fields besides a model's.
    record : JobRecord
        The record the fit started from.
    rows : KernelRows
        The training rows (with their centring).
    figure : FitFigure
    prepared : kpca.fitting.PreparedFit
        The fit: the state it starts from (its ``pass_`` and ``elapsed_s``), what it reports as
        ``params_used`` (`kpca.fitting.PreparedFit.used`) and the gains its solver reports
        (`kpca.solvers.Solver.gains`).
    history : list of PassRecord
        Records of the passes before this run (a resumed fit).
    save : callable, optional
        ``save(name, pass, state)`` writes the checkpoint of the `kpca.solvers.SolverState` (default
        `save_while_present`; a sharded fit's writes the shards' parts, then the manifest).
    workers : int, optional
        The dask workers a sharded fit runs on, reported with each pass (None: one).
    """

    def __init__(self, job, record: JobRecord, rows: KernelRows, figure: FitFigure, prepared,
                 history: list[PassRecord], save=None, workers: int | None = None):
        self.job, self.registry, self.checkpoints = job, job.registry, job.checkpoints
        self.record, self.rows, self.prepared = record, rows, prepared
        self.figure, self.history = figure, list(history)
        start = prepared.state
        self.passes = record.passes
        tol = record.params.get("tol")  # a number, checked with the request (`kpca.params`), or absent
        self.tol = None if tol is None else float(tol)
        self.best = record.best_checkpoint.model_dump(by_alias=True) if record.best_checkpoint else {}
        self.stop_early = False
        self.save = save or (lambda name, done, state: save_while_present(job, name, done, state))
        self.workers = workers
        self.clock = time.monotonic()
        self.first_pass = int(start.pass_)
        self.elapsed_before = float(0.0 if start.elapsed_s is None else start.elapsed_s)

    def __call__(self, state: IterativeState) -> None:
        """Report the pass just completed in ``state`` (its ``elapsed_s`` is set here)."""
        elapsed = self.elapsed_before + time.monotonic() - self.clock
        state.elapsed_s = elapsed
        done = int(state.pass_)
        convergence, lam = self.figure(self.rows, state)
        saved, fields = self.job.annotate(self.rows, state)
        value = convergence.value
        if value is not None and (not self.best or value <= self.best["value"]):
            self.best = {"pass": done, "value": value}
        # Rayleigh-Ritz passes stop on their residual (`kpca.driver.run_passes`), stochastic ones on this figure
        # tol 0 runs every pass: a figure at rounding level (an exact start's excess error, -2e-16) is no stop
        tol = self.tol
        below_tol = not state.refines and tol is not None and bool(tol) and value is not None and value < tol
        if state.converged or below_tol:
            self.stop_early = True
        per_pass = (elapsed - self.elapsed_before) / max(done - self.first_pass, 1)
        gains = self.prepared.solver.gains(state)
        self.history.append(self.job.pass_record(pass_=done, elapsed_s=elapsed, convergence=convergence,
                                                 eigenvalues=lam.tolist(), workers=self.workers, **fields))
        progress = Progress(pass_=done, passes=self.passes, t=int(state.t),
                            fraction=1.0 if self.stop_early else min(done / self.passes, 1.0), elapsed_s=elapsed,
                            remaining_s=0.0 if self.stop_early else per_pass * max(self.passes - done, 0),
                            eigenvalues=lam.tolist(), gains=None if gains is None else np.asarray(gains).tolist(),
                            convergence=convergence, workers=self.workers)
        still_ours(self.registry, self.record)  # never write into a deleted or re-created job
        # the record first, then the checkpoint: a crash in between leaves a history one pass ahead of the
        # checkpoint, which a resumed run truncates and recomputes (the other order would lose an entry)
        self.registry.update(self.record.name, progress=progress, history=self.history,
                             params_used=self.prepared.used(state), best_checkpoint=dict(self.best) or None)
        self.save(self.record.name, done, saved)
        retain(self.checkpoints, self.record.name, self.record.checkpoint_keep, self.best.get("pass"))


    def settle(self, state: SolverState | Mapping[str, Any]) -> None:
        """Report ``state`` unless a pass of this run already did: a fit that met its tol at its start (or
        at the pass a resume starts from) still gets its progress, history record and checkpoint. The
        sharded passes' entries are read as the state (`kpca.solvers.as_state`)."""
        typed = as_state(state)
        if not isinstance(typed, IterativeState):  # settled after passes only: an iterative solver's state
            raise TypeError(f"a fit's passes ended with a {type(typed).__name__}, not an iterative solver's state")
        if not self.history or self.history[-1].pass_ != int(typed.pass_):
            self(typed)


def retain(checkpoints: CheckpointStore, name: str, keep: int, best_pass: int | None) -> None:
    """Delete checkpoints except the last ``keep`` and the best. Cost: a listing."""
    passes = [c["pass"] for c in checkpoints.list(name)]
    for p in passes[:-keep] if keep > 0 else passes[:-1]:
        if p != best_pass:
            checkpoints.delete(name, p)


def completion_warnings(rows: KernelRows, state: SolverState) -> list[str]:
    """What a user should know of a completed fit's components: non-finite values (`Diverged`), and
    the components past the numerical rank, which carry no variance (`kpca.solvers.rank_warnings`,
    the estimator's ``warnings_``)."""
    model = served_model(state, rows)
    if not isinstance(model, KernelModel):
        return []
    eigenvalues = served_eigenvalues(model)
    if not (np.isfinite(model.A).all() and np.isfinite(eigenvalues).all()):
        raise Diverged("the fit ended with non-finite components; retry with smaller gains (eta0, mu)")
    return rank_warnings(eigenvalues)


def served_eigenvalues(model: KernelModel) -> np.ndarray:
    """The eigenvalue estimates (r,) of the model a solver state serves (`kpca.solvers.served_model` sets
    them; `kpca.model.KernelModel` leaves them optional for models built otherwise)."""
    if model.eigenvalues is None:
        raise RuntimeError("the served model carries no eigenvalue estimates")
    return model.eigenvalues


def completed_checkpoint(checkpoints, name: str) -> dict:
    """The ``checkpoint`` field of a record that completes now: its latest checkpoint's pass and digest,
    the file read back and verified first (`store.CheckpointStore.verify`), so that serving and export
    can tell it from any other file later. Cost O(checkpoint bytes) read and hashed, once per fit."""
    latest = checkpoints.latest_pass(name)
    return {"checkpoint": None if latest is None else {"pass": latest, "sha256": checkpoints.verify(name, latest)}}


def save_while_present(job, name: str, pass_index: int, state: SolverState) -> None:
    """``job.checkpoints.save`` of the state's encoding (`kpca.solvers.SolverState.to_checkpoint`) under the
    job's shared lock: a delete (which takes it exclusive) waits
    for the write and removes it with the folder, and a job deleted before is `store.NotFound`, so a
    checkpoint never brings a deleted job's folder back (it did: a fit's last write after the delete
    left ``models/{name}/checkpoints``). Cost: one flock more per checkpoint. On an object store (no locks) the
    record is read before and after the write, and a checkpoint written under a job deleted meanwhile is removed
    again (`store.NotFound` as well): two reads more per checkpoint."""
    folders = getattr(job.registry, "folders", None)
    if folders is None:
        job.registry.get(name)
        job.checkpoints.save(name, pass_index, state.to_checkpoint())
        try:
            job.registry.get(name)
        except NotFound:
            job.checkpoints.remove_all(name)
            raise
        return
    with folders.locked(name, shared=True):
        job.registry.get(name)
        job.checkpoints.save(name, pass_index, state.to_checkpoint())
