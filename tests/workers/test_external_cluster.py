"""External-cluster mode: real `dask scheduler` and `dask worker` processes on
loopback; the service submits to them instead of starting a LocalCluster, and a
sharded fit spreads over both workers."""

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import numpy as np
import pytest
import uvicorn

from bench._service import wait_healthy
from service import Settings, create_app
from tests.api_checks import wait_for_fit
from tests.store_checks import ended, wait_for_record
from tests.waiting import PATIENCE_S, wait_until

DASK = str(Path(sys.executable).parent / "dask")
# the processes import the code of this checkout, whatever the environment's install points at
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parents[2]),
                                                                  os.environ.get("PYTHONPATH")]))}
WORKERS = 2  # dask worker processes, each offering one fit


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    """Whether something accepts connections on loopback ``port`` now."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=10).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def scheduler_address():
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--dashboard-address", ":0", "--no-show"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)]
    wait_until(lambda: listening(port), what="the dask scheduler to listen")
    for _ in range(WORKERS):
        procs.append(subprocess.Popen([DASK, "worker", address, "--nthreads", "2", "--resources", "fit=1",
                                       "--no-dashboard", "--host", "127.0.0.1"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV))
    try:
        from dask.distributed import Client

        with Client(address, timeout=PATIENCE_S) as client:
            client.wait_for_workers(WORKERS, timeout=PATIENCE_S)
        yield address
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_service_fits_on_the_external_cluster(scheduler_address, tmp_path, digits):
    app = create_app(Settings(data_dir=tmp_path, scheduler=scheduler_address))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        wait_healthy(url, thread.is_alive, "the server did not start", timeout=PATIENCE_S)
        api = httpx.Client(base_url=url, timeout=60)
        api.post("/v1/datasets", json={"name": "d", "n_features": 64, "dtype": "float64"})
        api.put("/v1/datasets/d/chunks/0", json={"rows": digits[:300].tolist()})
        api.post("/v1/datasets/d/commit", json={})
        r = api.post("/v1/models", json={"name": "m", "dataset": "d", "n_components": 4,
                                         "kernel": {"type": "gaussian", "sigma": 3.0}, "params": {"passes": 3}})
        assert r.status_code == 202
        record = wait_for_fit(api, "m")
        assert record["status"] == "completed", record["error"]
        Z = api.post("/v1/models/m/project", json={"rows": digits[500:503].tolist()}).json()["components"]
        assert np.asarray(Z).shape == (3, 4)
        # the fit ran on the external cluster: no embedded cluster, and its scheduler saw the task
        assert app.state.backend.cluster is None
        from dask.distributed import Client

        with Client(scheduler_address) as client:
            prefixes = client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.task_prefixes))
        assert any(str(p).startswith("fit") for p in prefixes), prefixes
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        listener.close()


def test_a_fit_sharded_over_the_external_workers_equals_the_one_process_fit(scheduler_address, tmp_path, digits):
    """``placement.workers`` 2 on two `dask worker` processes: the shards live on both, and the fit ends
    where the same fit run in this process (no dask) ends, to 1e-10 relative."""
    from store import CheckpointStore, DatasetStore, ModelRegistry
    from store.jobs.records import ModelRecord, Placement
    from workers import Backend
    from workers.fit import FitJob

    datasets = DatasetStore(tmp_path)
    datasets.create("d", 64, "float64")
    datasets.put_chunk("d", 0, digits[:900])
    datasets.commit("d")
    registry, checkpoints = ModelRegistry(tmp_path), CheckpointStore(tmp_path)
    for name, workers in (("sharded", 2), ("reference", 1)):
        registry.create(ModelRecord.new(name, datasets.get("d"), kernel={"type": "gaussian", "sigma": 3.0},
                                        n_components=4, solver="kha-smd", placement=Placement(workers=workers),
                                        params={"passes": 3, "seed": 2, "block_size": 100}))
    with Backend(tmp_path, scheduler=scheduler_address) as backend:
        assert backend.fit_workers() == WORKERS
        backend.submit_fit("sharded")
        record = wait_for_record(registry, "sharded", ended)
    assert record.status == "completed", record.error
    assert "workers" not in record.params_used and record.progress.workers == 2
    assert FitJob(tmp_path).run("reference") == "completed"
    got, want = checkpoints.load("sharded"), checkpoints.load("reference")
    for key in ("A", "AK", "B", "BK", "rho", "centering_column_means"):
        assert np.abs(got[key] - want[key]).max() <= 1e-10 * np.abs(want[key]).max(), key


def test_only_workers_offering_fits_count_for_sharding(scheduler_address):
    """`Backend.fit_workers` counts the workers started with ``--resources fit=1``, not the others."""
    from workers import Backend
    from workers.shards import scheduler_workers

    plain = subprocess.Popen([DASK, "worker", scheduler_address, "--nthreads", "1", "--no-dashboard",
                              "--host", "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    try:
        with Backend("unused", scheduler=scheduler_address) as backend:
            backend.client.wait_for_workers(WORKERS + 1, timeout=PATIENCE_S)
            assert len(scheduler_workers(backend.client)) == WORKERS + 1
            assert backend.fit_workers() == WORKERS
    finally:
        plain.terminate()
        plain.wait(timeout=30)
