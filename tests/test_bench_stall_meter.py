"""bench/_stall_meter.py: the machine's own stalls beside bench/load.py's probers."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest

from bench._stall_meter import stall_during, stall_process, stall_summary
from tests.waiting import PATIENCE_S


def test_stall_during_is_the_longest_overlap_with_the_answer():
    stalls = [(1.00, 0.050), (1.20, 0.010), (2.00, 0.300)]
    assert stall_during(stalls, 0.90, 0.20) == pytest.approx(0.050)  # inside the answer: all of it
    assert stall_during(stalls, 1.03, 0.20) == pytest.approx(0.020)  # the first's end, the second whole
    assert stall_during(stalls, 2.10, 0.05) == pytest.approx(0.050)  # the answer inside the stall
    assert stall_during(stalls, 1.50, 0.20) == 0.0  # none overlaps
    assert stall_during([], 0.0, 1.0) == 0.0


def test_summary_counts_and_orders_the_stalls():
    measured = {"available": True, "began": 0.5, "wakeups": 1000,
                "stalls": [(5.0, 0.004), (6.0, 0.120), (7.0, 0.060), (8.0, 0.011), (9.0, 0.005), (9.5, 0.007)]}
    summary = stall_summary(measured)
    assert summary["from_s"] == 0.5 and summary["wakeups"] == 1000
    assert summary["over_ms"] == {"10": 3, "50": 2, "100": 1}
    assert summary["max_ms"] == 120.0
    assert [(s["ms"], s["at_s"]) for s in summary["longest"]] == [(5.0, 9.0), (7.0, 9.5), (11.0, 8.0),
                                                                   (60.0, 7.0), (120.0, 6.0)]
    refused = {"available": False, "why": "real-time priority refused"}
    assert stall_summary(refused) == refused


def _meter(pipe):
    pipe.send("started")
    start_at, stop_at = pipe.recv()
    pipe.send(stall_process(start_at, stop_at))


@pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="Linux scheduling calls")
def test_a_stopped_meter_reports_the_stall_where_it_happened():
    """The meter's process stopped (SIGSTOP) for 80 ms in its window: one stall of at least that long,
    starting then; without real-time priority it says why instead."""
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    meter = context.Process(target=_meter, args=(theirs,))
    meter.start()
    try:
        assert ours.poll(PATIENCE_S) and ours.recv() == "started"  # the spawned interpreter has imported
        start_at = time.monotonic() + 0.1
        ours.send((start_at, start_at + 3.0))  # the stop below falls in it, however late this process wakes
        time.sleep(max(0.0, start_at + 0.2 - time.monotonic()))
        stopped_at = time.monotonic()
        os.kill(meter.pid, signal.SIGSTOP)
        time.sleep(0.08)
        os.kill(meter.pid, signal.SIGCONT)
        continued_at = time.monotonic()
        assert ours.poll(PATIENCE_S)
        measured = ours.recv()
    finally:
        meter.join(PATIENCE_S)
    if not measured["available"]:  # no root, no CAP_SYS_NICE
        assert "refused" in measured["why"]
        pytest.skip(measured["why"])
    assert start_at <= measured["began"] < stopped_at and measured["wakeups"] > 50
    longest = max(measured["stalls"], key=lambda s: s[1])
    assert longest[1] >= 0.07
    assert stopped_at - 0.01 <= longest[0] <= continued_at - 0.07  # due while stopped, then late
    assert stall_during(measured["stalls"], stopped_at, continued_at - stopped_at) >= 0.07
