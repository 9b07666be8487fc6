"""The service's handle on the dask cluster: the cluster itself, the fits on it, and serving.

Three concerns, three modules: `workers.dask_cluster` starts (or connects to) the cluster and closes
it; `workers.fits` submits fits and clusterings, balances them and recovers those that lost their
runner; `workers.serving` runs any serving operation (`workers.operations`: projections, pre-images,
image denoising, ...) through one call. `Backend` holds one of each on the same cluster and data folder,
and is what the service keeps on ``app.state``. The authoritative job record lives in `store/`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from store.jobs.records import ACTIVE
from store.places import clusterings_at, location, models_at
from workers.dask_cluster import DaskCluster
from workers.fits import SUBMITTED_RECENTLY_S, Fits
from workers.serving import Operation, Serving
from workers.watch import Watch

log = logging.getLogger(__name__)


def running_fits(data_dir: str) -> list[str]:
    """The jobs of the data folder whose fit is queued or running, as ``model 'm' (pass 12 of 2000)``: what a
    stop of the embedded cluster interrupts. A folder that cannot be read gives []. O(jobs)."""
    found = []
    for registry in (models_at(data_dir), clusterings_at(data_dir)):
        try:
            records = registry.list()
        except Exception:  # a stop never fails on its message
            continue
        for record in records:
            if record.status in ACTIVE:
                done = record.progress.pass_ if record.progress is not None else 0
                found.append(f"{registry.kind} {record.name!r} (pass {done} of {record.passes})")
    return found


class Backend:
    """Fits and serving on an embedded or external dask cluster.

    Parameters
    ----------
    data_dir : path
        Root of the local data folder (shared with the workers).
    scheduler : str or None
        Address of an external scheduler (``tcp://host:8786``); ``None`` starts an embedded `LocalCluster`
        on this machine (`workers.dask_cluster.DaskCluster`).
    n_workers : int or None
        Worker processes of the embedded cluster; None (the default) sizes it to the machine
        (`workers.dask_cluster.embedded_sizing`).
    plugins : list of str
        Modules every worker imports (and this process, at `start`): solvers registered by plugins
        (`workers.plugins`).
    local_projections : (int, int)
        ``(values, work)``: small projections computed in this process (`workers.serving.Serving`);
        ``(0, 0)``, the default, sends every projection to the cluster.
    warm_workers : bool
        Every worker loads the default fit's and serving's jitted code when it starts
        (`workers.plugins.WarmKernels`).
    worker_environ : dict or None
        What the embedded cluster's workers read from their environment (`workers.settings`), as
        variables: the service's values (`workers.settings.WorkerGroup.worker_environ`). None: this
        process's environment, as it is.
    """

    def __init__(self, data_dir: str | Path, scheduler: str | None = None, n_workers: int | None = None,
                 plugins: list[str] | tuple[str, ...] = (), local_projections: tuple[int, int] = (0, 0),
                 warm_workers: bool = False, worker_environ: dict[str, str] | None = None):
        self.data_dir = location(data_dir)  # a folder's absolute path or an object store's URL (`store.places`)
        self.dask = DaskCluster(scheduler, n_workers, plugins, warm_workers, worker_environ)
        self.fits = Fits(self.dask, self.data_dir)
        self.serving = Serving(self.dask, self.data_dir, local_projections)

    @property
    def client(self):
        """The dask client (None before `start` and after `close`)."""
        return self.dask.client

    @property
    def cluster(self):
        """The embedded `LocalCluster`, or None (an external one, or not started)."""
        return self.dask.cluster

    @property
    def projections(self) -> dict[str, int]:
        """Projections computed in this process (``api``) and on the cluster (``workers``), for metrics."""
        return self.serving.projections

    def start(self) -> Backend:
        """Connect to the configured scheduler, or start the embedded cluster."""
        self.dask.start()
        return self

    def describe(self) -> str:
        """One readable line on the started cluster (`workers.dask_cluster.DaskCluster.describe`)."""
        return self.dask.describe()

    def close(self, timeout_s: float = 5.0) -> None:
        """Say which fits the stop interrupts (each resumes from its last checkpoint at the next start,
        `running_fits`), then close the client and an embedded cluster within about ``timeout_s`` seconds
        each (`workers.dask_cluster.DaskCluster.close`)."""
        running = running_fits(self.data_dir) if self.dask.cluster is not None else []
        if running:
            log.info("stopping with %d fit(s) running (%s): each stops here and resumes from its last checkpoint "
                     "when the service starts again", len(running), ", ".join(running))
        self.dask.close(timeout_s)

    def __enter__(self) -> Backend:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def worker_pids(self) -> dict[str, int]:
        """Process ids of the cluster's workers (for monitoring and fault-injection tests)."""
        return self.dask.worker_pids()

    def fit_workers(self) -> int:
        """Workers a fit may be sharded over now (`workers.dask_cluster.DaskCluster.fit_workers`)."""
        return self.dask.fit_workers()

    def submit_fit(self, name: str, kind: str = "models") -> None:
        """Start the queued job ``name`` of registry ``kind`` (``"models"``, ``"clusterings"``); returns at
        once (`workers.fits.Fits.submit`)."""
        self.fits.submit(name, kind)

    def balance_fits(self) -> list[tuple[str, str, str]]:
        """Move fits waiting for a busy worker's fit slot to a free one (`workers.fits.Fits.balance`)."""
        return self.fits.balance()

    def recover(self, registry, recent_s: float = SUBMITTED_RECENTLY_S) -> list[str]:
        """Resubmit the jobs of ``registry`` that lost their runner; their names (`workers.fits.Fits.recover`)."""
        return self.fits.recover(registry, recent_s)

    def serve(self, operation: Operation, watch: Watch | None = None) -> Any:
        """The answer of a serving ``operation`` (`workers.operations`), the request's deadline and
        disconnection ``watch``-ed (`workers.serving.Serving.run`). Blocking: call it from a thread pool."""
        return self.serving.run(operation, watch)

    def serve_in_background(self, operation: Operation) -> None:
        """Start a serving ``operation`` that outlives its request (`workers.serving.Serving.start`): a
        background image job, whose answer its worker keeps in the image job store."""
        self.serving.start(operation)
