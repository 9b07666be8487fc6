"""The OS priorities of work on a worker (`workers.priority`): serving, then fits, then pre-images."""

import contextvars
import threading

import pytest

from kpca._tiles import thread_niceness
from workers.priority import FIT_NICE, PREIMAGE_NICE, fit_nice, keep_below_process, run_niced

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
    assert run_niced(thread_niceness) == min(19, base + PREIMAGE_NICE) and PREIMAGE_NICE == 19


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
