"""What many ``/events`` streams cost the service (issue 30, item 8): 300 streams pushed ``/healthz`` to
a 1 s median (2.7 s max) and slowed a running fit from 8 to 5 passes per 20 s.

`python -m service` in a process of its own runs a long KHA-SMD fit (300 x 3 rows, block 10); for
``--seconds`` with no stream, then with ``--streams`` streams of that model open, this measures
``/healthz`` every 50 ms (p50, p99, max), the fit's passes, and (where the service exports it,
``kpca_event_record_reads_total``) the record reads per second made for the streams. ``--code DIR``
runs the service from another checkout (an earlier commit's, to measure it the same way).
Prints and saves ``bench/results/event_streams.json`` (``--label``: ``event_streams_<label>.json``).

    python bench/event_streams.py [--streams 300] [--seconds 20] [--code DIR --label before]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from bench._common import save  # noqa: E402
from bench._service import service_process  # noqa: E402


def _reads(text: str) -> float | None:
    found = re.search(r"^kpca_event_record_reads_total (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


async def _stream(client: httpx.AsyncClient, opened: asyncio.Queue) -> None:
    async with client.stream("GET", "/v1/models/long/events") as response:
        await opened.put(response.status_code)
        async for _ in response.aiter_lines():
            pass


async def phase(url: str, streams: int, seconds: float) -> dict:
    """``seconds`` of /healthz probes with ``streams`` event streams open: latencies, passes, reads."""
    limits = httpx.Limits(max_connections=streams + 10, max_keepalive_connections=streams + 10)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        opened: asyncio.Queue = asyncio.Queue()
        tasks = [asyncio.create_task(_stream(client, opened)) for _ in range(streams)]
        statuses = [await opened.get() for _ in range(streams)]
        await asyncio.sleep(1.0)
        reads0 = _reads((await client.get("/metrics")).text)
        pass0 = ((await client.get("/v1/models/long")).json().get("progress") or {}).get("pass", 0)
        latencies, stop_at = [], time.monotonic() + seconds
        while time.monotonic() < stop_at:
            begun = time.monotonic()
            (await client.get("/healthz")).raise_for_status()
            latencies.append(time.monotonic() - begun)
            await asyncio.sleep(0.05)
        reads1 = _reads((await client.get("/metrics")).text)
        record = (await client.get("/v1/models/long")).json()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    latencies.sort()
    return {
        "streams": streams,
        "streams_opened": sum(1 for s in statuses if s == 200),
        "seconds": seconds,
        "healthz_p50_ms": round(1000 * statistics.median(latencies), 1),
        "healthz_p99_ms": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 1),
        "healthz_max_ms": round(1000 * latencies[-1], 1),
        "probes": len(latencies),
        "passes": (record.get("progress") or {}).get("pass", 0) - pass0,
        "record_reads_per_s": None if reads0 is None else round((reads1 - reads0) / seconds, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--code", help="checkout whose service is measured (default this one)")
    ap.add_argument("--label", help="saved as event_streams_<label>.json")
    args = ap.parse_args()
    from client import upload_array

    environ = {"KPCA_MAX_EVENT_STREAMS": str(max(256, args.streams))}
    with service_process(n_workers=1, cwd=args.code, **environ) as url:
        upload_array(url, "blobs", np.random.default_rng(7).normal(size=(300, 3)), progress=False)
        with httpx.Client(base_url=url, timeout=60) as api:
            api.post("/v1/models", json={"name": "long", "dataset": "blobs", "n_components": 2,
                                         "kernel": {"type": "gaussian", "sigma": 1.0}, "solver": "kha-smd",
                                         "params": {"passes": 2000, "seed": 0, "init": "random",
                                                    "block_size": 10}}).raise_for_status()
            while ((api.get("/v1/models/long").json().get("progress") or {}).get("pass", 0)) < 1:
                time.sleep(0.1)
            runs = []
            for streams in (0, args.streams):
                runs.append(asyncio.run(phase(url, streams, args.seconds)))
                print(json.dumps(runs[-1]), flush=True)
            save(f"event_streams_{args.label}" if args.label else "event_streams",
                 {"code": args.code or "this checkout", "runs": runs})
            try:  # a service still busy with the closed streams may not answer in time: it is stopped anyway
                api.post("/v1/models/long/cancel", json={}, timeout=10)
            except httpx.HTTPError:
                pass


if __name__ == "__main__":
    main()
