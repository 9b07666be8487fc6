"""The dask cluster the service works on: connect to an external scheduler or start the embedded one,
describe it, close it.

Only start-up lives here; what runs on the cluster is `workers.fits` (fits and their recovery) and
`workers.serving` (serving operations). Both receive the started `DaskCluster` and read its ``client``.
"""

from __future__ import annotations

import importlib.util
import logging
import os

from dask.distributed import Client, LocalCluster

from workers.environ import restore_environ, saved_environ
from workers.placement import machine_cores
from workers.plugins import IgnoreInterrupts, ImportModules, QuietHeartbeatFailures, WarmKernels, import_modules
from workers.shards import FIT_RESOURCE, fit_workers, scheduler_workers

log = logging.getLogger(__name__)

EMBEDDED_MAX_WORKERS = 8  # worker processes of the embedded cluster when not configured, at most
# Every embedded worker process: BLAS and OpenMP single-threaded (their threads would multiply with
# the workers'), numba's kernel threads set per cluster by `embedded_sizing`.
_SINGLE_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}

#: dask settings of the embedded cluster that keep an idle service idle: no statistical profiler sampling
#: every worker's threads 100 times a second, and the event-loop tick, system monitor and work stealing
#: looked at every second or so instead of 50, 2 and 10 times a second (what the dask dashboard, which
#: needs bokeh, would draw). The scheduler runs in the service's process, the workers get the same
#: settings from their nannies.
QUIET_WHEN_IDLE = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.scheduler.work-stealing-interval": "1s",
}
#: Every task goes to a worker at once, where priorities order it. With the scheduler's queueing (a
#: worker "saturated" at 1.1 tasks per thread), the hundreds of pre-image blocks of a few heavy requests
#: (sent at once: their resource restriction exempts them from the queue) left every projection queued
#: on the scheduler until blocks finished: /project waited 23 s behind 4 such requests.
PRIORITIES_ON_WORKERS = {"distributed.scheduler.worker-saturation": "inf"}
#: The resource a worker offers for pre-image tasks: at most one runs on each, so that its other thread is
#: left to projections (embedded workers offer it; external ones with ``--resources "fit=1,preimage=1"``).
PREIMAGE_RESOURCE = "preimage"


