"""Projection throughput and latency through the real service.

A service (uvicorn on loopback, embedded 2-worker LocalCluster) trains a
model on l = 20,000 rows (n = 64, Gaussian kernel, r = 16, one kha-et pass),
then:

* projects a zarr data set of ``--rows`` (default 1,000,000) rows with
  ``POST /v1/models/{name}/transform`` (one dask task per 20,000 rows):
  rows per second, and the achieved flop rate (2 m l (n + r) flops) as a
  ratio to numpy's GEMM rate measured in this process on the same shapes;
* single-row ``POST /v1/models/{name}/project`` latency, p50 and p99, with 16
  concurrent clients on loopback (bounded: ``--requests`` per client).

Prints JSON and writes bench/results/projection.json (`bench._common.save`).

    python bench/projection.py [--rows 1000000] [--requests 50]
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import httpx  # noqa: E402
import numpy as np  # noqa: E402
import uvicorn  # noqa: E402

from bench._common import save  # noqa: E402
L, N, R = 20_000, 64, 16


def mixture(rng, m):
    centers = np.random.default_rng(0).normal(scale=3.0, size=(10, N))
    return (centers[rng.integers(0, 10, m)] + rng.normal(size=(m, N))).astype(np.float32)


def serve(data_dir):
    from service import Settings, create_app

    app = create_app(Settings(data_dir=data_dir, n_workers=2))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    for _ in range(600):
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return url, server, thread
        except httpx.TransportError:
            time.sleep(0.2)
    raise RuntimeError("service did not start")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--requests", type=int, default=50)
    args = ap.parse_args()
    from client import upload_array

    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory(prefix="kpca-proj-") as data_dir:
        url, server, thread = serve(data_dir)
        api = httpx.Client(base_url=url, timeout=3600)
        try:
            upload_array(api, "train", mixture(rng, L), progress=False)
            big = np.concatenate([mixture(rng, 100_000) for _ in range(-(-args.rows // 100_000))])[: args.rows]
            upload_array(api, "big", big, chunk_rows=100_000, progress=False)
            del big
            api.post("/v1/models", json={"name": "m", "dataset": "train", "n_components": R, "solver": "kha-et",
                                         "kernel": {"type": "gaussian", "sigma": 1.5 * np.sqrt(N)},
                                         "params": {"passes": 1}}).raise_for_status()
            t0 = time.perf_counter()
            while api.get("/v1/models/m").json()["status"] in ("queued", "running"):
                time.sleep(0.5)
            fit_s = time.perf_counter() - t0
            assert api.get("/v1/models/m").json()["status"] == "completed"

            t0 = time.perf_counter()
            api.post("/v1/models/m/transform", json={"dataset": "big", "output": "big-z"}).raise_for_status()
            transform_s = time.perf_counter() - t0

            X, Y = np.ones((20_000, N)), np.ones((L, N))
            X @ Y.T
            t0 = time.perf_counter()
            for _ in range(3):
                X @ Y.T
            gemm_flops = 3 * 2 * 20_000 * L * N / (time.perf_counter() - t0)
            achieved = 2 * args.rows * L * (N + R) / transform_s

            row = {"rows": mixture(rng, 1).tolist()}
            api.post("/v1/models/m/project", json=row).raise_for_status()  # warm the worker's model cache

            def one_client(_):
                times = []
                with httpx.Client(base_url=url, timeout=120) as c:
                    for _ in range(args.requests):
                        t = time.perf_counter()
                        c.post("/v1/models/m/project", json=row).raise_for_status()
                        times.append(time.perf_counter() - t)
                return times

            t0 = time.perf_counter()
            with ThreadPoolExecutor(16) as pool:
                latencies = np.concatenate(list(pool.map(one_client, range(16))))
            wall = time.perf_counter() - t0
        finally:
            server.should_exit = True
            thread.join(timeout=120)
    doc = {"l": L, "n": N, "r": R, "fit_one_kha_et_pass_s": fit_s,
           "transform": {"rows": args.rows, "seconds": transform_s, "rows_per_s": args.rows / transform_s,
                         "gflops": achieved / 1e9, "gemm_gflops_this_process": gemm_flops / 1e9,
                         "ratio_to_gemm": achieved / gemm_flops},
           "project_latency": {"clients": 16, "requests": int(latencies.size), "p50_ms": 1e3 * np.percentile(latencies, 50),
                               "p99_ms": 1e3 * np.percentile(latencies, 99), "requests_per_s": latencies.size / wall}}
    save("projection", doc)


if __name__ == "__main__":
    main()
