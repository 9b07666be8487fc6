"""The service on machines that share nothing but an object store (issue 57), end to end and for real: an S3 API
over HTTP (moto's server, behind a loopback proxy that can fail on demand, `tests.s3_proxy`), a ``dask scheduler``
and two ``dask worker`` processes and the API (``python -m service``), each started in its own empty folder, the
API with ``KPCA_SCHEDULER`` and ``KPCA_DATA_DIR=s3://...``.

upload -> a fit sharded over both workers -> the same fit again, its worker killed with ``kill -9`` mid-fit: it
resumes from its checkpoint on the survivor and ends where the uninterrupted one did -> a fit through a 10 s
outage of the store: it rides it out and completes -> project -> export / import -> delete; and writes the store
refuses are a clear 507 with nothing half-written. Each step prints what it saw (``pytest -s`` shows it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import numpy as np
import pytest

from bench._s3_server import BUCKET, S3Server
from tests.s3_proxy import FaultyProxy
from tests.waiting import PATIENCE_S, wait_until
from tests.workers.test_external_cluster import DASK, free_port, listening

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
LEASE_TTL_S = 10  # a killed worker's fit is taken over this long after its last renewal (default 60)
PARAMS = {"passes": 10, "seed": 5, "block_size": 50, "init": "random"}
OUTAGE_S = 10.0
OUTAGE_PASSES = 40  # the store stops after the first: most of the fit runs through and after the outage


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    """The store, the cluster and the API, each process in an empty folder of its own; stopped at the end."""
    s3 = S3Server()
    proxy = FaultyProxy((s3.host, s3.port))
    url = f"s3://{BUCKET}/{uuid.uuid4().hex}"
    env = {**os.environ, **s3.environment(), "AWS_ENDPOINT_URL": proxy.endpoint,
           "KPCA_LEASE_TTL_S": str(LEASE_TTL_S), "KPCA_READ_CACHE_MB": "64",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.pop("KPCA_DATA_DIR", None)
    port = free_port()
    scheduler = f"tcp://127.0.0.1:{port}"
    procs: dict[str, subprocess.Popen] = {}

    def start(name: str, argv: list[str], **extra) -> None:
        folder = tmp_path_factory.mktemp(name)  # its own empty folder: nothing shared on disk
        log = open(folder / "log.txt", "w")
        procs[name] = subprocess.Popen(argv, cwd=folder, env={**env, **extra}, stdout=log, stderr=subprocess.STDOUT)

    start("scheduler", [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--dashboard-address", ":0",
                        "--no-show"])
    wait_until(lambda: listening(port), what="the dask scheduler to listen")
    for index in range(2):
        start(f"worker{index}", [DASK, "worker", scheduler, "--nthreads", "2", "--resources", "fit=1,preimage=1",
                                 "--no-dashboard", "--host", "127.0.0.1", "--no-nanny"])  # no nanny: a killed worker stays dead
    api_port = free_port()
    start("api", [sys.executable, "-m", "service", "--port", str(api_port), "--data-dir", url],
          KPCA_SCHEDULER=scheduler, KPCA_API_PROCESSES="1", KPCA_WATCHDOG_S="2")
    api = httpx.Client(base_url=f"http://127.0.0.1:{api_port}", timeout=120)

    def healthy() -> bool:
        try:
            return api.get("/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(healthy, what="the API to answer /healthz")
        from dask.distributed import Client

        with Client(scheduler, timeout=PATIENCE_S) as client:
            client.wait_for_workers(2, timeout=PATIENCE_S)
        say(f"store {url} behind {proxy.endpoint}; scheduler {scheduler}; 2 workers and the API, each in its own "
            "empty folder")
        yield {"api": api, "scheduler": scheduler, "proxy": proxy, "procs": procs, "url": url}
    finally:
        api.close()
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        proxy.stop()
        s3.stop()


def fit(api, name: str, workers: int, passes: int = PARAMS["passes"]) -> None:
    r = api.post("/v1/models", json={"name": name, "dataset": "digits", "n_components": 6, "solver": "kha-smd",
                                     "kernel": {"type": "gaussian", "sigma": 3.0},
                                     "params": {**PARAMS, "passes": passes}, "placement": {"workers": workers}})
    assert r.status_code == 202, r.text


def record_of(api, name: str) -> dict:
    return api.get(f"/v1/models/{name}").json()


def wait_ended(api, name: str) -> dict:
    seen = {}

    def ended() -> bool:
        try:
            seen["r"] = record_of(api, name)
        except httpx.HTTPError:
            return False
        return seen["r"].get("status") not in ("queued", "running")

    wait_until(ended, what=lambda: f"the fit of {name} to end (last seen {seen.get('r')})")
    return seen["r"]


def project(api, name: str, rows: np.ndarray) -> np.ndarray:
    r = api.post(f"/v1/models/{name}/project", json={"rows": rows.tolist()})
    assert r.status_code == 200, r.text
    return np.asarray(r.json()["components"])


def test_upload_fit_kill_outage_export_import_delete(deployment, digits):
    api, proxy = deployment["api"], deployment["proxy"]
    rows = digits[:900]
    assert api.post("/v1/datasets", json={"name": "digits", "n_features": 64, "dtype": "float64"}).status_code == 201
    for index in range(3):
        r = api.put(f"/v1/datasets/digits/chunks/{index}", json={"rows": rows[300 * index: 300 * (index + 1)].tolist()})
        assert r.status_code == 200, r.text
    committed = api.post("/v1/datasets/digits/commit", json={}).json()
    assert committed["status"] == "ready" and committed["n_rows"] == 900
    say(f"uploaded 3 chunks and committed: {committed['n_rows']} rows, {committed['checksum'][:19]}...")

    fit(api, "reference", workers=2)
    reference = wait_ended(api, "reference")
    assert reference["status"] == "completed", reference["error"]
    assert reference["progress"]["workers"] == 2
    say(f"reference fit sharded over {reference['progress']['workers']} workers: completed, "
        f"{len(reference['history'])} passes")
    probe = digits[1000:1010]
    want = project(api, "reference", probe)

    # ---- kill -9 the worker running a fit mid-fit: it resumes from its checkpoint on the survivor
    fit(api, "victim", workers=2)
    wait_until(lambda: len(record_of(api, "victim").get("history", [])) >= 3, what="the victim's third pass")
    from dask.distributed import Client

    with Client(deployment["scheduler"]) as client:
        processing = client.processing()
        holder = next(a for a, keys in processing.items() if any(str(k).startswith("fit-models-victim") for k in keys))
        pid = client.run(os.getpid)[holder]
    done_before = len(record_of(api, "victim")["history"])
    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    say(f"kill -9 of worker {holder} (pid {pid}) running the victim's fit after {done_before} passes")
    victim = wait_ended(api, "victim")
    assert victim["status"] == "completed", victim["error"]
    assert [h["pass"] for h in victim["history"]] == list(range(1, PARAMS["passes"] + 1))
    got = project(api, "victim", probe)
    assert np.abs(got - want).max() <= 1e-8 * np.abs(want).max()
    say(f"victim resumed on the survivor and completed {time.monotonic() - killed_at:.0f} s after the kill; its "
        f"projections equal the uninterrupted fit's to {np.abs(got - want).max() / np.abs(want).max():.1e} relative")

    # ---- the store down for OUTAGE_S mid-fit: the fit rides it out
    fit(api, "outage", workers=1, passes=OUTAGE_PASSES)
    wait_until(lambda: len(record_of(api, "outage").get("history", [])) >= 1, what="the outage fit's first pass")
    passes_before = len(record_of(api, "outage")["history"])
    proxy.stop()
    say(f"store stopped (connections refused) after the outage fit's pass {passes_before} of {OUTAGE_PASSES}")
    time.sleep(OUTAGE_S)
    proxy.start()
    say(f"store started again after {OUTAGE_S:.0f} s")
    outage = wait_ended(api, "outage")
    assert outage["status"] == "completed", outage["error"]
    assert [h["pass"] for h in outage["history"]] == list(range(1, OUTAGE_PASSES + 1))
    assert passes_before < OUTAGE_PASSES
    say(f"the fit through the outage completed, its {len(outage['history'])} passes each recorded once")

    # ---- export / import / delete
    archive = api.get("/v1/models/victim/export")
    assert archive.status_code == 200
    imported = api.post("/v1/models/import", params={"name": "copy"}, content=archive.content,
                        headers={"Content-Type": "application/x-tar"})
    assert imported.status_code == 201, imported.text
    assert np.array_equal(project(api, "copy", probe), project(api, "victim", probe))
    say(f"exported victim ({len(archive.content)} bytes), imported it as copy: the same projections")
    for name in ("copy", "victim", "outage", "reference"):
        assert api.delete(f"/v1/models/{name}").status_code == 204
    assert api.get("/v1/models").json()["models"] == []
    say("deleted the four models")

    # ---- writes the store refuses: a clear error, nothing half-written
    assert api.post("/v1/datasets", json={"name": "more", "n_features": 64, "dtype": "float64"}).status_code == 201
    proxy.refuse_writes()
    try:
        refused = api.put("/v1/datasets/more/chunks/0", json={"rows": rows[:10].tolist()})
    finally:
        proxy.refuse_writes(False)
    assert refused.status_code == 507 and refused.json()["error"]["code"] == "insufficient_storage", refused.text
    after = api.get("/v1/datasets/more").json()
    assert after["staged"] == [] and after["n_rows"] == 0
    assert api.put("/v1/datasets/more/chunks/0", json={"rows": rows[:10].tolist()}).json()["staged"] == [0]
    say(f"a write the store refused: {refused.status_code} {refused.json()['error']['code']}; the data set shows "
        "nothing of it; the same write after: staged")
    for name in ("more", "digits"):
        assert api.delete(f"/v1/datasets/{name}").status_code == 204
