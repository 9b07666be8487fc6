"""Where a fit runs: how many dask workers share one KHA-family fit, and how many threads its kernel
tiles take on its worker (docs/scaling.md).

Placement is the job's, not the solver's: a model asks for it in ``placement.workers``
(`store.jobs.records.Placement`), and ``KPCA_SHARD_MIN_ROWS`` (`workers.settings`, read by the fit's
worker) sets where a fit that does not ask starts to be sharded. A solver says only whether its passes can be sharded
(`kpca.solvers.Solver.shardable`).
"""

from __future__ import annotations

import os
from pathlib import Path

from store.places import clusterings_at, models_at
from workers.settings import SHARD_MIN_ROWS, worker_settings

__all__ = ["SHARD_MIN_ROWS", "fit_threads", "machine_cores", "running_fits", "shard_count", "shard_min_rows"]


def shard_min_rows() -> int:
    """``KPCA_SHARD_MIN_ROWS`` of this process's environment (`workers.settings.WorkerSettings.shard_min_rows`):
    the rows from which a fit without ``placement.workers`` is sharded over every fit worker."""
    return worker_settings().shard_min_rows


def shard_count(requested: int | str | None, n_rows: int, available: int, min_rows: int = SHARD_MIN_ROWS) -> int:
    """Shards of a fit over ``n_rows`` rows with ``available`` workers offering the fit resource.

    ``requested`` is ``placement.workers``: None (the default) gives ``available`` when
    ``n_rows >= min_rows``, else 1; ``"all"`` gives ``available``; an integer k gives
    ``min(k, available)``. Never more shards than rows, and at least 1. O(1).
    """
    if requested is None:
        count = available if n_rows >= min_rows else 1
    elif requested == "all":
        count = available
    elif isinstance(requested, str):
        raise ValueError(f"workers: must be an integer or \"all\", got {requested!r}")
    else:
        count = min(int(requested), available)
    return int(max(1, min(count, n_rows)))


def machine_cores() -> int:
    """Cores this process may run on: its CPU affinity where the platform has it, else the CPU count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def fit_threads(cores: int, running: int) -> int:
    """Kernel-tile threads (`kpca._threads.tile_threads`) of a one-worker fit on a machine of ``cores``
    cores where ``running`` fits run (itself included): every core when it runs alone, else its share
    ``cores // running``, at least 1. The tiles release the GIL, so a projection on the worker's other
    dask thread still gets its turn. O(1)."""
    return max(1, int(cores) // max(1, int(running)))


def running_fits(data_dir: str | Path) -> int:
    """Fits and clusterings whose record says ``running`` in the data folder: what shares the cores.
    Cost one read of every job record."""
    return sum(record.status == "running" for registry in (models_at(data_dir), clusterings_at(data_dir))
               for record in registry.list())
