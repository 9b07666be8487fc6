"""The fit driver on a dask worker: passes, checkpoints, progress records.

`run_fit` is the task the service submits. It takes the model's *fit lease*
(an flock the kernel releases if the process dies, so at most one live runner
per model), reads the model record and the data set version from `store/`,
streams kernel rows from the zarr chunks (`kpca.rows.KernelRows`), runs
`kpca.driver.run_passes`, and after every pass writes a checkpoint (solver
state + centring statistics) and a progress record. If checkpoints exist it
resumes from the latest one, so a fit restarted after a crash continues where
it stopped and, with the same seed, ends in the same state as an uninterrupted
run. If the model's data set version grew since the checkpoint (rows were
appended), the state is extended to the new rows (`kpca.streaming`) and the
passes continue.

Convergence figure: where ``l <= exact_limit`` the exact optimum is affordable
and each pass reports the excess reconstruction error of seed 000 eq. 22
(``excess_error``) of the components the model serves (the Rayleigh-Ritz
components of the iterate, `kpca.solvers.ritz_components`). Above it, the
documented proxy ``eigenvalue_change`` is reported:
``max_i |lambda_i(p) - lambda_i(p-1)| / lambda_i(p)`` of their eigenvalue
estimates between consecutive passes. With ``params.tol`` set, the
fit completes early once the figure falls below it.

Checkpoint retention: the last ``checkpoint_keep`` (record field, default 3)
and the best one (lowest convergence figure) are kept.
"""

from __future__ import annotations

import logging
import time
import traceback
from pathlib import Path

import numpy as np
import scipy.linalg

from kpca.defaults import default_block_size
from kpca.driver import Diverged, run_passes
from kpca.kernels import KernelSpec
from kpca.metrics import excess_error, minimal_error
from kpca.rows import Centering, KernelRows
from kpca.solvers import check_init, exact_components, init_state, resolve_params, ritz_components
from kpca.streaming import extend_state
from store import CheckpointStore, DatasetStore, ModelRegistry, NotFound

log = logging.getLogger(__name__)

DEFAULT_EXACT_LIMIT = 3000
DEFAULT_CHECKPOINT_KEEP = 3
ACTIVE = ("queued", "running")


def open_rows(datasets: DatasetStore, record: dict, for_fit: bool = False) -> KernelRows:
    """Kernel rows over the model's committed data set version, computed by kernel tiles in the
    fit's ``kernel_precision`` (float64 unless the fit asked for float32). Rows for serving are
    float64; a fit's rows are in the kernel precision itself, so that with float32 the solver's
    GEMMs against them run in float32 too (`kpca.solvers._blocked`, *Precision*)."""
    source = datasets.open_array(record["dataset"], record.get("dataset_version"))
    precision = np.dtype((record.get("params") or {}).get("kernel_precision") or "float64")
    return KernelRows(source, KernelSpec.from_dict(record["kernel"]), dtype=precision if for_fit else np.float64,
                      compute_dtype=precision)


def centering_to_state(c: Centering) -> dict:
    return {"centering_column_means": c.column_means, "centering_grand_mean": float(c.grand_mean),
            "centering_mean_diagonal": float(c.mean_diagonal)}


def centering_from_state(state: dict) -> Centering:
    return Centering(np.asarray(state["centering_column_means"]), float(state["centering_grand_mean"]),
                     float(state["centering_mean_diagonal"]))


class _Reference:
    """The convergence figure: exact excess error when l is small enough, else a proxy."""

    def __init__(self, rows: KernelRows, n_components: int, limit: int):
        self.Kc = None
        self.previous = None
        if rows.n_rows <= limit:
            self.Kc = rows.dense().astype(np.float64, copy=False)
            self.e_min = minimal_error(scipy.linalg.eigvalsh(self.Kc), n_components)

    def __call__(self, AK: np.ndarray, eigenvalues: np.ndarray) -> dict:
        """The figure for served components with ``A K'`` = AK and eigenvalue estimates ``eigenvalues``."""
        previous, self.previous = self.previous, eigenvalues
        if self.Kc is not None:
            return {"metric": "excess_error", "value": excess_error(self.Kc, AK, self.e_min)}
        if previous is None:
            return {"metric": "eigenvalue_change", "value": None}
        change = np.max(np.abs(eigenvalues - previous) / np.maximum(np.abs(eigenvalues), 1e-300))
        return {"metric": "eigenvalue_change", "value": float(change)}


