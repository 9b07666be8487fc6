"""A full disk through the API, the kernel's own ENOSPC (issue 52): the service runs on a small tmpfs the
test mounts where it may (skipped where mounting is not allowed; tests/store/test_disk_full_kinds.py and
tests/service/test_faults_api.py inject the same refusal as a file-size limit everywhere), filled up.
Every write a request makes is then a 507 ``insufficient_storage`` and leaves nothing half-written; a fit
whose checkpoint does not fit fails saying so, and resumes once there is room; what was stored before
reads as before."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.api_checks import wait_for_fit
from tests.e2e.service_process import ServiceProcess
from tests.service.test_api_denoise_tuned import PNG, noisy_of, png, scene
from tests.store.store_helpers import temp_leftovers
from tests.waiting import wait_until

DISK_BYTES = 64 << 20
ROWS = np.random.default_rng(5207).normal(size=(2000, 8))


@pytest.fixture(scope="module")
def small_disk(tmp_path_factory) -> Path:
    point = tmp_path_factory.mktemp("small-disk")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(point)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {mounted.stderr.strip()}")
    yield point
    subprocess.run(["umount", "-l", str(point)], capture_output=True)


@pytest.fixture(scope="module")
def api(small_disk) -> httpx.Client:
    os.environ["KPCA_MAX_DATA_BYTES"] = "unlimited"  # the disk refuses, not the limit
    try:
        service = ServiceProcess(small_disk / "data")
    finally:
        del os.environ["KPCA_MAX_DATA_BYTES"]
    try:
        with httpx.Client(base_url=service.wait_ready().url, timeout=120) as client:
            yield client
    finally:
        service.stop()


def npy(rows: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, rows)
    return buffer.getvalue()


def fill(folder: Path, leave: int = 0) -> Path:
    """A ballast file in ``folder`` that takes the disk's room but ``leave`` bytes (about: a page)."""
    path = folder / "ballast"
    with open(path, "wb") as out:
        for size in (1 << 20, 1 << 12):
            with contextlib.suppress(OSError):
                while os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize - size >= leave:
                    out.write(bytes(size))
                    out.flush()
    return path


def insufficient(response: httpx.Response) -> None:
    assert response.status_code == 507, response.text
    assert response.json()["error"]["code"] == "insufficient_storage"


def test_every_write_on_a_full_disk_is_a_507_and_leaves_nothing_half_written(api, small_disk):
    data = small_disk / "data"
    api.post("/v1/datasets", json={"name": "d", "n_features": 8, "dtype": "float64"}).raise_for_status()
    api.put("/v1/datasets/d/chunks/0", content=npy(ROWS), headers={"Content-Type": "application/octet-stream"})
    before = api.post("/v1/datasets/d/commit", json={}).json()
    api.post("/v1/datasets", json={"name": "open", "n_features": 8, "dtype": "float64"}).raise_for_status()
    api.put("/v1/datasets/open/chunks/0", content=npy(ROWS[:10]), headers={"Content-Type": "application/octet-stream"})
    model = {"dataset": "d", "n_components": 3, "kernel": {"type": "gaussian", "sigma": 4.0}}
    assert api.post("/v1/models", json={**model, "name": "m", "solver": "exact"}).status_code == 202
    assert wait_for_fit(api, "m")["status"] == "completed"
    projected = api.post("/v1/models/m/project", json={"rows": ROWS[:3].tolist()}).json()
    ballast = fill(small_disk)
    try:
        insufficient(api.post("/v1/datasets", json={"name": "new", "n_features": 8, "dtype": "float64"}))
        insufficient(api.put("/v1/datasets/open/chunks/1", content=npy(ROWS[:500]),
                             headers={"Content-Type": "application/octet-stream"}))
        insufficient(api.post("/v1/datasets/open/commit", json={}))
        insufficient(api.post("/v1/models", json={**model, "name": "m2", "solver": "exact"}))
        insufficient(api.post("/v1/models/import", content=bytes(1 << 20),
                              headers={"Content-Type": "application/x-tar"}))
        r = api.post("/v1/denoise-image?job=j&tune=off&patch=5&stride=2", content=png(noisy_of(scene(24, 1), 0.1, 2)),
                     headers=PNG)
        insufficient(r)
    finally:
        ballast.unlink()
    assert api.get("/v1/datasets/new").status_code == 404 and api.get("/v1/models/m2").status_code == 404
    assert api.get("/v1/datasets/open").json()["staged"] == [0]
    assert api.get("/v1/datasets/d").json() == before
    assert api.post("/v1/models/m/project", json={"rows": ROWS[:3].tolist()}).json() == projected
    assert not temp_leftovers(data)


def test_a_fit_whose_checkpoint_does_not_fit_fails_saying_so_and_resumes_once_there_is_room(api, small_disk):
    model = {"name": "k", "dataset": "d", "n_components": 3, "kernel": {"type": "gaussian", "sigma": 4.0},
             "solver": "kha", "params": {"passes": 2, "seed": 0}}
    ballast = fill(small_disk, leave=96 << 10)  # room for its record, not for a checkpoint of 2000 rows
    try:
        assert api.post("/v1/models", json=model).status_code == 202
        failed = wait_for_fit(api, "k")
    finally:
        ballast.unlink()
    assert failed["status"] == "failed" and failed["error"]["code"] == "insufficient_storage", failed
    assert "POST /v1/models/k/resume" in failed["error"]["message"]
    last = {}

    def resumed() -> bool:  # its record may still be written
        last["r"] = api.post("/v1/models/k/resume", json={})
        return last["r"].status_code == 202

    wait_until(resumed, what=lambda: f"the resume to be accepted (last answer: {last['r'].text})", interval=0.2)
    assert wait_for_fit(api, "k")["status"] == "completed"
