"""The fit driver on a dask worker: passes, checkpoints, progress records.

`run_fit` is the task the service submits. It reads the model record and the
committed data set from `store/`, streams kernel rows from the zarr chunks
(`kpca.rows.KernelRows`), runs `kpca.driver.run_passes`, and after every pass
writes a checkpoint (solver state + centring statistics) and a progress
record. If checkpoints exist it resumes from the latest one, so a fit restarted
after a crash continues where it stopped and, with the same seed, ends in the
same state as an uninterrupted run.

Convergence figure: where ``l <= exact_limit`` the exact optimum is affordable
and each pass reports the excess reconstruction error of seed 000 eq. 22
(``excess_error``). Above it, the documented proxy ``eigenvalue_change`` is
reported: ``max_i |lambda_i(p) - lambda_i(p-1)| / lambda_i(p)`` of the eq. 13
eigenvalue estimates between consecutive passes.
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
from kpca.solvers import eigenvalue_estimates, exact_components, init_state, resolve_params
from store import CheckpointStore, DatasetStore, ModelRegistry, NotFound

log = logging.getLogger(__name__)

DEFAULT_EXACT_LIMIT = 3000
_CENTERING_KEYS = ("centering_column_means", "centering_grand_mean", "centering_mean_diagonal")


def open_rows(datasets: DatasetStore, record: dict) -> KernelRows:
    """Kernel rows over the model's committed data set (float64 arithmetic)."""
    return KernelRows(datasets.open_array(record["dataset"]), KernelSpec.from_dict(record["kernel"]),
                      dtype=np.float64)


def centering_to_state(c: Centering) -> dict:
    return {"centering_column_means": c.column_means, "centering_grand_mean": float(c.grand_mean),
            "centering_mean_diagonal": float(c.mean_diagonal)}


def centering_from_state(state: dict) -> Centering:
    return Centering(np.asarray(state["centering_column_means"]), float(state["centering_grand_mean"]),
                     float(state["centering_mean_diagonal"]))


class _Reference:
    """The exact optimum for the convergence figure, when l is small enough."""

    def __init__(self, rows: KernelRows, n_components: int, limit: int):
        self.Kc = None
        if rows.n_rows <= limit:
            self.Kc = rows.dense()
            self.e_min = minimal_error(scipy.linalg.eigvalsh(self.Kc), n_components)

    def convergence(self, state: dict, previous: np.ndarray | None) -> dict:
        if self.Kc is not None:
            return {"metric": "excess_error", "value": excess_error(self.Kc, state["AK"], self.e_min)}
        lam = eigenvalue_estimates(state["A"], state["AK"])
        if previous is None:
            return {"metric": "eigenvalue_change", "value": None}
        change = np.max(np.abs(lam - previous) / np.maximum(np.abs(lam), 1e-300))
        return {"metric": "eigenvalue_change", "value": float(change)}


def run_fit(data_dir: str, model_name: str) -> str:
    """Fit (or resume) the named model; returns its final status.

    Every outcome is written to the model record: ``completed``,
    ``cancelled`` (after a cancel request, last checkpoint kept) or
    ``failed`` with an ``error`` a user can act on.
    """
    root = Path(data_dir)
    registry, datasets, checkpoints = ModelRegistry(root), DatasetStore(root), CheckpointStore(root)
    try:
        record = registry.get(model_name)
    except NotFound:
        return "deleted"
    try:
        return _fit(record, registry, datasets, checkpoints)
    except _ModelGone:
        log.info("model %s was deleted or replaced during its fit; stopped", model_name)
        return "deleted"
    except Diverged as exc:
        registry.update(model_name, status="failed", error={"code": "diverged", "message": str(exc)})
        return "failed"
    except Exception as exc:  # the record must say why, whatever happened
        log.error("fit %s failed:\n%s", model_name, traceback.format_exc())
        registry.update(model_name, status="failed", error={
            "code": "internal",
            "message": f"{type(exc).__name__}: {exc}. The last checkpoint is kept; "
                       f"POST /v1/models/{model_name}/resume may continue, or report this error."})
        return "failed"