class _ModelGone(Exception):
    """The model record this fit works for was deleted (or deleted and re-created)."""


def run_fit(data_dir: str, model_name: str) -> str:
    """Fit (or resume) the named model; returns its final status.

    Every outcome is written to the model record: ``completed``,
    ``cancelled`` (after a cancel request, last checkpoint kept) or
    ``failed`` with an ``error`` a user can act on. Returns at once (writing
    nothing) if another live process holds the fit lease, or if the record is
    not queued or running.
    """
    root = Path(data_dir)
    registry, datasets, checkpoints = ModelRegistry(root), DatasetStore(root), CheckpointStore(root)
    try:
        with registry.fit_lease(model_name) as ours:
            if not ours:
                return "already-running"
            record = registry.get(model_name)
            if record.get("status") not in ACTIVE:
                return record.get("status")
            if registry.cancel_requested(model_name):
                registry.update(model_name, status="cancelled")
                return "cancelled"
            return _run_guarded(record, registry, datasets, checkpoints)
    except (NotFound, _ModelGone):
        log.info("model %s was deleted or replaced during its fit; stopped", model_name)
        return "deleted"


def _run_guarded(record, registry, datasets, checkpoints) -> str:
    name = record["name"]
    try:
        return _fit(record, registry, datasets, checkpoints)
    except (_ModelGone, NotFound):
        raise
    except Diverged as exc:
        registry.update(name, status="failed", error={"code": "diverged", "message": str(exc)})
        return "failed"
    except Exception as exc:  # the record must say why, whatever happened
        log.error("fit %s failed:\n%s", name, traceback.format_exc())
        registry.update(name, status="failed", error={
            "code": "internal",
            "message": f"{type(exc).__name__}: {exc}. The last checkpoint is kept; "
                       f"POST /v1/models/{name}/resume may continue, or report this error."})
        return "failed"


def _still_ours(registry: ModelRegistry, record: dict) -> None:
    """Raise `_ModelGone` unless the registry still holds the record this fit started from."""
    try:
        current = registry.get(record["name"])
    except NotFound:
        raise _ModelGone() from None
    if current.get("created_at") != record.get("created_at"):
        raise _ModelGone()


