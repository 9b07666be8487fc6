"""Crash recovery on a real LocalCluster: a worker process killed mid-fit, and
fits that lost their runner found again by `Backend.recover`."""

import os
import signal

import numpy as np
import pytest

from kpca.rows import Centering
from kpca.solvers import SOLVERS
from store import CheckpointStore, DatasetStore, ModelRegistry
from store.jobs.records import ModelRecord
from tests.store_checks import committed_digits, ended, wait_for_record
from tests.waiting import wait_until
from workers import Backend
from workers.fit import open_rows


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, digits):
    return committed_digits(tmp_path_factory.mktemp("recovery"), digits[:700])


@pytest.fixture(scope="module")
def backend(data_dir):
    with Backend(data_dir, n_workers=2) as b:
        yield b


def record(data_dir, name, passes):
    """A queued kha-smd record as the service makes it (parameters checked against the data set's rows), from the
    paper's random start: its stochastic passes all run (the default would be exact at its start here)."""
    return ModelRecord.new(name, DatasetStore(data_dir).get("digits"), kernel={"type": "gaussian", "sigma": 3.0},
                           n_components=6, solver="kha-smd",
                           params={"passes": passes, "seed": 5, "block_size": 50, "init": "random"})


def test_killed_worker_fit_resumes_and_matches_an_uninterrupted_run(data_dir, backend):
    registry, checkpoints = ModelRegistry(data_dir), CheckpointStore(data_dir)
    passes = 12
    registry.create(record(data_dir, "reference", passes))
    backend.submit_fit("reference")
    assert wait_for_record(registry, "reference", ended).status == "completed"

    registry.create(record(data_dir, "victim", passes))
    backend.submit_fit("victim")
    wait_for_record(registry, "victim", lambda r: r.passes_done >= 3)
    processing = backend.client.processing()
    holder = next(addr for addr, keys in processing.items() if any(str(k).startswith("fit-models-victim") for k in keys))
    os.kill(backend.worker_pids()[holder], signal.SIGKILL)
    final = wait_for_record(registry, "victim", ended)
    assert final.status == "completed", final.error
    assert [h.pass_ for h in final.history] == list(range(1, passes + 1))
    reference, resumed = checkpoints.load("reference"), checkpoints.load("victim")
    for key in ("A", "AK", "B", "rho"):
        assert np.array_equal(reference[key], resumed[key]), key


def test_recover_resubmits_a_fit_that_lost_its_runner(data_dir, backend):
    registry = ModelRegistry(data_dir)
    # a record left "running" by a service that died: no live process holds its lease
    registry.create(record(data_dir, "orphan", 3).model_copy(update={"status": "running"}))
    assert backend.recover(registry) == ["orphan"]
    assert backend.recover(registry) == []  # its new task is pending or running: not submitted twice
    assert wait_for_record(registry, "orphan", ended).status == "completed"
    assert backend.recover(registry) == []


def test_a_checkpoint_saved_before_BK_was_kept_resumes(data_dir, backend):
    """A kha-smd checkpoint without ``BK`` (written before 2026-11-26): the resumed fit computes
    B K' from the rows (the solver's ``restore``, `kpca.solvers.SOLVERS`["kha-smd"], which the driver
    calls) and ends where an uninterrupted fit does."""
    registry, checkpoints = ModelRegistry(data_dir), CheckpointStore(data_dir)
    registry.create(record(data_dir, "whole", 6))
    registry.create(record(data_dir, "legacy", 3))
    for name in ("whole", "legacy"):
        backend.submit_fit(name)
    for name in ("whole", "legacy"):
        assert wait_for_record(registry, name, ended).status == "completed"
    old = checkpoints.load("legacy", 3)
    stripped = {k: v for k, v in old.items() if k != "BK"}
    # the solver's restore computes the missing B K' from the rows
    rows = open_rows(DatasetStore(data_dir), registry.get("legacy"))
    rows.centering = Centering.from_state(old)
    restored = SOLVERS["kha-smd"].restore(stripped, rows, 50)
    np.testing.assert_allclose(restored["BK"], old["BK"], rtol=1e-7, atol=1e-9 * np.abs(old["BK"]).max())
    checkpoints.save("legacy", 3, stripped)
    registry.update("legacy", params=record(data_dir, "legacy", 6).params, status="queued")
    backend.submit_fit("legacy")
    final = wait_for_record(registry, "legacy", ended)
    assert final.status == "completed", final.error
    whole, resumed = checkpoints.load("whole"), checkpoints.load("legacy")
    assert resumed["pass"] == 6 and "BK" in resumed
    for key in ("A", "AK", "B", "BK", "rho"):  # B K' recomputed, not carried: equal up to rounding
        np.testing.assert_allclose(resumed[key], whole[key], rtol=1e-7, atol=1e-9 * np.abs(whole[key]).max(),
                                   err_msg=key)


def test_recover_leaves_a_fit_queued_by_another_client_of_the_scheduler(data_dir):
    """Issue 30 (several API processes, one cluster): a fit submitted by one process and still waiting
    for a fit slot is on the scheduler, not in the other process's futures; the other's recovery must not
    submit it again (before: it did, every watchdog round, each copy run when a slot freed). A cluster of
    one worker, so that one long fit holds its only fit slot."""
    registry = ModelRegistry(data_dir)
    with Backend(data_dir, n_workers=1) as one, Backend(data_dir, scheduler=one.cluster.scheduler_address) as other:
        registry.create(record(data_dir, "busy", 10_000))
        one.submit_fit("busy")
        try:
            wait_for_record(registry, "busy", lambda r: r.status == "running" and r.passes_done >= 1)
            registry.create(record(data_dir, "waiting", 3))
            one.submit_fit("waiting")
            # just queued: its submission may still be on its way to the scheduler, so it is left alone
            assert other.recover(registry) == []
            key = one.fits._futures[("models", "waiting")].key
            wait_until(lambda: other.client.run_on_scheduler(_known, key), what="the submission to reach the scheduler")
            # older than any grace (recent_s=0): only the scheduler's answer keeps it from a second submission
            assert other.recover(registry, recent_s=0) == []
            assert one.recover(registry, recent_s=0) == []
            assert registry.get("waiting").status == "queued"
        finally:
            registry.request_cancel("busy")
        assert wait_for_record(registry, "busy", ended).status == "cancelled"
        assert wait_for_record(registry, "waiting", ended).status == "completed"


def _known(key, dask_scheduler=None) -> bool:
    return key in dask_scheduler.tasks
