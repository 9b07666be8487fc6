"""How many threads the numerics use: kernel tiles and BLAS.

Two knobs, both needed when kernel rows and solver updates run side by side
(`kpca.driver.run_passes` with ``overlap``):

* `map_threads` -- threads sharing the tiles of one kernel block
  (`kpca.kernels.kernel_block_into`). Default ``NUMBA_NUM_THREADS`` (the
  service's embedded dask workers set it to their share of the cores,
  ``workers.backend.embedded_sizing``); `tile_threads` overrides it for the
  calling thread only, so a background thread computing kernel rows can take
  its share of the cores without changing anyone else's.
* `blas_limit` -- a process-wide cap on BLAS threads (threadpoolctl). BLAS
  keeps one thread pool per process, so this cap cannot be per thread.
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
    return override if override is not None else max(1, int(numba.config.NUMBA_NUM_THREADS))


@contextlib.contextmanager
def tile_threads(n: int):
    """Within the block, `map_threads` returns ``n`` (>= 1) in the calling thread only."""
    previous = getattr(_local, "tiles", None)
    _local.tiles = max(1, int(n))
    try:
        yield
    finally:
        _local.tiles = previous


def blas_limit(n: int):
    """Context manager capping BLAS at ``n`` threads for the whole process, restoring the old
    setting on exit (`threadpoolctl.ThreadpoolController.limit`; the controller is built once)."""
    global _controller
    with _controller_lock:
        if _controller is None:
            _controller = ThreadpoolController()
    return _controller.limit(limits=max(1, int(n)), user_api="blas")
