"""The service's handle on the dask cluster: submit fits and clusterings, run projections and predictions.

The authoritative job record lives in `store/` (written by the worker that
runs the fit); this object only places work on the cluster. Fits are submitted
with an explicit key and released with ``fire_and_forget`` so they outlive the
request (and the client) that started them (dask/distributed #2766, #3890).
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import time
import uuid
from pathlib import Path

import numpy as np
from dask.distributed import Client, LocalCluster, fire_and_forget

from store import DatasetInfo, DatasetStore, ModelRegistry, NotFound
from store.atomic import try_file_lock
from store.stop_flags import StopFlags
from store.timestamps import seconds_since
from store.jobs.records import ModelRecord
from workers import archive as archive_task
from workers import cluster as cluster_task
from workers import fit as fit_task
from workers import image_jobs as image_job_task
from workers import images as image_task
from workers import serve as serve_task
from workers.environ import restore_environ, saved_environ
from workers.fit_balance import balance_fits
from workers.placement import machine_cores
from workers.plugins import IgnoreInterrupts, ImportModules, QuietHeartbeatFailures, WarmKernels, import_modules
from workers.priority import run_niced
from workers.shards import FIT_RESOURCE, fit_workers, scheduler_workers
from workers.watch import RequestEnded, Watch, watched_results

log = logging.getLogger(__name__)

FIT_TASKS = {"models": fit_task.run_fit, "clusterings": cluster_task.run_clustering}  # by registry kind_folder
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


#: A queued job younger than this is not recovered by `Backend.recover`: its submitter's task may still be
#: on its way to the scheduler.
SUBMITTED_RECENTLY_S = 10.0


def _fit_tasks(prefix: str, dask_scheduler=None) -> set[str]:
    """On the scheduler (``Client.run_on_scheduler``): the job names of the fit tasks it holds not yet
    finished, from their keys ``{prefix}{name}-{hex}`` (`Backend.submit_fit`). O(tasks)."""
    return {key[len(prefix):].rsplit("-", 1)[0] for key, task in dask_scheduler.tasks.items()
            if isinstance(key, str) and key.startswith(prefix) and task.state not in ("memory", "erred", "forgotten")}


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


#: dask priorities of serving tasks: projections run before queued pre-image blocks (higher first).
SERVING_PRIORITY = 10
PREIMAGE_PRIORITY = -10
#: The resource a worker offers for pre-image tasks: at most one runs on each, so that its other thread is
#: left to projections (embedded workers offer it; external ones with ``--resources "fit=1,preimage=1"``).
PREIMAGE_RESOURCE = "preimage"
#: Pre-image blocks of one request on the cluster at a time, per worker offering `PREIMAGE_RESOURCE`: one
#: running and one waiting for it, the next submitted as one ends (`watched_results`).
BLOCKS_IN_FLIGHT = 2


class Backend:
    """Submit fits and projections to an embedded or external dask cluster.

    Parameters
    ----------
    data_dir : path
        Root of the local data folder (shared with the workers).
    scheduler : str or None
        Address of an external scheduler (``tcp://host:8786``); ``None`` starts
        an embedded `LocalCluster` on this machine (see below).
    n_workers : int or None
        Worker processes of the embedded cluster; None (the default) sizes it to
        the machine (`embedded_sizing`).
    plugins : list of str
        Modules every worker imports (and this process, at `start`): solvers
        registered by plugins (`workers.plugins`).
    local_projections : (int, int)
        ``(values, work)``: a projection of a model of at most ``values`` training values (points x
        features) asking at most ``work`` (rows x values) is computed in this process
        (`workers.serve.project_rows`, the model cached here as on a worker) instead of on the cluster
        (`project`); ``(0, 0)``, the default, sends every projection to the cluster.
    warm_workers : bool
        Every worker loads the default fit's and serving's jitted code when it starts
        (`workers.plugins.WarmKernels`).

    The embedded cluster: on c cores (`machine_cores`: the CPU affinity) it has
    ``min(c, 8)`` worker processes unless ``n_workers`` says otherwise, each with
    three dask threads (one fits, or holds a shard of a sharded fit; one runs pre-image tasks; one is
    left to projections), the resources ``fit=1`` and ``preimage=1`` (at most one fit and one pre-image
    task each), numba kernels on
    ``max(1, c // workers)`` threads (NUMBA_NUM_THREADS) and BLAS / OpenMP on one.
    `start` logs the sizing. An external cluster is sized by whoever starts its
    workers (docs/scaling.md, *Sizing an external cluster*).
    """

    def __init__(self, data_dir: str | Path, scheduler: str | None = None, n_workers: int | None = None,
                 plugins: list[str] | tuple[str, ...] = (), local_projections: tuple[int, int] = (0, 0),
                 warm_workers: bool = False):
        self.data_dir = str(Path(data_dir).resolve())
        self.local_projections = tuple(int(v) for v in local_projections)
        self.warm_workers = bool(warm_workers)
        self.projections = {"api": 0, "workers": 0}  # projections computed here and on the cluster (metrics)
        self.scheduler = scheduler
        self.n_workers = n_workers
        self.plugins = list(plugins)
        self.cluster: LocalCluster | None = None
        self.client: Client | None = None
        self._fits: dict[tuple[str, str], object] = {}  # (kind, name) -> the Future of its latest submitted fit
        self._environ_before: dict[str, str | None] = {}  # what the nannies overwrite here, restored by `close`

    def start(self) -> "Backend":
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
            environ = {**_SINGLE_THREAD_ENV, "NUMBA_NUM_THREADS": str(kernel_threads)}
            # each nanny writes these (and PYTHONHASHSEED) into this process's environment before every
            # worker (re)start, by design (distributed.nanny's pre-spawn-environ): `close` puts them back
            self._environ_before = saved_environ((*environ, "PYTHONHASHSEED"))
            with dask.config.set({"distributed.nanny.pre-spawn-environ": environ, **QUIET_WHEN_IDLE,
                                  **PRIORITIES_ON_WORKERS}):
                # two threads per worker, at most one fit each (resource "fit"):
                # the other thread serves projections while fits run
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

    def describe(self) -> str:
        """One readable line on the started cluster: its scheduler, workers and dask threads, and the
        dask dashboard's address, or why there is none (it needs the ``bokeh`` package)."""
        workers = scheduler_workers(self.client)
        threads = sum(int(w.get("nthreads", 0)) for w in workers.values())
        where = "embedded" if self.cluster is not None else f"external ({self.scheduler})"
        line = f"dask cluster ready: {where}, {len(workers)} worker(s), {threads} dask thread(s) in all"
        if importlib.util.find_spec("bokeh") is None:
            return f"{line}; dask dashboard unavailable: it needs bokeh (pip install bokeh)"
        scope = " (this machine only)" if self.cluster is not None else ""
        return f"{line}; dask dashboard{scope}: {self.client.dashboard_link}"

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
            try:
                self.cluster.close(timeout=timeout_s)
            except Exception:
                log.warning("dask cluster did not close within %.0f s", timeout_s, exc_info=True)
            self.cluster = None
        restore_environ(self._environ_before)
        self._environ_before = {}

    def __enter__(self) -> "Backend":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def _preimage_resources(self) -> dict | None:
        """``{"preimage": 1}`` if some worker offers the resource (asked of the scheduler at most every
        30 s), else None: pre-image tasks then run on any thread."""
        return self._preimage_offer()[0]

    def _preimage_workers(self) -> int:
        """Workers that run pre-image tasks (those offering the resource, else all; at least 1), asked of
        the scheduler at most every 30 s."""
        return self._preimage_offer()[1]

    def _preimage_offer(self) -> tuple[dict | None, int]:
        now = time.monotonic()
        cached = getattr(self, "_preimage_cache", None)
        if cached is None or now - cached[0] > 30:
            workers = scheduler_workers(self.client)
            offering = sum(PREIMAGE_RESOURCE in (w.get("resources") or {}) for w in workers.values())
            cached = self._preimage_cache = (now, {PREIMAGE_RESOURCE: 1} if offering else None,
                                             max(1, offering or len(workers)))
        return cached[1], cached[2]

    def _fit_resources(self) -> dict | None:
        """``{"fit": 1}`` if some worker offers the resource (workers started with
        ``--resources fit=1``), so that each worker runs at most one fit."""
        workers = scheduler_workers(self.client)
        if any(FIT_RESOURCE in (w.get("resources") or {}) for w in workers.values()):
            return {FIT_RESOURCE: 1}
        return None

    def fit_workers(self) -> int:
        """Workers a fit may be sharded over now (`workers.shards.fit_workers`: those offering the
        ``fit`` resource, or every worker if none does). One scheduler query."""
        return len(fit_workers(self.client))

    def submit_fit(self, name: str, kind: str = "models") -> None:
        """Start the job whose record (status ``queued``) is in the store: a model's fit (``kind``
        ``"models"``) or a clustering (``"clusterings"``), the registry's ``kind_folder``.

        Returns at once; the worker writes status, progress and checkpoints.
        The task survives this client (``fire_and_forget``); if its worker dies,
        dask runs it again elsewhere and it resumes from the last checkpoint.
        """
        task = FIT_TASKS[kind]
        future = self.client.submit(
            task, self.data_dir, name, key=f"fit-{kind}-{name}-{uuid.uuid4().hex}",
            pure=False, resources=self._fit_resources(),
        )
        fire_and_forget(future)
        self._fits[(kind, name)] = future

    def balance_fits(self) -> list[tuple[str, str, str]]:
        """Move the fits that wait for a fit slot on one worker while another worker's slot is free
        (`workers.fit_balance`: after a worker died, the fits submitted while its replacement started all
        queued on the survivors). ``(key, from, to)`` of each move asked. One scheduler call."""
        return self.client.run_on_scheduler(balance_fits, FIT_RESOURCE)

    def recover(self, registry, recent_s: float = SUBMITTED_RECENTLY_S) -> list[str]:
        """Resubmit the jobs of a registry (models, clusterings) that should be running but are not:
        returns their names.

        A job whose record is ``queued`` or ``running`` but whose fit lease no
        live process holds, and which has no task on the cluster (submitted by
        this backend or by another client of the scheduler: the service's other
        API processes), lost its runner (the service restarted, or a worker died
        and dask gave up on the task). Its new run resumes from the last
        checkpoint. A job queued less than ``recent_s`` seconds ago is left to the
        process that queued it: its submission may not have reached the scheduler
        yet (it travels on another connection than the query). One recovery at a
        time among the processes sharing the data folder (an flock), so two never
        resubmit the same job. Cost: one registry listing and one scheduler query.
        """
        with try_file_lock(Path(self.data_dir) / ".recover.lock") as ours:
            return self._recover(registry, recent_s) if ours else []

    def _recover(self, registry, recent_s: float) -> list[str]:
        kind = registry.kind_folder
        on_cluster = None  # the names with a fit task on the scheduler, asked once and only if needed
        resubmitted = []
        for record in registry.list():
            name = record.name
            if record.status not in ("queued", "running"):
                self._fits.pop((kind, name), None)
                continue
            future = self._fits.get((kind, name))
            if future is not None and not future.done():
                continue
            if record.status == "queued" and seconds_since(record.updated_at) < recent_s:
                continue
            try:
                if registry.fit_alive(name):
                    continue
            except Exception:  # deleted meanwhile
                continue
            if on_cluster is None:
                on_cluster = self.client.run_on_scheduler(_fit_tasks, f"fit-{kind}-")
            if name in on_cluster:
                continue
            log.warning("fit of %s %s has no live runner; resubmitting (it resumes from its checkpoint)",
                        registry.kind, name)
            self.submit_fit(name, kind)
            resubmitted.append(name)
        return resubmitted

    def worker_pids(self) -> dict[str, int]:
        """Process ids of the cluster's workers (for monitoring and fault-injection tests)."""
        return self.client.run(os.getpid)

    def projects_here(self, model_values: int, n_rows: int) -> bool:
        """Whether `project` computes a projection of ``n_rows`` rows through a model of ``model_values``
        training values (points x features) in this process (``local_projections``). O(1)."""
        values, work = self.local_projections
        return 0 < model_values <= values and n_rows * model_values <= work

    def project(self, model_name: str, rows: np.ndarray, watch: "Watch | None" = None,
                model_values: int | None = None) -> np.ndarray:
        """Kernel principal components of ``rows`` (shape (m, n_features)) -> (m, r): in this process when
        the model is small (``model_values``, its points x features, within ``local_projections``: a dask
        round trip costs more than such a projection, and a busy worker would make it wait), else on the
        cluster at `SERVING_PRIORITY` (ahead of queued pre-image blocks). ``watch``: the request's deadline
        and disconnection (`watched_results`). Blocking: call it from a thread pool, not the event loop.
        """
        if model_values is not None and self.projects_here(model_values, len(rows)):
            self.projections["api"] += 1
            return serve_task.project_rows(self.data_dir, model_name, rows)
        self.projections["workers"] += 1
        future = self.client.submit(serve_task.project_rows, self.data_dir, model_name, rows, pure=False,
                                    priority=SERVING_PRIORITY)
        return watched_results(self.client, [future], watch)[0]

    def predict_clusters(self, name: str, rows: np.ndarray) -> np.ndarray:
        """Cluster of each of ``rows`` (m, n_features) -> (m,) under a completed clustering
        (`workers.cluster.predict_rows`). Blocking: call it from a thread pool, not the event loop."""
        return self.client.submit(cluster_task.predict_rows, self.data_dir, name, rows, pure=False).result()

    def reconstruct(self, model_name: str, rows: np.ndarray, method: str = "auto",
                    options: dict | None = None, watch: "Watch | None" = None, block_rows: int | None = None
                    ) -> np.ndarray:
        """Pre-images (m, n_features) of the rows' projections; see `workers.serve.reconstruct_rows`.

        The rows go as tasks of ``block_rows`` rows (all in one without it) at `PREIMAGE_PRIORITY`, each
        computed in a thread of lowered OS priority (`workers.priority.run_niced`), so
        that a projection submitted meanwhile runs before the blocks still queued, and a request that
        ends (its client gone, its deadline past: ``watch``) cancels the blocks not yet run and stops the
        running ones at their next step (`_stoppable`). Blocking: call it from a thread pool, not the
        event loop.
        """
        step = max(1, int(block_rows or len(rows)))
        resources = self._preimage_resources()
        return np.concatenate(self._stoppable(watch, lambda stop: (
            self.client.submit(serve_task.niced_reconstruct_rows, self.data_dir, model_name, rows[a:a + step],
                               method, options, stop, pure=False, priority=PREIMAGE_PRIORITY, resources=resources)
            for a in range(0, len(rows), step)),  # submitted as drawn, `BLOCKS_IN_FLIGHT` per worker
            window=BLOCKS_IN_FLIGHT * self._preimage_workers()))

    def denoise_image(self, model_name: str, image: np.ndarray, patch: int, stride: int, method: str = "auto",
                      options: dict | None = None, upscale: int = 1, watch: "Watch | None" = None) -> np.ndarray:
        """The denoised image (the input's dtype, the upscaled shape) of a decoded PNG's pixels;
        see `workers.images.denoise_image`. Blocking: call it from a thread pool."""
        future = self.client.submit(image_task.niced_denoise_image, self.data_dir, model_name, image, patch, stride,
                                    method, options, upscale, pure=False, priority=PREIMAGE_PRIORITY,
                                    resources=self._preimage_resources())
        return watched_results(self.client, [future], watch)[0]

    def denoise_image_tuned(self, model_name: str, image: np.ndarray, patch: int, stride: int, method: str = "auto",
                            options: dict | None = None, upscale: int = 1, tune: str = "auto",
                            n_components: int | None = None, constrained: bool = True, job: str | None = None,
                            watch: "Watch | None" = None, second_stage: str = "auto") -> tuple[np.ndarray, dict]:
        """The denoised (or hyper-resolved) image and what was chosen, with the rank, pre-image and second
        stage tuned on the image (`workers.image_jobs.denoise_with_model`), one task run as pre-image blocks are
        (resource ``preimage``, low priority, niced). ``watch``: the request's deadline and disconnection
        (`watched_results`); when it ends the running task is asked to stop too (`_stoppable`). Blocking:
        call it from a thread pool."""
        return self._stoppable(watch, lambda stop: [self.client.submit(
            run_niced, image_job_task.denoise_with_model, self.data_dir, model_name, image, patch, stride, method,
            options, upscale, tune, n_components, constrained, job, second_stage, stop, pure=False,
            priority=PREIMAGE_PRIORITY, resources=self._preimage_resources())])[0]

    def _stoppable(self, watch: "Watch | None", submit, window: int | None = None):
        """The results of the tasks ``submit(stop_token)`` submits (a list of futures, or a stream of them
        with at most ``window`` in flight), in order, watched (`watched_results`); when the request ends,
        its stop flag is raised (`store.stop_flags`) so that a task already running stops at its next step
        instead of running to its end. Blocking."""
        token = StopFlags.new_token()
        try:
            return watched_results(self.client, submit(token), watch, window=window)
        except RequestEnded:
            StopFlags(self.data_dir).raise_flag(token)
            raise

    def denoise_image_fit(self, image: np.ndarray, patch: int, stride: int, tile: int | None, tune: str = "auto",
                          fixed: dict | None = None, noise: float | None = None,
                          job: str | None = None, second_stage: str = "auto",
                          watch: "Watch | None" = None) -> tuple[np.ndarray, dict]:
        """The one-call path: the image denoised by models of its own tiles, tuned on it
        (`workers.image_jobs.denoise_with_own_models`). ``watch``: the request's deadline and disconnection
        (`watched_results`); when it ends the task is asked to stop at its next tuning candidate or tile
        (`_stoppable`). Blocking: call it from a thread pool."""
        return self._stoppable(watch, lambda stop: [self.client.submit(
            image_job_task.denoise_with_own_models, self.data_dir, image, patch, stride, tile, tune, fixed, noise,
            job, second_stage, stop, pure=False)])[0]

    def denoise_rows_tuned(self, model_name: str, rows: np.ndarray, fixed: dict | None = None,
                           watch: "Watch | None" = None) -> tuple[np.ndarray, dict]:
        """Rows through a model with the rank and pre-image tuned on them
        (`workers.image_jobs.denoise_rows_tuned`), one task run as pre-image blocks are (resource ``preimage``,
        low priority, niced). ``watch``: the request's deadline and disconnection (`watched_results`).
        Blocking: call it from a thread pool."""
        return self._stoppable(watch, lambda stop: [self.client.submit(
            run_niced, image_job_task.denoise_rows_tuned, self.data_dir, model_name, rows, fixed, stop, pure=False,
            priority=PREIMAGE_PRIORITY, resources=self._preimage_resources())])[0]

    def component_images(self, model_name: str, count: int) -> tuple[np.ndarray, np.ndarray]:
        """The leading ``count`` components of a model in input space and their eigenvalues
        (`workers.serve.component_images`). Blocking: call it from a thread pool."""
        return self.client.submit(serve_task.component_images, self.data_dir, model_name, count,
                                  pure=False).result()

    def patch_dataset(self, name: str, image: np.ndarray, patch: int, stride: int) -> DatasetInfo:
        """Create and commit data set ``name`` whose rows are the patches of a decoded PNG's pixels,
        scaled to [0, 1] (`workers.images.patch_dataset`). Blocking: call it from a thread pool."""
        future = self.client.submit(image_task.patch_dataset, self.data_dir, name, image, patch, stride, pure=False)
        return future.result()

    def import_model(self, path: str | Path, name: str | None = None, dataset: str | None = None,
                     owner: str | None = None) -> ModelRecord:
        """Create a completed model from the archive at ``path`` (a file in the data folder): verified,
        its checkpoint's serving checked by one projection, then stored (`workers.archive.import_model`).
        Runs in the calling thread, not on the cluster. Blocking: call it from a thread pool."""
        return archive_task.import_model(self.data_dir, path, name, dataset, owner)

    def transform_dataset(self, model_name: str, dataset: str, output: str, operation: str = "project",
                          method: str = "auto", options: dict | None = None, chunk_rows: int = 4096) -> DatasetInfo:
        """Project or denoise a whole data set into a new one, one dask task per chunk of rows.

        The output data set (float32) is created, each chunk written when its
        task's result is fetched (in order), then committed; if any task or
        write fails the output is deleted and the error raised (a damaged
        input chunk: `store.errors.Corrupt`). Returns its metadata. Blocking: call it from a thread pool.
        """
        store = DatasetStore(self.data_dir)
        meta = store.get(dataset)
        n_rows, version = meta.n_rows, meta.version
        width = ModelRegistry(self.data_dir).get(model_name).n_components if operation == "project" \
            else meta.n_features
        store.create(output, width, "float32")
        bounds = [(a, min(a + chunk_rows, n_rows)) for a in range(0, n_rows, chunk_rows)]
        futures = [self.client.submit(serve_task.transform_chunk, self.data_dir, model_name, dataset, version, a, b,
                                      operation, method, options, pure=False) for a, b in bounds]
        try:
            for i, future in enumerate(futures):  # tasks run in parallel; results are written in order
                store.put_chunk(output, i, np.asarray(future.result(), dtype=np.float32))
                future.release()
            return store.commit(output)
        except BaseException:  # a failed task (a corrupt chunk, a lost worker): no partial output is left
            self.client.cancel(futures)
            with contextlib.suppress(NotFound):
                store.delete(output)
            raise
