"""Many ``/events`` streams cost what one does (issue 30, item 8): 300 streams, each reading its
model's record every 0.25 s, pushed ``/healthz`` to a 1 s median. The streams of a model now share one
watcher per process, which reads the record once per interval (``kpca_event_record_reads_total`` in
``/metrics`` counts the reads), and at most ``max_event_streams`` are open (503 with ``Retry-After``).
Real server, real fit, real HTTP streams."""

from __future__ import annotations

import asyncio
import re
import statistics
import time

import httpx
import numpy as np

from tests.api_checks import upload_rows, wait_for_fit, wait_for_pass
from tests.waiting import wait_until

MAX_STREAMS = 40
SERVER_SETTINGS = {"max_event_streams": MAX_STREAMS}


def metric(api, name: str) -> float:
    """One unlabelled series of ``/metrics``."""
    text = api.get("/metrics").text
    return float(re.search(rf"^{name} (\S+)$", text, re.MULTILINE).group(1))


async def _read(client: httpx.AsyncClient, name: str, started: asyncio.Queue) -> None:
    """Read a stream of model ``name`` to its end; its status goes to ``started`` once its first event
    (the record's status, which every stream gets first) has come, or at once if it is not a 200."""
    async with client.stream("GET", f"/v1/models/{name}/events") as response:
        lines = response.aiter_lines()
        if response.status_code == 200:
            async for line in lines:
                if line.startswith("event:"):
                    break
        await started.put(response.status_code)
        async for _ in lines:
            pass


async def _hold_streams(server: str, name: str, n: int, seconds: float) -> dict:
    """Open ``n`` streams of model ``name``, keep them ``seconds``; the record reads and /healthz times
    meanwhile, and the answer of one stream more."""
    limits = httpx.Limits(max_connections=n + 10, max_keepalive_connections=n + 10)
    async with httpx.AsyncClient(base_url=server, timeout=60, limits=limits) as client:
        started: asyncio.Queue = asyncio.Queue()
        tasks = [asyncio.create_task(_read(client, name, started)) for _ in range(n)]
        statuses = [await started.get() for _ in range(n)]  # every stream past its first record
        before = metric_from(await client.get("/metrics"), "kpca_event_record_reads_total")
        healthz, stop_at = [], time.monotonic() + seconds
        while time.monotonic() < stop_at:
            begun = time.monotonic()
            assert (await client.get("/healthz")).status_code == 200
            healthz.append(time.monotonic() - begun)
            await asyncio.sleep(0.05)
        metrics = await client.get("/metrics")
        reads = metric_from(metrics, "kpca_event_record_reads_total") - before
        open_streams = metric_from(metrics, "kpca_event_streams")
        extra = await client.get(f"/v1/models/{name}/events") if n >= MAX_STREAMS else None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return {"statuses": statuses, "reads": reads, "open": open_streams, "healthz": healthz, "extra": extra}


def metric_from(response: httpx.Response, name: str) -> float:
    return float(re.search(rf"^{name} (\S+)$", response.text, re.MULTILINE).group(1))


def test_record_reads_do_not_grow_with_the_streams_and_past_the_cap_a_503(api, server):
    upload_rows(api, "blobs", np.random.default_rng(7).normal(size=(300, 3)))
    api.post("/v1/models", json={"name": "long", "dataset": "blobs", "n_components": 2,
                                 "kernel": {"type": "gaussian", "sigma": 1.0}, "solver": "kha-smd",
                                 "params": {"passes": 2000, "seed": 0, "init": "random", "block_size": 10}},
             ).raise_for_status()
    wait_for_pass(api, "long", 1)
    one = asyncio.run(_hold_streams(server, "long", 1, 3.0))
    many = asyncio.run(_hold_streams(server, "long", MAX_STREAMS, 3.0))
    assert one["statuses"] == [200] and many["statuses"] == [200] * MAX_STREAMS
    assert (one["open"], many["open"]) == (1, MAX_STREAMS)
    # one read per 0.25 s for the model, however many stream it: at most 12 in 3 s (the old streams read
    # 40 times as often with 40 streams; a loaded machine reads less often, never more)
    assert 2 <= one["reads"] <= 16 and 1 <= many["reads"] <= 16, (one["reads"], many["reads"])
    # /healthz answered as with one stream (300 old streams made its median 1 s); the two windows
    # compared, not a time, so that a loaded machine slows both
    assert statistics.median(many["healthz"]) < 5 * statistics.median(one["healthz"]) + 0.05, \
        (one["healthz"], many["healthz"])
    extra = many["extra"]
    assert extra.status_code == 503 and extra.headers["retry-after"] == "5", extra.text
    body = extra.json()["error"]
    assert body["code"] == "unavailable" and "KPCA_MAX_EVENT_STREAMS" in body["message"], body
    # closed streams give their slots back
    wait_until(lambda: metric(api, "kpca_event_streams") == 0, what="the closed streams to give their slots back")
    assert api.post("/v1/models/long/cancel", json={}).status_code == 202
    assert wait_for_fit(api, "long")["status"] == "cancelled"