def _fit(record: dict, registry: ModelRegistry, datasets: DatasetStore, checkpoints: CheckpointStore) -> str:
    name = record["name"]
    params = record.get("params") or {}
    passes = int(params.get("passes", 20))
    r = int(record["n_components"])
    started = time.monotonic()
    registry.update(name, status="running", error=None)
    rows = open_rows(datasets, record, for_fit=True)
    limit = record.get("exact_limit")
    limit = DEFAULT_EXACT_LIMIT if limit is None else int(limit)
    if record["solver"] == "exact":
        return _fit_exact(record, rows, limit, registry, checkpoints, started)

    latest = checkpoints.latest_pass(name)
    if latest is not None:
        state = checkpoints.load(name, latest)
        history = list(record.get("history") or [])[: int(state["pass"])]
        if int(state["n_rows"]) != rows.n_rows:  # rows were appended: continue on the new version
            state, centering = extend_state(state, centering_from_state(state), rows)
            state.update(centering_to_state(centering))
        else:
            rows.centering = centering_from_state(state)
    else:
        init, init_size = params.get("init") or "random", params.get("init_size")
        check_init(init, init_size, r, rows.n_rows)  # before the centring pass, not after it
        centering = rows.fit_centering()
        resolved = resolve_params(record["solver"], centering.mean_diagonal, params.get("eta0"), params.get("mu"),
                                  params.get("xi"), init, n_rows=rows.n_rows)
        state = init_state(record["solver"], r, rows.block, rows.n_rows, resolved, seed=int(params.get("seed", 0)),
                           init=init, init_size=init_size)
        state.update(centering_to_state(rows.centering), elapsed_s=0.0)
        history = []
    block = int(params.get("block_size") or default_block_size(rows.n_rows))
    tol = params.get("tol")
    keep = int(record.get("checkpoint_keep") or DEFAULT_CHECKPOINT_KEEP)
    convergence_of = _Reference(rows, r, limit)
    elapsed_before, clock = float(state.get("elapsed_s", 0.0)), time.monotonic()
    best = dict(record.get("best_checkpoint") or {})
    early = {"stop": False}
    start_pass = int(state["pass"])

    def used(state: dict) -> dict:
        return {**{k: state[k] for k in ("eta0", "mu", "xi", "init", "init_size") if k in state}, "passes": passes,
                "kernel_precision": rows.compute_dtype.name,
                "seed": state["seed"], "block_size": block, "exact_limit": limit, "tol": tol,
                "gain_reductions": int(state.get("gain_reductions", 0)), "n_rows": rows.n_rows}

    registry.update(name, params_used=used(state))

    def on_pass(state: dict) -> None:
        elapsed = elapsed_before + time.monotonic() - clock
        state["elapsed_s"] = elapsed
        done = int(state["pass"])
        _, served_AK, lam = ritz_components(state["A"], state["AK"])  # what the model serves
        convergence = convergence_of(served_AK, lam)
        gains = state["gain"] * (np.exp(state["rho"]) if "rho" in state else 1.0)
        value = convergence["value"]
        if value is not None and (not best or value <= best["value"]):
            best.update({"pass": done, "value": value})
        if tol is not None and value is not None and value < tol:
            early["stop"] = True
        per_pass = (elapsed - elapsed_before) / max(done - start_pass, 1)
        history.append({"pass": done, "elapsed_s": elapsed, "convergence": convergence, "eigenvalues": lam.tolist()})
        progress = {"pass": done, "passes": passes, "t": int(state["t"]), "fraction": min(done / passes, 1.0),
                    "elapsed_s": elapsed, "remaining_s": 0.0 if early["stop"] else per_pass * max(passes - done, 0),
                    "eigenvalues": lam.tolist(), "gains": np.asarray(gains).tolist(), "convergence": convergence}
        _still_ours(registry, record)  # never write into a deleted or re-created model
        # the record first, then the checkpoint: a crash in between leaves a history one pass ahead of the
        # checkpoint, which a resumed run truncates and recomputes (the other order would lose an entry)
        registry.update(name, progress=progress, history=list(history), params_used=used(state),
                        best_checkpoint=dict(best) or None)
        checkpoints.save(name, done, state)
        _retain(checkpoints, name, keep, best.get("pass"))

    def should_stop() -> bool:
        return early["stop"] or registry.cancel_requested(name)

    state, stopped = run_passes(rows, state, passes, block, on_pass=on_pass, should_stop=should_stop)
    if stopped and not early["stop"]:
        registry.update(name, status="cancelled")
        return "cancelled"
    registry.update(name, status="completed", stopped_early=early["stop"])
    return "completed"


def _fit_exact(record, rows, limit, registry, checkpoints, started) -> str:
    name, r = record["name"], int(record["n_components"])
    if rows.n_rows > limit:
        raise ValueError(f"the exact solver is limited to {limit} rows (this set has {rows.n_rows}); "
                         "use an iterative solver such as kha-smd")
    centering = rows.fit_centering()
    eigenvalues, A = exact_components(rows.dense().astype(np.float64, copy=False), r)
    state = {"solver": "exact", "A": A, "eigenvalues": eigenvalues, "pass": 1, "n_rows": rows.n_rows,
             **centering_to_state(centering)}
    _still_ours(registry, record)
    checkpoints.save(name, 1, state)
    progress = {"pass": 1, "passes": 1, "t": 0, "fraction": 1.0, "elapsed_s": time.monotonic() - started,
                "remaining_s": 0.0, "eigenvalues": eigenvalues.tolist(), "gains": None,
                "convergence": {"metric": "excess_error", "value": 0.0}}
    registry.update(name, status="completed", progress=progress, history=[dict(progress)],
                    params_used={"exact_limit": limit, "n_rows": rows.n_rows})
    return "completed"


def _retain(checkpoints: CheckpointStore, name: str, keep: int, best_pass: int | None) -> None:
    """Delete checkpoints except the last ``keep`` and the best. Cost: a listing."""
    passes = [c["pass"] for c in checkpoints.list(name)]
    for p in passes[:-keep] if keep > 0 else passes[:-1]:
        if p != best_pass:
            checkpoints.delete(name, p)
