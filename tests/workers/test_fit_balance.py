"""Fits queued on one worker while another's fit slot is free are moved there (`workers.fit_balance`).

The case that shows it: a worker killed mid-fit; while its replacement starts, two fits are
submitted, and dask places both on the surviving worker (the only one offering the ``fit`` resource).
The second waits there for the first to end even after the replacement has joined: dask's work
stealing counts threads, not resources. `Backend.balance_fits` (the fit watchdog's) moves it. Real
LocalCluster, real worker kill."""

import os
import signal
import time

import pytest

from store import DatasetStore, ModelRegistry
from store.jobs.records import ModelRecord
from tests.store_checks import committed_digits, ended, wait_for_record
from tests.waiting import wait_until
from workers import Backend
from workers.shards import FIT_RESOURCE, scheduler_workers


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, digits):
    return committed_digits(tmp_path_factory.mktemp("balance"), digits[:400])


def record(data_dir, name, passes):
    return ModelRecord.new(name, DatasetStore(data_dir).get("digits"), kernel={"type": "gaussian", "sigma": 3.0},
                           n_components=4, solver="kha-smd",
                           params={"passes": passes, "seed": 5, "block_size": 50, "init": "random"})


def fit_workers(backend) -> dict[str, list[str]]:
    """Worker address -> the fit tasks processing there, for the workers offering the fit resource."""
    offering = {address for address, worker in scheduler_workers(backend.client).items()
                if (worker.get("resources") or {}).get(FIT_RESOURCE)}
    return {address: [str(key) for key in keys if str(key).startswith("fit-")]
            for address, keys in backend.client.processing().items() if address in offering}


def test_fits_queued_behind_a_busy_worker_move_to_its_replacement(data_dir):
    registry = ModelRegistry(data_dir)
    names = ("first", "second")
    with Backend(data_dir, n_workers=2) as backend:
        dead = next(iter(backend.worker_pids().values()))
        os.kill(dead, signal.SIGKILL)
        wait_until(lambda: len(scheduler_workers(backend.client)) == 1, what="the scheduler to drop the killed worker")
        try:
            for name in names:  # while the replacement starts: both go to the survivor
                registry.create(record(data_dir, name, 10_000))
                backend.submit_fit(name)
            wait_until(lambda: len(fit_workers(backend)) == 2, what="the replacement worker")
            wait_until(lambda: registry.get("first").status == "running" or registry.get("second").status == "running",
                       what="a fit running")
            busy = [address for address, keys in fit_workers(backend).items() if len(keys) == 2]
            assert busy, f"the fits were not queued on one worker: {fit_workers(backend)}"
            time.sleep(3.0)  # dask alone leaves the waiting fit where it is, the replacement idle (no event)
            statuses = sorted(registry.get(name).status for name in names)
            assert statuses == ["queued", "running"], statuses

            moved = []

            def balanced() -> bool:
                if all(registry.get(name).status == "running" for name in names):
                    return True
                moved.extend(backend.balance_fits())
                return False

            wait_until(balanced, what=lambda: f"both fits running (moved {moved}, {fit_workers(backend)})",
                       interval=1.0)
            assert moved and all(source == busy[0] and target != busy[0] for _, source, target in moved), moved
            assert sorted(len(keys) for keys in fit_workers(backend).values()) == [1, 1]
            assert backend.balance_fits() == []
        finally:
            for name in names:
                registry.request_cancel(name)
            for name in names:
                wait_for_record(registry, name, ended)


def test_nothing_moves_when_every_fit_has_its_slot(data_dir):
    registry = ModelRegistry(data_dir)
    with Backend(data_dir, n_workers=2) as backend:
        for name in ("left", "right"):
            registry.create(record(data_dir, name, 10_000))
            backend.submit_fit(name)
        try:
            wait_until(lambda: all(registry.get(n).status == "running" for n in ("left", "right")),
                       what="both fits running")
            assert backend.balance_fits() == []
        finally:
            for name in ("left", "right"):
                registry.request_cancel(name)
            for name in ("left", "right"):
                wait_for_record(registry, name, ended)
