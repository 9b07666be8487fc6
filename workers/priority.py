"""The OS scheduling priority of work on a worker: serving first, then pre-images, then fits.

Projections run at the worker's own priority. A fit (its driver thread, the threads it starts, its
shards' actor threads) runs ``KPCA_FIT_NICE`` (default `FIT_NICE`; `workers.settings`) lower, and a
serving request's pre-image work ``KPCA_PREIMAGE_NICE`` (default `PREIMAGE_NICE`) lower: between the two,
since somebody waits for it. Linux keeps a niceness per thread, and an unprivileged thread can raise its
niceness but never lower it again; so work is niced in a thread of its own (`run_niced`),
never in a dask thread that serves next. Elsewhere everything runs at the usual priority.

Niceness only weighs a thread's share: a niced fit that holds a core still runs out its time slice
before a woken API thread gets it. ``KPCA_BACKGROUND_POLICY=idle`` (`background_policy`) also moves the
lowered threads to Linux's idle policy (``SCHED_IDLE``): the scheduler runs them only on a core no other
thread wants, and a thread of the usual policy waking on their core takes it at once, which raised the
load bench's requests/s by a fifth (docs/development.md). But it starves them outright while any other
process keeps the cores busy (docs/limits.md: a small fit that never ended beside two CPU-burning
processes), and a starved thread holding its worker's interpreter lock can stall that worker's projections
as well. So the default is ``normal``, niceness only: fits keep a share of a busy machine's
cores by their niceness, and ``idle`` is for a machine that runs the service alone.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading

from workers.settings import BACKGROUND_POLICY, FIT_NICE, PREIMAGE_NICE, worker_settings

__all__ = ["BACKGROUND_POLICY", "FIT_NICE", "PREIMAGE_NICE", "background_policy", "fit_nice", "keep_below_process",
           "lower_priority", "preimage_nice", "run_niced", "thread_policy"]


def fit_nice() -> int:
    """``KPCA_FIT_NICE`` of this process's environment (`workers.settings.WorkerSettings.fit_nice`): how
    much lower a fit runs than projections. A ValueError naming the variable if it cannot be read."""
    return worker_settings().fit_nice


def preimage_nice() -> int:
    """``KPCA_PREIMAGE_NICE`` of this process's environment (`workers.settings.WorkerSettings.preimage_nice`):
    how much lower a serving request's pre-image work runs than projections. A ValueError naming the
    variable if it cannot be read."""
    return worker_settings().preimage_nice


def background_policy() -> str:
    """``KPCA_BACKGROUND_POLICY`` of this process's environment
    (`workers.settings.WorkerSettings.background_policy`): "idle" or "normal". A ValueError naming the
    variable for any other value."""
    return worker_settings().background_policy


def _idle_policy(tid: int) -> None:
    """Move thread ``tid`` to ``SCHED_IDLE`` where `background_policy` asks for it and the platform has it
    (needs no privilege); irreversible for an unprivileged thread. O(1)."""
    if background_policy() == "idle" and hasattr(os, "SCHED_IDLE"):
        with contextlib.suppress(OSError):
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))


def thread_policy() -> str:
    """The calling thread's scheduling policy: "idle" (``SCHED_IDLE``) or "normal" (any other). O(1), one
    system call."""
    try:
        return "idle" if os.sched_getscheduler(0) == os.SCHED_IDLE else "normal"
    except (AttributeError, OSError):
        return "normal"


def lower_priority(nice: int) -> int | None:
    """Raise the calling thread's niceness by ``nice`` (at most to 19) and, for ``nice`` > 0, move it to the
    idle policy (`background_policy`); returns its niceness now, or None where the platform has no
    per-thread priority. Irreversible for this thread. O(1)."""
    try:
        tid = threading.get_native_id()
        target = min(19, os.getpriority(os.PRIO_PROCESS, tid) + max(0, int(nice)))
        os.setpriority(os.PRIO_PROCESS, tid, target)
    except (AttributeError, OSError):  # no per-thread priority here: run as it is
        return None
    if nice > 0:
        _idle_policy(tid)
    return target


def keep_below_process(nice: int) -> int | None:
    """Make the calling thread (one that keeps running work of one kind: a shard's actor thread) at
    least ``nice`` lower than the process's main thread, without lowering it further on each call, and
    for ``nice`` > 0 of the idle policy (`background_policy`); returns its niceness now, or None where the
    platform has no per-thread priority. O(1)."""
    try:
        tid = threading.get_native_id()
        target = min(19, os.getpriority(os.PRIO_PROCESS, os.getpid()) + max(0, int(nice)))
        if os.getpriority(os.PRIO_PROCESS, tid) < target:
            os.setpriority(os.PRIO_PROCESS, tid, target)
        if nice > 0:
            _idle_policy(tid)
        return os.getpriority(os.PRIO_PROCESS, tid)
    except (AttributeError, OSError):
        return None


def run_niced(function, *args, nice: int | None = None):
    """``function(*args)`` in a new thread of this process whose priority is lowered by ``nice`` (default:
    `preimage_nice`; `lower_priority`), in a copy of the caller's context (so dask's ``get_worker`` still answers),
    its result returned or its exception raised. The thread ends with the call, so the dask thread
    that waits for it keeps its own priority for the projections it runs next. Cost: one thread start."""
    outcome: dict = {}
    context = contextvars.copy_context()
    if nice is None:
        nice = preimage_nice()

    def body() -> None:
        if nice:
            lower_priority(nice)
        try:
            outcome["value"] = function(*args)
        except BaseException as exc:  # raised again in the calling thread
            outcome["error"] = exc

    thread = threading.Thread(target=context.run, args=(body,), name=f"kpca-niced-{nice}", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
