"""Crash recovery on a real LocalCluster: a worker process killed mid-fit, and
fits that lost their runner found again by `Backend.recover`."""

import os
import signal
import time

import numpy as np
import pytest

from store import CheckpointStore, DatasetStore, ModelRegistry
from workers import Backend


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, digits):
    root = tmp_path_factory.mktemp("recovery")
    ds = DatasetStore(root)
    ds.create("digits", 64, "float64")
    ds.put_chunk("digits", 0, digits[:700])
    ds.commit("digits")
    return root


@pytest.fixture(scope="module")
def backend(data_dir):
    with Backend(data_dir, n_workers=2) as b:
        yield b


def record(name, passes):
    return {"name": name, "dataset": "digits", "kernel": {"type": "gaussian", "sigma": 3.0}, "n_components": 6,
            "solver": "kha-smd", "params": {"passes": passes, "seed": 5, "block_size": 50}, "status": "queued",
            "progress": None, "history": [], "error": None}


def wait(registry, name, predicate, timeout=240):
    deadline = time.monotonic() + timeout
    while not predicate(current := registry.get(name)):
        assert time.monotonic() < deadline, current
        time.sleep(0.05)
    return current


def done(r):
    return r["status"] in ("completed", "failed", "cancelled")


def test_killed_worker_fit_resumes_and_matches_an_uninterrupted_run(data_dir, backend):
    registry, checkpoints = ModelRegistry(data_dir), CheckpointStore(data_dir)
    passes = 12
    registry.create("reference", record("reference", passes))
    backend.submit_fit("reference")
    assert wait(registry, "reference", done)["status"] == "completed"

    registry.create("victim", record("victim", passes))
    backend.submit_fit("victim")
    wait(registry, "victim", lambda r: (r.get("progress") or {}).get("pass", 0) >= 3)
    processing = backend.client.processing()
    holder = next(addr for addr, keys in processing.items() if any(str(k).startswith("fit-victim") for k in keys))
    os.kill(backend.worker_pids()[holder], signal.SIGKILL)
    final = wait(registry, "victim", done)
    assert final["status"] == "completed", final["error"]
    assert [h["pass"] for h in final["history"]] == list(range(1, passes + 1))
    reference, resumed = checkpoints.load("reference"), checkpoints.load("victim")
    for key in ("A", "AK", "B", "rho"):
        assert np.array_equal(reference[key], resumed[key]), key


def test_recover_resubmits_a_fit_that_lost_its_runner(data_dir, backend):
    registry = ModelRegistry(data_dir)
    # a record left "running" by a service that died: no live process holds its lease
    registry.create("orphan", {**record("orphan", 3), "status": "running"})
    assert backend.recover(registry) == ["orphan"]
    assert backend.recover(registry) == []  # its new task is pending or running: not submitted twice
    assert wait(registry, "orphan", done)["status"] == "completed"
    assert backend.recover(registry) == []


def test_a_checkpoint_saved_before_BK_was_kept_resumes(data_dir, backend):
    """A kha-smd checkpoint without ``BK`` (written before 2026-11-26): the resumed fit computes
    B K' from the rows (kpca.solvers.complete_state) and ends where an uninterrupted fit does."""
    registry, checkpoints = ModelRegistry(data_dir), CheckpointStore(data_dir)
    registry.create("whole", record("whole", 6))
    registry.create("legacy", record("legacy", 3))
    for name in ("whole", "legacy"):
        backend.submit_fit(name)
    for name in ("whole", "legacy"):
        assert wait(registry, name, done)["status"] == "completed"
    old = checkpoints.load("legacy", 3)
    checkpoints.save("legacy", 3, {k: v for k, v in old.items() if k != "BK"})
    registry.update("legacy", params=record("legacy", 6)["params"], status="queued")
    backend.submit_fit("legacy")
    final = wait(registry, "legacy", done)
    assert final["status"] == "completed", final["error"]
    whole, resumed = checkpoints.load("whole"), checkpoints.load("legacy")
    assert resumed["pass"] == 6 and "BK" in resumed
    for key in ("A", "AK", "B", "BK", "rho"):  # B K' recomputed, not carried: equal up to rounding
        np.testing.assert_allclose(resumed[key], whole[key], rtol=1e-7, atol=1e-9 * np.abs(whole[key]).max(),
                                   err_msg=key)
