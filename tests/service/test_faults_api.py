"""A full disk through the API: the service process runs under a file-size limit (RLIMIT_FSIZE,
SIGXFSZ ignored, so writes past it fail with EFBIG as they would with ENOSPC).

Defends against: a commit that fails for lack of room answered as an opaque 500 (it should be a
5xx-free, clear error: 507 Insufficient Storage), and against a failed commit that loses or changes
the staged chunks.
"""

from __future__ import annotations

import io
import os
import resource
import signal
import subprocess
import sys

import httpx
import numpy as np

from tests.e2e.service_process import ServiceProcess, free_port

FILE_LIMIT = 64 * 1024  # bytes: staged chunks of 1,500 rows x 4 fit; the committed zarr chunk does not


def _limit_files() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # inherited through exec: writes fail with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))


class LimitedService(ServiceProcess):
    """`ServiceProcess` whose process (and its dask workers) may not write files over `FILE_LIMIT`."""

    def __init__(self, data_dir):  # noqa: D107 - ServiceProcess's start, with the limit
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "KPCA_N_WORKERS": "1", "KPCA_WATCHDOG_S": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "service", "--host", "127.0.0.1", "--port", str(self.port),
             "--data-dir", str(data_dir)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=_limit_files)


def npy(rows: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, rows)
    return buffer.getvalue()


def test_a_commit_on_a_full_disk_is_a_clear_error_and_keeps_the_staged_chunks(tmp_path):
    service = LimitedService(tmp_path / "data")
    try:
        url = service.wait_ready().url
        with httpx.Client(base_url=url, timeout=60) as api:
            api.post("/v1/datasets", json={"name": "x", "n_features": 4}).raise_for_status()
            for index in range(3):
                rows = np.random.default_rng(index).standard_normal((1500, 4)).astype(np.float32)
                api.put(f"/v1/datasets/x/chunks/{index}", content=npy(rows),
                        headers={"Content-Type": "application/octet-stream"}).raise_for_status()
            before = api.get("/v1/datasets/x").json()
            response = api.post("/v1/datasets/x/commit", json={})
        with httpx.Client(base_url=url, timeout=60) as fresh:
            after = fresh.get("/v1/datasets/x").json()
        assert after == before  # nothing committed, the staged chunks kept
        assert response.status_code == 507, response.text
        assert "space" in response.json()["error"]["message"] or "large" in response.json()["error"]["message"]
    finally:
        service.stop()
