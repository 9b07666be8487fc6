"""Plugin modules: code that extends the registries (`kpca.solvers.register`) in every process.

A solver (or any registry entry) lives in an importable module that
registers it when imported. The service imports the configured modules
itself (``KPCA_SOLVER_PLUGINS``), and `ImportModules` makes every dask worker,
present and future, import them too, so that a fit or a projection of a
plugin solver runs wherever dask places it.
"""

from __future__ import annotations

import gc
import importlib
import logging
import signal

from distributed.diagnostics.plugin import WorkerPlugin


def import_modules(modules: list[str]) -> None:
    """Import each module by name (registering what it declares). ImportError names the module."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ImportError(f"solver plugin {module!r} cannot be imported: {exc}") from exc


class ImportModules(WorkerPlugin):
    """A dask worker plugin importing ``modules`` on every worker when it starts (or now, if running)."""

    name = "kpca-plugin-modules"

    def __init__(self, modules: list[str]):
        self.modules = list(modules)

    def setup(self, worker) -> None:
        import_modules(self.modules)


class IgnoreInterrupts(WorkerPlugin):
    """A dask worker plugin for the embedded cluster's worker processes: they ignore SIGINT.

    Ctrl-C in the terminal of ``make run`` interrupts the whole foreground process group: the
    service, which then closes its cluster (each nanny stops its worker), and every worker process,
    which would otherwise die of ``KeyboardInterrupt`` mid-loop and print its traceback. SIGTERM
    still ends a worker."""

    name = "kpca-ignore-interrupts"

    def setup(self, worker) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the worker's event loop runs in its main thread


#: the message a dask worker logs, with a traceback, when a heartbeat's connection to the scheduler closes
HEARTBEAT_FAILED = "Failed to communicate with scheduler during heartbeat."


class HeartbeatFailureLine(logging.Filter):
    """Turns dask's heartbeat failure (`HEARTBEAT_FAILED`, an error with the traceback of a closed
    connection) into a one-line warning naming the exception. dask logs it whenever the scheduler closes
    a worker's connection while a heartbeat is on its way, which is a race of every cluster stop: the
    service's embedded cluster stops with the service, and its terminal then showed a traceback that
    said nothing wrong had happened. Other records pass unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage() == HEARTBEAT_FAILED and record.exc_info:
            exc = record.exc_info[1]
            record.msg, record.args = "heartbeat to the scheduler failed: %s: %s", (type(exc).__name__, exc)
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info, record.exc_text = None, None
        return True


class CancelledAtStopLine(logging.Filter):
    """Drops dask's warning that a task it was running "ended with CancelledError": what every task
    running when its worker stops ends with (the service's stop closes the embedded cluster; a fit so
    stopped resumes from its last checkpoint at the next start, and the service says so,
    `workers.backend.Backend.close`). Other records pass unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().endswith("ended with CancelledError")


class QuietHeartbeatFailures(WorkerPlugin):
    """A dask worker plugin for the embedded cluster's worker processes: `HeartbeatFailureLine` on
    dask's worker logger, and `CancelledAtStopLine` on its state machine's: a stop's races and
    cancellations, not warnings and tracebacks."""

    name = "kpca-quiet-heartbeat-failures"

    def setup(self, worker) -> None:
        for name, kind in (("distributed.worker", HeartbeatFailureLine),
                           ("distributed.worker.state_machine", CancelledAtStopLine)):
            logger = logging.getLogger(name)
            if not any(isinstance(f, kind) for f in logger.filters):
                logger.addFilter(kind())


def warm_projections_here() -> bool:
    """Load the jitted code of a projection in this process now (`kpca.warmup.warm_projection`), as each
    worker does at its start (`WarmKernels`): for an API process that projects small models itself, whose
    first ``/project`` would otherwise load it with the interpreter lock held, and every request of the
    process with it. Whether it ran; a failure is logged, never raised (the first projection then loads
    the code instead). Blocking: call it from a thread."""
    try:
        from kpca.warmup import warm_projection

        warm_projection()
    except Exception as exc:  # a warm-up never stops a start
        logging.getLogger(__name__).warning("loading a projection's jitted code failed (%s: %s); the first "
                                            "/project will load it", type(exc).__name__, exc)
        return False
    return True


class WarmKernels(WorkerPlugin):
    """A dask worker plugin that loads the default fit's, serving's and image requests' jitted code when a
    worker starts (`kpca.warmup.warm_default`, `kpca.images.warmup.warm_images`), in a thread of its own so
    that the worker starts at once: a fresh worker otherwise loads it during its first fit
    (`bench/service_fit.py --cold` measures the difference). ``worker.kpca_warm`` says ``"running"``,
    ``"done"`` or the error. Then what the worker's start made is kept out of the collector's full
    collections (``gc.freeze``), which would otherwise scan it all while the worker serves."""

    name = "kpca-warm-kernels"

    def setup(self, worker) -> None:
        import threading

        def warm() -> None:
            try:
                from kpca.images.warmup import warm_images
                from kpca.warmup import warm_default

                warm_default()
                warm_images()
                gc.freeze()
                worker.kpca_warm = "done"
            except Exception as exc:  # a warm-up never stops a worker: the first fit compiles instead
                worker.kpca_warm = f"failed: {type(exc).__name__}: {exc}"

        worker.kpca_warm = "running"
        threading.Thread(target=warm, name="kpca-warm-up", daemon=True).start()
