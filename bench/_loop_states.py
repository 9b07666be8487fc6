"""Where the API processes' event loops spent a slow answer, for bench/load.py ``--loop-states``.

The stall meter (`bench._stall_meter`) says how much of a slow ``/healthz`` answer the machine itself
took; this says what the API process's event loop (its main thread) did in the rest. `record` runs
``perf record`` over the whole machine through the window, on two scheduler events: every switch of a
thread off a core (``sched:sched_switch``, with the kernel's stack at that moment) and every wake-up
(``sched:sched_wakeup``), in the clock of ``time.monotonic``. `loop_intervals` reads them back with
``perf sched timehist --state`` and cuts each loop thread's time into intervals of one of `STATES`:

* ``running``: on a core: the loop's own work, or a request's steps it runs;
* ``waiting_for_core``: runnable (woken, or preempted while it ran) but not on a core: the machine's
  other threads, the service's and the load generator's, had the cores;
* ``waiting_for_lock``: asleep in ``futex``: the interpreter lock held by another thread of its process
  (or, rarely, another lock);
* ``idle``: asleep in ``epoll``: nothing had arrived for it;
* ``other``: asleep anywhere else (a read from disk, a page fault).

`states_during` sums them over an answer's interval. Needs Linux ``perf`` and root (or
``perf_event_paranoid`` at most 1); `record` says why where it cannot run. Its cost: the events of every
thread of the machine in a temporary file, read once, and the cores perf takes from the load it watches
(the requests/s it costs are in docs/development.md).
"""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

STATES = ("running", "waiting_for_core", "waiting_for_lock", "idle", "other")


def record(path: Path, seconds: float) -> tuple[subprocess.Popen | None, str]:
    """Start recording the machine's scheduler events into ``path`` for ``seconds`` (a ``perf record``
    process, which the caller waits for); (the process, "") or (None, why it could not start)."""
    perf = shutil.which("perf")
    if perf is None:
        return None, "no perf on PATH (Linux perf: linux-perf or linux-tools)"
    command = [perf, "record", "--quiet", "-a", "-k", "CLOCK_MONOTONIC", "-g", "--kernel-callchains",
               "-e", "sched:sched_switch", "-e", "sched:sched_wakeup", "-o", str(path), "--", "sleep", str(seconds)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _, error = process.communicate(timeout=0.5)  # a refusal (no permission, no tracepoints) ends at once
    except subprocess.TimeoutExpired:
        return process, ""
    return None, f"perf record ended at once ({process.returncode}): {error.strip()[-300:]}"


def loop_intervals(path: Path, tids: list[int]) -> dict[int, list[tuple[float, float, str]]]:
    """Each of ``tids``' time in the recording ``path`` as (start, end, state) intervals in
    ``time.monotonic`` seconds, in order (`STATES`), from ``perf sched timehist``. O(switches)."""
    command = ["perf", "sched", "timehist", "-i", str(path), "--state", "-g", "--max-stack", "4",
               "--tid", ",".join(map(str, tids))]
    return parse_timehist(subprocess.run(command, capture_output=True, text=True, check=True).stdout)


def parse_timehist(listing: str) -> dict[int, list[tuple[float, float, str]]]:
    """`loop_intervals` from the text of ``perf sched timehist --state -g``: one line per switch off a core
    (its time, the wait before the run with the part of it after the wake-up, the run, the state and
    stack it left in). O(lines)."""
    intervals: dict[int, list] = defaultdict(list)
    left_as: dict[int, str] = {}  # the state each thread left its core in, for the wait that followed
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) < 8 or not parts[0][0].isdigit() or "[" not in parts[2]:
            continue
        tid = int(parts[2].rsplit("[", 1)[1].split("/")[0].rstrip("]"))
        at, waited, delayed, ran = (float(parts[0]), float(parts[3]) / 1e3, float(parts[4]) / 1e3,
                                    float(parts[5]) / 1e3)
        began_running = at - ran
        before = left_as.get(tid, "other")
        if before == "waiting_for_core":  # preempted: the whole wait was for a core
            delayed = waited
        for interval in ((began_running - waited, began_running - delayed, before),
                         (began_running - delayed, began_running, "waiting_for_core"), (began_running, at, "running")):
            if interval[1] > interval[0]:
                intervals[tid].append(interval)
        left_as[tid] = _left_as(parts[6], " ".join(parts[7:]))
    return dict(intervals)


def _left_as(state: str, stack: str) -> str:
    """The state a thread that left its core in task state ``state`` with kernel ``stack`` waits in."""
    if state.startswith("R"):
        return "waiting_for_core"
    if "futex" in stack:
        return "waiting_for_lock"
    if "epoll" in stack:
        return "idle"
    return "other"


def states_during(intervals: list[tuple[float, float, str]], start: float, end: float) -> dict[str, float]:
    """Milliseconds of [``start``, ``end``] (``time.monotonic`` seconds) in each of `STATES`, from one
    thread's `loop_intervals`; what no interval covers (outside the recording) is left out. O(intervals)."""
    spent = dict.fromkeys(STATES, 0.0)
    for began, ended, state in intervals:
        overlap = min(ended, end) - max(began, start)
        if overlap > 0:
            spent[state] += overlap
    return {state: round(seconds * 1000, 1) for state, seconds in spent.items()}
