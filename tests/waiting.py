"""Waiting on the event, not on the clock: the suite must hold on a loaded machine (issue 54).

A test that needs something to have happened (a fit ended, a task started, a line written, a process
replaced) polls for it with `wait_until` instead of sleeping a guessed time. The bound is generous, far
beyond what the event takes on a quiet machine: it is there only so that a test whose event never comes
fails, saying what it waited for, instead of hanging until pytest-timeout. No verdict depends on the
machine's speed: on a machine ten times slower the same events come, later.

A test that must show that something does *not* happen (a killed process not restarted twice, a record
not read) cannot wait on an event; it waits on the events that must come first, then looks.

Where the verdict itself is a time (a product contract such as "answered at once beside heavy requests",
or "stopped soon after its deadline"), the test compares it with the same thing measured just before
without the heavy work, or bounds it by a quiet machine's figure `stretched` by the machine's load:
never by a bare figure that a loaded machine cannot meet.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

PATIENCE_S = 300.0  # the default bound: minutes, for events that take seconds on a quiet machine


def wait_until(predicate: Callable[[], T], timeout: float = PATIENCE_S, what: str | Callable[[], str] = "the condition",
               interval: float = 0.05) -> T:
    """Call ``predicate`` every ``interval`` seconds until it returns a true value, and return that value;
    after ``timeout`` seconds, fail the test naming ``what`` it waited for (a callable is called then,
    for a message that shows the state last seen)."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"waited {timeout:g} s for {said}; it did not come")
        time.sleep(interval)
    return value


def answers_healthz(url: str) -> bool:
    """Whether the service at ``url`` answers ``GET /healthz`` with a 200 now (not listening yet: False)."""
    import httpx

    try:
        return httpx.get(f"{url}/healthz", timeout=10).status_code == 200
    except httpx.TransportError:
        return False


def load_factor() -> float:
    """How many runnable threads share each core now: the 1-minute load average per core, at least 1 (1 on
    a quiet machine, about 2 to 3 beside two CPU burners on two cores). Reads /proc/loadavg: O(1)."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def stretched(seconds: float) -> float:
    """``seconds``, a bound measured on a quiet machine, times `load_factor`: for the few tests whose
    verdict is a product contract in time (a request stopped *soon* after its deadline, where the work
    it would otherwise run takes only a few times longer), so that a loaded machine, which slows the
    stop and the work alike, keeps the same verdict."""
    return seconds * load_factor()