def embedded_sizing(cores: int, n_workers: int | None = None) -> tuple[int, int]:
    """``(workers, kernel_threads)`` of the embedded cluster on ``cores`` cores.

    ``n_workers`` None (automatic): ``min(cores, EMBEDDED_MAX_WORKERS)`` worker processes, at least
    one; a given ``n_workers`` is used as it is. Each worker's numba kernels get
    ``kernel_threads = max(1, cores // workers)`` threads (NUMBA_NUM_THREADS), so that workers x
    kernel threads <= cores whenever the workers fit the cores; BLAS and OpenMP stay single-threaded.
    Each worker still has three dask threads (one fits or holds a shard, one runs pre-images, one is left
    to projections)
    and at most one fit (resource ``fit``). 2 cores: (2, 1); 16 cores: (8, 2).
    """
    cores = max(1, int(cores))
    workers = max(1, int(n_workers) if n_workers is not None else min(cores, EMBEDDED_MAX_WORKERS))
    return workers, max(1, cores // workers)


class KillAtStopLine(logging.Filter):
    """dask's nanny's "Worker process still alive after N seconds, killing" while the service stops its
    embedded cluster, as one line at INFO saying why: a worker busy in a fit's jitted step does not answer
    the stop, and is ended (the fit resumes from its last checkpoint at the next start)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("Worker process still alive"):
            record.msg, record.args = "a worker busy in a fit's step did not stop at once: ended", ()
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


class DaskCluster:
    """An external dask cluster (``scheduler``: its address) or the embedded `LocalCluster` (None).

    The embedded cluster: on c cores (`machine_cores`: the CPU affinity) it has
    ``min(c, 8)`` worker processes unless ``n_workers`` says otherwise, each with
    three dask threads (one fits, or holds a shard of a sharded fit; one runs pre-image tasks; one is
    left to projections), the resources ``fit=1`` and ``preimage=1`` (at most one fit and one pre-image
    task each), numba kernels on ``max(1, c // workers)`` threads (NUMBA_NUM_THREADS) and BLAS / OpenMP
    on one. `start` logs the sizing. An external cluster is sized by whoever starts its workers
    (docs/scaling.md, *Sizing an external cluster*). ``plugins``: modules every worker imports (and this
    process, at `start`); ``warm_workers``: every worker loads the default fit's and serving's jitted
    code when it starts (`workers.plugins.WarmKernels`); ``worker_environ``: variables the embedded
    cluster's workers start with (the service's `workers.settings` values), besides this process's
    environment.
    """

    def __init__(self, scheduler: str | None = None, n_workers: int | None = None,
                 plugins: list[str] | tuple[str, ...] = (), warm_workers: bool = False,
                 worker_environ: dict[str, str] | None = None):
        self.scheduler = scheduler
        self.worker_environ = dict(worker_environ or {})
        self.n_workers = n_workers
        self.plugins = list(plugins)
        self.warm_workers = bool(warm_workers)
        self.cluster: LocalCluster | None = None
        self.client: Client | None = None
        self._environ_before: dict[str, str | None] = {}  # what the nannies overwrite here, restored by `close`

    def start(self) -> DaskCluster:
        """Connect to the configured scheduler, or start the embedded cluster."""
        if self.scheduler:
            self.client = Client(self.scheduler, set_as_default=False)
        else:
            import dask

            cores = machine_cores()
            n_workers, kernel_threads = embedded_sizing(cores, self.n_workers)
            log.info("embedded dask cluster: %d worker processes (%s) x 3 threads on %d cores; numba kernels "
                     "on %d thread(s) per worker, BLAS on 1", n_workers,
                     "automatic" if self.n_workers is None else "configured", cores, kernel_threads)
            environ = {**self.worker_environ, **_SINGLE_THREAD_ENV, "NUMBA_NUM_THREADS": str(kernel_threads)}
            # each nanny writes these (and PYTHONHASHSEED) into this process's environment before every
            # worker (re)start, by design (distributed.nanny's pre-spawn-environ): `close` puts them back
            self._environ_before = saved_environ((*environ, "PYTHONHASHSEED"))
            with dask.config.set({"distributed.nanny.pre-spawn-environ": environ, **QUIET_WHEN_IDLE,
                                  **PRIORITIES_ON_WORKERS}):
                self.cluster = LocalCluster(
                    n_workers=n_workers,
                    threads_per_worker=3,  # a fit, a pre-image task, and projections always
                    resources={FIT_RESOURCE: 1, PREIMAGE_RESOURCE: 1},
                    processes=True,
                    host="127.0.0.1",
                    # loopback only (its pages show logs and identity), a free port: several clusters may run
                    # side by side
                    dashboard_address="127.0.0.1:0",
                    memory_limit=0,
                )
            self.client = Client(self.cluster, set_as_default=False)
            self.client.register_plugin(IgnoreInterrupts())  # Ctrl-C stops them through the service
            self.client.register_plugin(QuietHeartbeatFailures())  # a stop's race, not a traceback
        if self.plugins:
            import_modules(self.plugins)
            self.client.register_plugin(ImportModules(self.plugins))
        if self.warm_workers:
            self.client.register_plugin(WarmKernels())
        log.info("%s", self.describe())
        return self

    @property
    def running_client(self) -> Client:
        """The client of the started cluster; a RuntimeError before `start` or after `close`."""
        if self.client is None:
            raise RuntimeError("the dask cluster is not started (Backend.start)")
        return self.client

    def describe(self) -> str:
        """One readable line on the started cluster: its scheduler, workers and dask threads, and the
        dask dashboard's address, or why there is none (it needs the ``bokeh`` package)."""
        client = self.running_client
        workers = scheduler_workers(client)
        threads = sum(int(w.get("nthreads", 0)) for w in workers.values())
        where = "embedded" if self.cluster is not None else f"external ({self.scheduler})"
        line = f"dask cluster ready: {where}, {len(workers)} worker(s), {threads} dask thread(s) in all"
        if importlib.util.find_spec("bokeh") is None:
            return f"{line}; dask dashboard unavailable: it needs bokeh (pip install bokeh)"
        scope = " (this machine only)" if self.cluster is not None else ""
        return f"{line}; dask dashboard{scope}: {client.dashboard_link}"

    def close(self, timeout_s: float = 5.0) -> None:
        """Close the client and, if embedded, the cluster, each within about ``timeout_s`` seconds
        whatever runs on it: running tasks are not waited for (a fit resumes from its last checkpoint
        at the next start); a close that times out is logged and the processes left to exit with this one.
        The environment variables the embedded cluster's nannies wrote into this process get their values
        from before `start` back."""
        if self.client is not None:
            try:
                self.client.close(timeout=timeout_s)
            except Exception:
                log.warning("dask client did not close within %.0f s", timeout_s, exc_info=True)
            self.client = None
        if self.cluster is not None:
            nanny, worded = logging.getLogger("distributed.nanny"), KillAtStopLine()
            nanny.addFilter(worded)  # a worker still in a jitted step is stopped on purpose: said in our words
            try:
                self.cluster.close(timeout=timeout_s)
            except Exception:
                log.warning("dask cluster did not close within %.0f s", timeout_s, exc_info=True)
            finally:
                nanny.removeFilter(worded)
            self.cluster = None
        restore_environ(self._environ_before)
        self._environ_before = {}

    def worker_pids(self) -> dict[str, int]:
        """Process ids of the cluster's workers (for monitoring and fault-injection tests)."""
        return self.running_client.run(os.getpid)

    def fit_resources(self) -> dict | None:
        """``{"fit": 1}`` if some worker offers the resource (workers started with
        ``--resources fit=1``), so that each worker runs at most one fit. One scheduler query."""
        workers = scheduler_workers(self.running_client)
        if any(FIT_RESOURCE in (w.get("resources") or {}) for w in workers.values()):
            return {FIT_RESOURCE: 1}
        return None

    def fit_workers(self) -> int:
        """Workers a fit may be sharded over now (`workers.shards.fit_workers`: those offering the
        ``fit`` resource, or every worker if none does). One scheduler query."""
        return len(fit_workers(self.running_client))
