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
