"""bench/_loop_states.py: where an event loop's thread spent a slow answer, from the scheduler's events."""

from __future__ import annotations

import select
import shutil
import threading
import time

import psutil
import pytest

from bench._loop_states import loop_intervals, parse_timehist, record, states_during
from tests.waiting import PATIENCE_S, wait_until

# The text of `perf sched timehist --state -g --max-stack 4` (its three header lines, then one line per
# switch off a core), for thread 2596: it runs 1 ms and goes to sleep in futex; woken after 5 ms, it
# waits 2 ms for a core, runs 0.5 ms and is preempted; 0.25 ms later it runs 0.25 ms and sleeps in epoll;
# 3 ms later (0.125 ms of them after its wake-up) it runs 0.5 ms and sleeps in a read from disk.
LISTING = """\
           time    cpu  task name                       wait time  sch delay   run time  state
                        [tid/pid]                          (msec)     (msec)     (msec)
--------------- ------  ------------------------------  ---------  ---------  ---------  -----
     100.001000 [0001]  python[2596]                        0.000      0.000      1.000      S    futex_do_wait <- __futex_wait <- futex_wait
     100.008500 [0000]  python[2596]                        7.000      2.000      0.500      R    exit_to_user_mode_loop <- do_syscall_64 <- entry_SYSCALL_64_after_hwframe
     100.009000 [0001]  python[2596]                        0.250      0.000      0.250      S    schedule_hrtimeout_range_clock <- do_epoll_wait <- do_epoll_pwait.part.0
     100.012500 [0001]  python[2596]                        3.000      0.125      0.500      D    io_schedule <- folio_wait_bit_common <- filemap_fault
     100.013000 [0001]  python[2597]                        0.000      0.000      0.400      S    futex_do_wait <- __futex_wait <- futex_wait
"""


def test_each_switch_cuts_the_thread_time_into_its_states():
    intervals = parse_timehist(LISTING)
    assert set(intervals) == {2596, 2597}
    got = [(round(a, 6), round(b, 6), state) for a, b, state in intervals[2596]]
    assert got == [
        (100.0, 100.001, "running"),
        (100.001, 100.006, "waiting_for_lock"), (100.006, 100.008, "waiting_for_core"),
        (100.008, 100.0085, "running"),
        (100.0085, 100.00875, "waiting_for_core"), (100.00875, 100.009, "running"),  # preempted: all for a core
        (100.009, 100.011875, "idle"), (100.011875, 100.012, "waiting_for_core"), (100.012, 100.0125, "running"),
    ]


def test_states_during_sums_the_overlap_of_an_answer():
    intervals = parse_timehist(LISTING)[2596]
    assert states_during(intervals, 100.0005, 100.0100) == pytest.approx({
        "running": 0.5 + 0.5 + 0.25, "waiting_for_core": 2.0 + 0.25, "waiting_for_lock": 5.0, "idle": 1.0,
        "other": 0.0}, abs=0.051)  # milliseconds, to a tenth
    assert states_during(intervals, 200.0, 201.0) == dict.fromkeys(
        ("running", "waiting_for_core", "waiting_for_lock", "idle", "other"), 0.0)


def test_a_real_recording_tells_a_lock_wait_from_idle_and_work(tmp_path):
    """perf records this machine's scheduler for a few seconds while a thread of this process waits 500 ms
    in epoll, 500 ms for a lock held elsewhere, then spins 500 ms (and sleeps again: the listing leaves out
    a thread's last run before it ends); the recording must say so. The thread starts once perf records
    (its timed child runs), and the spans are long enough that a loaded machine's waits for a core (tens
    of milliseconds) leave the verdicts as they are."""
    if shutil.which("perf") is None:
        pytest.skip("no perf on this machine")
    path = tmp_path / "sched.data"
    recording, why = record(path, 8.0)
    if recording is None:
        pytest.skip(f"perf cannot record here: {why}")
    perf = psutil.Process(recording.pid)  # it runs its timed child once its events are enabled
    wait_until(lambda: any(child.name() == "sleep" for child in perf.children()), what="perf to start recording")
    perf_started = time.monotonic()
    held = threading.Lock()
    held.acquire()
    marks: dict = {}

    def waits():
        marks["tid"] = threading.get_native_id()
        marks["idle"] = time.monotonic()
        select.epoll().poll(0.5)
        marks["lock"] = time.monotonic()
        held.acquire(timeout=0.5)
        marks["spin"] = time.monotonic()
        while time.monotonic() < marks["spin"] + 0.5:
            pass
        marks["end"] = time.monotonic()
        select.epoll().poll(0.05)

    thread = threading.Thread(target=waits)
    thread.start()
    thread.join()
    recording.wait(timeout=PATIENCE_S)
    assert marks["end"] < perf_started + 8.0, "the thread ran past the recording's end"
    intervals = loop_intervals(path, [marks["tid"]])[marks["tid"]]
    idle = states_during(intervals, marks["idle"], marks["lock"])
    lock = states_during(intervals, marks["lock"], marks["spin"])
    spin = states_during(intervals, marks["spin"], marks["end"])
    assert idle["idle"] > 400, idle
    assert lock["waiting_for_lock"] > 400, lock
    assert spin["running"] + spin["waiting_for_core"] > 450 and spin["running"] > 50, spin
