"""``python -m service`` with several API processes (``api_processes``, docs/scaling.md).

One Python process serves every request through one interpreter: under load it spends its time handing
the GIL between the event loop and the request threads, and the embedded dask scheduler shares it.
With ``api_processes`` n > 1 the process the user starts is a supervisor:

* it starts the embedded dask cluster (scheduler and workers; none with an external ``scheduler``) and
  keeps it for its whole life, so the scheduler no longer shares an interpreter with requests;
* it runs uvicorn's process manager: n processes, each with the whole app (`service.app.create_app`)
  and a dask client of that cluster, accept on one shared socket; one that dies is replaced;
* each process reads the same flags (``KPCA_PROCESS_ARGV``) and environment, and the scheduler's address
  (``KPCA_SCHEDULER``); its ``/events`` limit is ``max_event_streams`` / n, so the service's is unchanged;
* request counts and latencies (``kpca_http_*``) are summed over the processes at every scrape
  (prometheus_client's multiprocess mode, a folder the supervisor makes and removes);
* what must run once runs under an flock in the data folder: the fit watchdog's recovery
  (`workers.fits.Fits.recover`); the store's writes already lock across processes.

SIGTERM or SIGINT stop the processes (each finishing its requests within ``shutdown_timeout_s``), then
the cluster; a supervisor killed outright takes its API processes with it (`stop_with_parent`) and its
dask workers (their nannies watch it). Cost: the app's memory once per process.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import tempfile
import threading
import time
from typing import cast

import uvicorn

from service.access_log import log_config
from service.app import create_app
from service.flags import settings_source
from service.http_protocol import HTTP_PROTOCOL
from service.settings import ProcessHandoff, Settings
from store.places import prepared
from workers import Backend
from workers.environ import restore_environ, saved_environ
from workers.placement import machine_cores

log = logging.getLogger(__name__)

# what the supervisor writes for its API processes, which read it as `service.settings.ProcessHandoff`
ARGV_ENV = "KPCA_PROCESS_ARGV"  # the supervisor's flags
EMBEDDED_ENV = "KPCA_PROCESS_EMBEDDED"  # set when the supervisor started the cluster
SUPERVISOR_ENV = "KPCA_PROCESS_SUPERVISOR"  # the supervisor's process id
METRICS_ENV = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's multiprocess folder
MAX_AUTOMATIC = 4  # API processes when not configured, at most


def api_process_count(settings: Settings, cores: int | None = None) -> int:
    """API processes to run: ``settings.api_processes``, or when unset one per core up to
    `MAX_AUTOMATIC` (one on a one-core machine). O(1)."""
    if settings.api_processes is not None:
        return settings.api_processes
    return max(1, min(MAX_AUTOMATIC, machine_cores() if cores is None else cores))


def serve_processes(settings: Settings, argv: list[str], processes: int) -> None:
    """Serve with ``processes`` API processes (module docstring) until SIGTERM or SIGINT; the
    embedded cluster is started first and closed last. Blocks."""
    saved = saved_environ(("KPCA_SCHEDULER", EMBEDDED_ENV, METRICS_ENV, ARGV_ENV, SUPERVISOR_ENV))
    backend, metrics = None, tempfile.mkdtemp(prefix="kpca-metrics-")
    try:
        if settings.scheduler is None:
            data_dir = prepared(settings.data_dir)
            plugins = cast(list[str], settings.solver_plugins)  # a list: `Settings`' validator made it one
            backend = Backend(data_dir, n_workers=settings.n_workers, plugins=plugins,
                              warm_workers=settings.warm_workers, worker_environ=settings.worker_environ()).start()
            os.environ.update({"KPCA_SCHEDULER": backend.cluster.scheduler_address, EMBEDDED_ENV: "1"})
        # what the API processes read: they are started (and restarted) with this environment
        os.environ.update({METRICS_ENV: metrics, ARGV_ENV: json.dumps(list(argv)), SUPERVISOR_ENV: str(os.getpid())})
        log.info("serving with %d API processes, dask scheduler %s", processes,
                 backend.cluster.scheduler_address if backend is not None else settings.scheduler)
        grace = settings.shutdown_timeout_s  # seconds, a float: uvicorn hands it to asyncio.timeout
        uvicorn.run("service.processes:process_app", factory=True, workers=processes, host=settings.host,
                    port=settings.port, log_config=log_config(), http=HTTP_PROTOCOL, access_log=settings.access_log,
                    timeout_graceful_shutdown=grace)  # type: ignore[arg-type]  # uvicorn says int; a float works
    finally:
        if backend is not None:
            backend.close(settings.shutdown_timeout_s)
        shutil.rmtree(metrics, ignore_errors=True)
        restore_environ(saved)  # this process's environment as it was (main() may be called again)


def process_app():
    """The app of one API process (uvicorn's factory, called in each process): the supervisor's
    settings, with the cluster the supervisor started and this process's share of the limits. Ctrl-C
    (SIGINT) is left to the supervisor, which stops this process with SIGTERM (service/__main__.py)."""
    if threading.current_thread() is threading.main_thread():  # as uvicorn calls it: its handler is in
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    handoff = ProcessHandoff()
    stop_with_parent(handoff.supervisor if handoff.supervisor is not None else os.getppid())
    settings = Settings(_cli_settings_source=settings_source(handoff.argv))
    processes = api_process_count(settings)
    embedded = handoff.embedded  # its backend registered the warm-up with the cluster
    return create_app(settings.model_copy(update={
        "max_event_streams": max(1, settings.max_event_streams // processes),
        "warm_workers": settings.warm_workers and not embedded}))


def stop_with_parent(parent: int, interval_s: float = 0.5) -> threading.Thread:
    """A daemon thread that sends this process SIGTERM (uvicorn's graceful stop) once ``parent`` is no
    longer its parent (at once if it is not now: it died while this process started): a supervisor
    killed outright (SIGKILL, OOM) must not leave API processes serving on its socket without the
    cluster it started. Cost: one ``getppid`` per ``interval_s``."""
    def watch():
        while os.getppid() == parent:
            time.sleep(interval_s)
        log.warning("the supervisor (process %d) is gone; stopping this API process", parent)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=watch, name="kpca-parent-watch", daemon=True)
    thread.start()
    return thread