class _ModelGone(Exception):
    """The model record this fit works for was deleted (or deleted and re-created)."""


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
    solver = record["solver"]
    started = time.monotonic()
    registry.update(name, status="running", error=None)
    rows = open_rows(datasets, record)
    l = rows.n_rows
    limit = record.get("exact_limit")
    limit = DEFAULT_EXACT_LIMIT if limit is None else int(limit)

    if solver == "exact":
        if l > limit:
            raise ValueError(f"the exact solver is limited to {limit} rows (this set has {l}); "
                             "use an iterative solver such as kha-smd")
        centering = rows.fit_centering()
        eigenvalues, A = exact_components(rows.dense(), r)
        state = {"solver": "exact", "A": A, "eigenvalues": eigenvalues, "pass": 1, "n_rows": l,
                 **centering_to_state(centering)}
        checkpoints.save(name, 1, state)
        progress = {"pass": 1, "passes": 1, "t": 0, "fraction": 1.0, "elapsed_s": time.monotonic() - started,
                    "remaining_s": 0.0, "eigenvalues": eigenvalues.tolist(), "gains": None,
                    "convergence": {"metric": "excess_error", "value": 0.0}}
        registry.update(name, status="completed", progress=progress, history=[dict(progress)],
                        params_used={"exact_limit": limit})
        return "completed"

    latest = checkpoints.latest_pass(name)
    if latest is not None:
        state = checkpoints.load(name, latest)
        rows.centering = centering_from_state(state)
        history = list(record.get("history") or [])[: int(state["pass"])]
    else:
        centering = rows.fit_centering()
        resolved = resolve_params(solver, centering.mean_diagonal, params.get("eta0"), params.get("mu"),
                                  params.get("xi"))
        state = init_state(solver, r, rows.block, l, resolved, seed=int(params.get("seed", 0)))
        state.update(centering_to_state(rows.centering), elapsed_s=0.0)
        history = []
    block = int(params.get("block_size") or default_block_size(l))
    reference = _Reference(rows, r, limit)
    elapsed_before = float(state.get("elapsed_s", 0.0))
    clock = {"start": time.monotonic()}
    previous = {"eigenvalues": None}

    def used(state: dict) -> dict:
        keys = ("eta0", "mu", "xi")
        return {**{k: state[k] for k in keys if k in state}, "passes": passes, "seed": state["seed"],
                "block_size": block, "exact_limit": limit, "gain_reductions": int(state.get("gain_reductions", 0))}

    registry.update(name, params_used=used(state))

    def on_pass(state: dict) -> None:
        elapsed = elapsed_before + time.monotonic() - clock["start"]
        state["elapsed_s"] = elapsed
        done = int(state["pass"])
        convergence = reference.convergence(state, previous["eigenvalues"])
        lam = eigenvalue_estimates(state["A"], state["AK"])
        previous["eigenvalues"] = lam
        gains = state["gain"] * (np.exp(state["rho"]) if "rho" in state else 1.0)
        _still_ours(registry, record)  # never write checkpoints into a deleted or re-created model
        checkpoints.save(name, done, state)
        per_pass = elapsed / max(done, 1)
        entry = {"pass": done, "elapsed_s": elapsed, "convergence": convergence, "eigenvalues": lam.tolist()}
        history.append(entry)
        progress = {"pass": done, "passes": passes, "t": int(state["t"]), "fraction": done / passes,
                    "elapsed_s": elapsed, "remaining_s": per_pass * (passes - done), "eigenvalues": lam.tolist(),
                    "gains": np.asarray(gains).tolist(), "convergence": convergence}
        registry.update(name, progress=progress, history=list(history), params_used=used(state))

    def should_stop() -> bool:
        try:
            return registry.cancel_requested(name)
        except NotFound:
            raise _ModelGone() from None

    state, stopped = run_passes(rows, state, passes, block, on_pass=on_pass, should_stop=should_stop)
    if stopped:
        registry.update(name, status="cancelled")
        return "cancelled"
    registry.update(name, status="completed")
    return "completed"
