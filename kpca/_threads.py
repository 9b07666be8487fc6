"""How many threads the numerics use: kernel tiles and BLAS.

Two knobs, both needed when kernel rows and solver updates run side by side
(`kpca.driver.run_passes` with ``overlap``):

* `map_threads` -- threads sharing the tiles of one kernel block
  (`kpca.kernels.kernel_block_into`). Default ``NUMBA_NUM_THREADS`` (the
  service's embedded dask workers set it to their share of the cores,
  ``workers.dask_cluster.embedded_sizing``); `tile_threads` overrides it for the
  calling thread only, so a background thread computing kernel rows can take
  its share of the cores without changing anyone else's.
* `blas_limit` / `serial_blas` -- a process-wide cap on BLAS threads
  (threadpoolctl). BLAS keeps one thread pool per process, so this cap cannot
  be per thread; the one-thread cap is reference counted across threads.
  `kpca._dense` uses it for small dense LAPACK calls.
"""

from __future__ import annotations

import contextlib
import threading

import numba
from threadpoolctl import ThreadpoolController

_local = threading.local()
_controller: ThreadpoolController | None = None
_controller_lock = threading.Lock()


def map_threads() -> int:
    """Threads for kernel tiles in the calling thread: the `tile_threads` override
    if one is active, else numba's configured thread count (``NUMBA_NUM_THREADS``)."""
    override = getattr(_local, "tiles", None)
    configured = numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]  # numba.config sets it at import by setattr
    return override if override is not None else max(1, int(configured))


@contextlib.contextmanager
def tile_threads(n: int):
    """Within the block, `map_threads` returns ``n`` (>= 1) in the calling thread only."""
    previous = getattr(_local, "tiles", None)
    _local.tiles = max(1, int(n))
    try:
        yield
    finally:
        _local.tiles = previous


def _controller_() -> ThreadpoolController:
    global _controller
    with _controller_lock:
        if _controller is None:
            _controller = ThreadpoolController()
    return _controller


_serial_lock = threading.Lock()
_serial_depth = 0
_serial_restore: list = []  # (library controller, its threads before the cap)


def _set_threads(library, n: int) -> None:
    """Set a BLAS library's process-wide thread count from any thread. threadpoolctl 3.8 lets only the
    first thread that limits OpenBLAS change it later (its "controlling thread"), but the numerics run
    in dask's worker threads: its unrestricted setter is used where it has one."""
    getattr(library, "_real_set_num_threads", library.set_num_threads)(int(n))


@contextlib.contextmanager
def serial_blas():
    """BLAS on one thread while any caller in the process is inside the block.

    BLAS keeps one thread pool per process, so a cap set by one thread holds for all; this one is
    reference counted, so threads that enter and leave in any order leave BLAS as it was once the
    last one leaves (nested `threadpoolctl` limits would restore each other's settings in the wrong
    order, and ignore all but one thread). Cost: a lock and, on the first entry and the last exit,
    one call per BLAS library.
    """
    global _serial_depth
    with _serial_lock:
        if _serial_depth == 0:
            libraries = _controller_().select(user_api="blas").lib_controllers
            _serial_restore[:] = [(library, library.num_threads) for library in libraries]
            for library, _ in _serial_restore:
                _set_threads(library, 1)
        _serial_depth += 1
    try:
        yield
    finally:
        with _serial_lock:
            _serial_depth -= 1
            if _serial_depth == 0:
                for library, threads in _serial_restore:
                    _set_threads(library, threads)
                _serial_restore.clear()


def blas_limit(n: int):
    """Context manager capping BLAS at ``n`` threads for the whole process, restoring the old setting on
    exit: `serial_blas` for ``n = 1`` (reference counted, safe across threads), else
    `threadpoolctl.ThreadpoolController.limit` (the controller is built once)."""
    if int(n) <= 1:
        return serial_blas()
    return _controller_().limit(limits=int(n), user_api="blas")
