"""The machine's own stalls, for bench/load.py: how late a thread that nothing else on this machine may
keep waiting wakes up.

`stall_process` runs in a process of its own at real-time priority (``SCHED_FIFO``, above every normal
process and thread: the service, the load generator, the probers) and sleeps 5 ms again and again.
Each wake-up later than 3 ms is a stall that no scheduling choice inside this machine could have
avoided: the hypervisor running another guest on the virtual CPU, or the kernel busy where it cannot
be preempted. `bench/load.py` sets each of the slowest ``/healthz`` answers beside the stalls that
overlapped it (`stall_during`), so a slow answer can be told apart as the machine's or the service's.

Real-time priority needs root or ``CAP_SYS_NICE``; without it the meter reports why it did not run.
Its own cost: two hundred wake-ups a second (a 1 ms period took about 5 % of the two cores from the
load generator's share).
"""

from __future__ import annotations

import os
import time

PERIOD_S = 0.005  # the sleep asked for
REPORTED_S = 0.003  # wake-ups later than this are recorded
FIFO_PRIORITY = 50


def stall_process(start_at: float, stop_at: float) -> dict:
    """In a process of its own: at ``SCHED_FIFO`` priority, sleep `PERIOD_S` from ``start_at`` to
    ``stop_at`` (``time.monotonic()``); ``{"available": True, "began": t, "wakeups": n, "stalls": [(start,
    seconds), ...]}`` with when it began (``start_at``, or later if this process started late) and each
    stall's start (when the wake-up was due) and how late it came, or ``{"available": False, "why": ...}``
    when real-time priority is refused."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(FIFO_PRIORITY))
    except (PermissionError, AttributeError) as exc:  # not root; not Linux
        return {"available": False, "why": f"real-time priority refused ({type(exc).__name__}: {exc})"}
    time.sleep(max(0.0, start_at - time.monotonic()))
    began, stalls, wakeups = time.monotonic(), [], 0
    while (asleep_at := time.monotonic()) < stop_at:
        time.sleep(PERIOD_S)
        late = time.monotonic() - asleep_at - PERIOD_S
        wakeups += 1
        if late > REPORTED_S:
            stalls.append((asleep_at + PERIOD_S, late))
    return {"available": True, "began": began, "wakeups": wakeups, "stalls": stalls}


def stall_during(stalls: list, at: float, seconds: float) -> float:
    """The seconds of [``at``, ``at + seconds``] that the longest overlapping stall covered (0.0 for
    none); ``stalls`` as `stall_process` gives them, in the same clock. O(len(stalls))."""
    covered = (min(at + seconds, start + late) - max(at, start) for start, late in stalls)
    return max((c for c in covered if c > 0), default=0.0)


def stall_summary(measured: dict) -> dict:
    """What `stall_process` measured (its times as seconds in the window), for a result: from when it
    measured, its wake-ups, stalls over 10, 50 and 100 ms, the longest, and the five longest with their
    time."""
    if not measured.get("available"):
        return measured
    stalls = measured["stalls"]
    lengths = [late for _, late in stalls]
    return {"available": True, "from_s": round(measured["began"], 2), "wakeups": measured["wakeups"],
            "over_ms": {str(ms): sum(late > ms / 1000 for late in lengths) for ms in (10, 50, 100)},
            "max_ms": round(max(lengths, default=0.0) * 1000, 1),
            "longest": [{"ms": round(late * 1000, 1), "at_s": round(start, 2)}
                        for start, late in sorted(stalls, key=lambda s: s[1])[-5:]]}
