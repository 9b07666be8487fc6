"""How a serving request waits for its tasks on the cluster: a deadline and a disconnect flag (`Watch`),
checked between short waits, and a window of tasks in flight (`watched_results`)."""

from __future__ import annotations

import collections
import itertools
import threading
import time

__all__ = ["RequestEnded", "Watch", "watched_results"]


class RequestEnded(Exception):
    """A serving request stopped waiting for its tasks: ``reason`` "deadline" (past its deadline) or
    "disconnected" (its client went away); the tasks not yet run were cancelled."""

    def __init__(self, reason: str, seconds: float):
        super().__init__(f"request ended ({reason}) after {seconds:.1f} s")
        self.reason, self.seconds = reason, seconds


class Watch:
    """What ends a serving request early: a deadline (``time.monotonic()`` seconds, None: none) and a
    flag set when its client disconnects (`disconnected`, set from the event loop)."""

    def __init__(self, deadline: float | None = None):
        self.deadline = deadline
        self.started = time.monotonic()
        self.disconnected = threading.Event()

    def ended(self) -> str | None:
        """"disconnected", "deadline" or None (the request goes on). O(1)."""
        if self.disconnected.is_set():
            return "disconnected"
        if self.deadline is not None and time.monotonic() > self.deadline:
            return "deadline"
        return None


def watched_results(client, futures, watch: Watch | None, poll_s: float = 0.1, window: int | None = None) -> list:
    """The results of ``futures`` in order, waiting in steps of ``poll_s`` seconds; when ``watch`` says
    the request ended, every future is cancelled (a task not started is dropped, a result kept is let
    go) and `RequestEnded` raised. ``futures`` is a list of futures, or an iterable that submits each
    task as it is drawn: then at most ``window`` of them are on the cluster at a time, the next one
    submitted as the oldest ends (a request of hundreds of blocks neither floods the scheduler nor
    leaves hundreds of tasks to cancel). Blocking: call it from a thread pool. Cost: the tasks' time."""
    source = iter(futures)
    window = len(futures) if window is None and isinstance(futures, list) else max(1, int(window or 1))
    pending: collections.deque = collections.deque(itertools.islice(source, window))
    results = []
    try:
        while pending:  # in order: each waited for in steps, the request's end looked at between
            future = pending[0]
            finished = threading.Event()
            future.add_done_callback(lambda _, done=finished: done.set())  # (Future.result(timeout=) races under load)
            while not finished.wait(poll_s):
                if watch is not None and (reason := watch.ended()) is not None:
                    raise RequestEnded(reason, time.monotonic() - watch.started)
            results.append(future.result())
            pending.popleft().release()
            pending.extend(itertools.islice(source, 1))
        return results
    except BaseException:
        client.cancel(list(pending))  # those not run are dropped; those done give their results back
        raise
