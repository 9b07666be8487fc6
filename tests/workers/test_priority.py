"""The OS priorities of work on a worker (`workers.priority`): serving first, then pre-images, then fits."""

import contextvars
import os
import threading

import pytest

from kpca._tiles import thread_niceness
from workers.priority import (FIT_NICE, PREIMAGE_NICE, background_policy, fit_nice, keep_below_process,
                              preimage_nice, run_niced, thread_policy)

WHO = contextvars.ContextVar("who")  # as dask's worker context variable (`distributed.get_worker`)


def test_run_niced_lowers_only_its_own_thread_and_keeps_the_callers_context():
    base = thread_niceness()
    token = WHO.set("worker-1")
    try:
        inside = run_niced(lambda x: (x, thread_niceness(), WHO.get(), threading.current_thread().name), 7, nice=4)
    finally:
        WHO.reset(token)
    assert inside == (7, min(19, base + 4), "worker-1", "kpca-niced-4")
    assert thread_niceness() == base  # the caller (a dask thread that serves next) keeps its priority
    assert run_niced(thread_niceness) == min(19, base + PREIMAGE_NICE) and PREIMAGE_NICE == 5


def test_run_niced_raises_the_calls_exception_in_the_caller():
    def fails():
        raise KeyError("model")

    with pytest.raises(KeyError, match="model"):
        run_niced(fails, nice=1)


def test_a_shards_actor_thread_is_lowered_once_however_often_it_is_asked():
    base = thread_niceness()

    def twice():
        return keep_below_process(3), keep_below_process(3), thread_niceness()

    assert run_niced(twice, nice=0) == (min(19, base + 3),) * 3


def test_fit_nice_reads_its_variable_and_clips_it(monkeypatch):
    monkeypatch.delenv("KPCA_FIT_NICE", raising=False)
    assert fit_nice() == FIT_NICE == 10
    for value, expected in (("0", 0), ("4", 4), ("40", 19), ("-3", 0)):
        monkeypatch.setenv("KPCA_FIT_NICE", value)
        assert fit_nice() == expected


def test_preimage_work_runs_between_projections_and_fits_and_reads_its_variable(monkeypatch):
    """Pre-image work (a request somebody waits for) runs below projections but above fits by default, so a
    busy machine's other processes and fits do not starve it; KPCA_PREIMAGE_NICE moves it, clipped to 0-19."""
    monkeypatch.delenv("KPCA_PREIMAGE_NICE", raising=False)
    assert 0 < preimage_nice() == PREIMAGE_NICE < FIT_NICE
    base = thread_niceness()
    for value, expected in (("0", 0), ("12", 12), ("40", 19), ("-3", 0), ("", PREIMAGE_NICE)):
        monkeypatch.setenv("KPCA_PREIMAGE_NICE", value)
        assert preimage_nice() == expected
        assert run_niced(thread_niceness) == min(19, base + expected)
    monkeypatch.setenv("KPCA_PREIMAGE_NICE", "high")
    with pytest.raises(ValueError, match="KPCA_PREIMAGE_NICE"):
        preimage_nice()


def started_thread_policy() -> int:
    """The scheduling policy of a thread the calling thread starts (as a fit starts its tile pool)."""
    seen = []
    thread = threading.Thread(target=lambda: seen.append(os.sched_getscheduler(0)))
    thread.start()
    thread.join()
    return seen[0]


def test_lowered_threads_run_at_the_idle_policy_and_the_caller_keeps_its_own(monkeypatch):
    """With ``KPCA_BACKGROUND_POLICY=idle`` a fit's or pre-image's thread (and the threads it starts) only gets a
    core no usual thread wants: a woken API or projection thread takes the core at once instead of waiting
    out a niced thread's slice."""
    monkeypatch.setenv("KPCA_BACKGROUND_POLICY", "idle")
    assert background_policy() == "idle"
    assert run_niced(os.sched_getscheduler, 0, nice=1) == os.SCHED_IDLE
    assert run_niced(thread_policy, nice=1) == "idle" and thread_policy() == "normal"
    assert run_niced(started_thread_policy, nice=FIT_NICE) == os.SCHED_IDLE
    assert run_niced(os.sched_getscheduler, 0, nice=0) == os.SCHED_OTHER  # not lowered: the usual policy
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the caller, a dask thread that serves next
    assert run_niced(lambda: (keep_below_process(2), os.sched_getscheduler(0))[1], nice=0) == os.SCHED_IDLE


def test_the_normal_background_policy_is_the_default(monkeypatch):
    """Lowered threads are niced only unless asked: the idle policy starves them beside any busy process."""
    monkeypatch.delenv("KPCA_BACKGROUND_POLICY", raising=False)
    assert background_policy() == "normal"
    assert run_niced(lambda: (thread_niceness(), os.sched_getscheduler(0)), nice=3) == (
        min(19, thread_niceness() + 3), os.SCHED_OTHER)


def test_the_normal_background_policy_lowers_by_niceness_only(monkeypatch):
    monkeypatch.setenv("KPCA_BACKGROUND_POLICY", "Normal ")
    assert run_niced(lambda: (thread_niceness(), os.sched_getscheduler(0)), nice=3) == (
        min(19, thread_niceness() + 3), os.SCHED_OTHER)
    monkeypatch.setenv("KPCA_BACKGROUND_POLICY", "fastest")
    with pytest.raises(ValueError, match="KPCA_BACKGROUND_POLICY"):
        background_policy()
