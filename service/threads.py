"""Threads of an API process for blocking work: short steps on one limiter, waits for the cluster on another.

Two kinds of blocking work leave the event loop for threads:

* **short steps**: decoding and checking bodies, reading records, writing chunks, projecting small models
  (`starlette.concurrency.run_in_threadpool`, and FastAPI's plain ``def`` routes), on anyio's default
  limiter, set to ``api_threads`` (`set_thread_limits`);
* **waits for the cluster**: a projection, pre-image, image job or import on the workers. Their thread
  sleeps until the result comes (up to the serving deadline), on a limiter of its own, ``api_wait_threads``
  (`wait_for_cluster`).

Before, both shared anyio's 40 threads: 40 requests waiting on busy workers left no thread for a status
poll, an upload or a small projection in that process until one of them ended.
"""

from __future__ import annotations

import functools

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar

#: the limiter of the waits for the cluster, one per event loop (as anyio keeps its default limiter)
_cluster_waits: RunVar[anyio.CapacityLimiter] = RunVar("kpca_cluster_waits")


def set_thread_limits(short_steps: int, cluster_waits: int) -> None:
    """In the running event loop: at most ``short_steps`` threads for short blocking steps (anyio's default
    limiter, shared by starlette and FastAPI) and ``cluster_waits`` for waits on the cluster. O(1)."""
    anyio.to_thread.current_default_thread_limiter().total_tokens = short_steps
    _cluster_waits.set(anyio.CapacityLimiter(cluster_waits))


async def wait_for_cluster(call, *args, abandon_on_cancel: bool = False, **kwargs):
    """``call(*args, **kwargs)`` (a blocking call that waits for the workers) in a thread of the cluster
    waits' limiter (`set_thread_limits`; anyio's default 40 where it was not set). Its result.

    A cancelled wait waits for the call to return, unless ``abandon_on_cancel``: then it ends at once and
    the call runs on in its thread, its result and errors dropped (for calls that nobody waits for, such
    as the fit watchdog's at the service's stop)."""
    try:
        limiter = _cluster_waits.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(40)
        _cluster_waits.set(limiter)
    return await anyio.to_thread.run_sync(functools.partial(call, *args, **kwargs), limiter=limiter,
                                          abandon_on_cancel=abandon_on_cancel)
