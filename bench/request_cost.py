"""What one request costs the API process in CPU, without sockets: the app called in-process (issue 30).

Under `bench/load.py` the API processes' CPU per request decides both `/project`'s p99 (32 clients
that each wait for their answer: Little's law) and how long the event loop waits for the interpreter
lock behind its threads. Here the app (`service.create_app`, embedded cluster of one worker, temporary
data folder) gets the load's data set ("train", ``--rows`` x 16 float32) and a completed KHA model "m" on
it, then the load's requests, called as ASGI directly: ``project`` (4 rows), ``poll`` (``GET`` of the
model), ``upload`` (32-row JSON chunks, each batch's to a data set of its own: an upload's cost grows with the
chunks already staged, `bench/upload_cost.py`) and, as the anchor, ``healthz`` through
the same middleware and routing (what the stack costs a request that does nothing). The kinds take
turns, ``--batches`` batches of ``--per-batch`` requests each, so that the machine's drift over the run
is shared; for each kind the process CPU per request (its threads' too: the thread pool's share),
minimum and median over the batches, and the median's ratio to ``healthz``'s.

Instructions are steadier than CPU time on a shared machine: ``--callgrind`` turns callgrind's
instrumentation on for the timed batches only, for a run under
``valgrind --tool=callgrind --instr-atstart=no python bench/request_cost.py --callgrind --kinds project``
(its "Collected" line, divided by the requests, is the instructions per request; tens of times slower).

Prints JSON and writes bench/results/request_cost.json (`bench._common.save`).

    python bench/request_cost.py [--batches 12] [--per-batch 150] [--kinds project,poll,upload,healthz]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bench._common import save  # noqa: E402

KINDS = ("project", "poll", "upload", "healthz")


async def call(app, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    """One HTTP request through the ASGI app, as uvicorn would pass it: ``(status, body)``."""
    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
             "method": method, "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000), "state": {},
             "headers": [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode()), (b"accept", b"*/*")]}
    sent, answer = False, {"status": 0, "body": b""}

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client stays connected

    async def send(message):
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
        elif message["type"] == "http.response.body":
            answer["body"] += message.get("body", b"")

    await app(scope, receive, send)
    return answer["status"], answer["body"]


async def lifespan(app):
    """Start ``app``'s lifespan (its cluster); a coroutine function that stops it."""
    inbox, outbox = asyncio.Queue(), asyncio.Queue()
    task = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, inbox.get,
                                   outbox.put))
    await inbox.put({"type": "lifespan.startup"})
    started = await outbox.get()
    if started["type"] != "lifespan.startup.complete":
        raise RuntimeError(f"the app did not start: {started}")

    async def stop():
        await inbox.put({"type": "lifespan.shutdown"})
        await outbox.get()
        await task
    return stop


async def ok(app, method: str, path: str, body: bytes = b"") -> bytes:
    status, answer = await call(app, method, path, body)
    if status >= 300:
        raise RuntimeError(f"{method} {path}: {status} {answer[:300]!r}")
    return answer


async def measure(args) -> dict:
    from service import Settings, create_app

    app = create_app(Settings(data_dir=tempfile.mkdtemp(prefix="kpca-request-cost-"), scheduler=None, n_workers=1))
    stop = await lifespan(app)
    try:
        rng = np.random.default_rng(0)
        data = rng.normal(size=(args.rows, 16)).astype(np.float32)
        await ok(app, "POST", "/v1/datasets", json.dumps({"name": "train", "n_features": 16}).encode())
        for index, start in enumerate(range(0, args.rows, 1000)):
            await ok(app, "PUT", f"/v1/datasets/train/chunks/{index}",
                     json.dumps({"rows": data[start:start + 1000].tolist()}).encode())
        await ok(app, "POST", "/v1/datasets/train/commit", b"{}")
        await ok(app, "POST", "/v1/models", json.dumps({
            "name": "m", "dataset": "train", "kernel": {"type": "gaussian", "sigma": 4.0}, "n_components": 4,
            "solver": "kha", "params": {"passes": 1, "seed": 1, "init": "random"}}).encode())
        while json.loads(await ok(app, "GET", "/v1/models/m"))["status"] in ("queued", "running"):
            await asyncio.sleep(0.2)
        project = json.dumps({"rows": rng.normal(size=(4, 16)).round(4).tolist()}).encode()
        chunk = json.dumps({"rows": rng.normal(size=(32, 16)).round(4).tolist()}).encode()
        requests = {"project": lambda i: ("POST", "/v1/models/m/project", project),
                    "poll": lambda i: ("GET", "/v1/models/m", b""),
                    "upload": lambda i: ("PUT", f"/v1/datasets/u{batch}/chunks/{i}", chunk),
                    "healthz": lambda i: ("GET", "/healthz", b"")}
        kinds = [kind for kind in KINDS if kind in args.kinds]
        counter, batch = 0, "warm"
        for name in ("uwarm", *(f"u{number}" for number in range(args.batches))):
            await ok(app, "POST", "/v1/datasets", json.dumps({"name": name, "n_features": 16}).encode())
        for kind in kinds:  # warm: numba's cached functions loaded, the model kept by the process
            for _ in range(30):
                counter += 1
                await ok(app, *requests[kind](counter))
        if args.callgrind:
            subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], check=True, capture_output=True)
        per_request = {kind: [] for kind in kinds}
        for batch in range(args.batches):  # each batch's uploads to a data set of its own (bench/load.py's clients')
            for kind in kinds:
                started = time.process_time()
                for _ in range(args.per_batch):
                    counter += 1
                    await ok(app, *requests[kind](counter))
                per_request[kind].append((time.process_time() - started) / args.per_batch * 1e3)
        if args.callgrind:
            subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], check=True, capture_output=True)
    finally:
        await stop()
    result = {kind: {"cpu_ms_min": round(min(times), 4), "cpu_ms_median": round(statistics.median(times), 4)}
              for kind, times in per_request.items()}
    if "healthz" in result:
        for kind in result:
            result[kind]["median_over_healthz"] = round(result[kind]["cpu_ms_median"]
                                                        / result["healthz"]["cpu_ms_median"], 2)
    return {"requests_per_kind": args.batches * args.per_batch, "kinds": result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--per-batch", type=int, default=150)
    parser.add_argument("--rows", type=int, default=3000, help="rows of the model's data set (bench/load.py's)")
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated, of " + ", ".join(KINDS))
    parser.add_argument("--callgrind", action="store_true", help="callgrind's instrumentation on for the "
                        "timed batches only (run under valgrind --tool=callgrind --instr-atstart=no)")
    parser.add_argument("--name", default="request_cost")
    args = parser.parse_args()
    args.kinds = set(args.kinds.split(","))
    if not args.kinds <= set(KINDS):
        parser.error(f"--kinds: each of {', '.join(KINDS)}")
    save(args.name, {"parameters": {"batches": args.batches, "per_batch": args.per_batch, "rows": args.rows},
                     **asyncio.run(measure(args))})


if __name__ == "__main__":
    main()
