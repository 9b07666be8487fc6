"""Prometheus metrics of one app: a request counter and a latency histogram, the fits, and the
process (``process_*``: CPU, memory, open files; ``python_info``; ``python_gc_*``).

With several API processes (`service.processes`, ``PROMETHEUS_MULTIPROC_DIR`` set) the request counter
and histogram are kept in prometheus_client's per-process files and summed over the processes at each
scrape; the fits' series come from the store, the same in every process; ``process_*``,
``python_gc_*``, ``kpca_event_*`` and ``kpca_projections_total`` are those of the process that answers.

Each app owns its `CollectorRegistry` (no global registry), so several apps can
live in one process (the test suite starts one per module). That requirement, and the series names
already published, are why the middleware is our own: starlette-exporter keeps its metrics in a
class-level dict shared by every instance in the process; prometheus-fastapi-instrumentator takes a
registry, but renames the series (``http_requests_total{handler}``, statuses grouped ``2xx``) and finds
templates by walking ``app.routes`` for a ``path``, which FastAPI's included routers no longer have.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Route label of requests that matched no route (keeps label cardinality bounded).
UNMATCHED = "unmatched"


class Metrics:
    """The collectors of one app."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        shared = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        counted = CollectorRegistry() if shared else self.registry  # shared: the values live in files
        self.requests = Counter(
            "kpca_http_requests",
            "HTTP requests served, by method, route template and status code.",
            ["method", "route", "status"],
            registry=counted,
        )
        self.latency = Histogram(
            "kpca_http_request_duration_seconds",
            "Time to serve an HTTP request, by method and route template.",
            ["method", "route"],
            registry=counted,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
        )
        if shared:
            MultiProcessCollector(self.registry, path=shared)
        # the standard process, platform and garbage-collector series, on this app's registry
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)

    def watch_models(self, list_models: Callable[[], list[dict]]) -> None:
        """Export fits by status and passes completed, read from the registry at scrape time."""
        self.registry.register(_ModelsCollector(list_models))

    def watch_events(self, hub) -> None:
        """Export the ``/events`` streams open (``kpca_event_streams``) and the model record reads made
        for them (``kpca_event_record_reads_total``) of a `service.event_hub.EventHub`, at scrape time."""
        self.registry.register(_EventsCollector(hub))

    def watch_projections(self, counts: Callable[[], dict]) -> None:
        """Export ``kpca_projections_total`` by where they were computed (``counts()``: ``{"api": n,
        "workers": n}``, `workers.backend.Backend.projections`), at scrape time."""
        self.registry.register(_ProjectionsCollector(counts))

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method=method, route=route, status=str(status)).inc()
        self.latency.labels(method=method, route=route).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MetricsMiddleware:
    """Count and time every HTTP request under its route template (``/v1/datasets/{name}``)."""

    def __init__(self, app: ASGIApp, metrics: Metrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        status = 500
        started = time.perf_counter()

        async def send_with_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        request = {"type": scope["type"], "path": scope["path"], "root_path": scope.get("root_path", ""),
                   "method": scope["method"]}
        try:
            await self.app(scope, receive, send_with_status)
        finally:
            route = getattr(scope.get("route"), "path", None) or route_template(scope.get("app"), request)
            self.metrics.observe(scope["method"], route, status, time.perf_counter() - started)


def route_template(app, request: Scope) -> str:
    """The path template of the app's own top-level route that matches ``request`` (its path before
    routing), or `UNMATCHED`: FastAPI puts only its API routes in ``scope["route"]``, so plain
    routes (``app.add_route``) and mounts (``/static/{path}``) are found here. Unknown paths stay
    `UNMATCHED`, so the label takes one value per route, whatever the clients send.
    Cost: one regex match per top-level route."""
    for route in getattr(app, "routes", ()):
        template = getattr(route, "path_format", None)
        if template is None:
            continue  # included routers: their API routes set scope["route"] themselves
        match, _ = route.matches(request)
        if match is not Match.NONE:
            return template
    return UNMATCHED


class _ModelsCollector:
    """``kpca_models{status}`` and ``kpca_fit_passes_completed``, from the model records.

    Gauges, not counters: deleting a model removes its passes. Cost per
    scrape: one registry listing.
    """

    STATUSES = ("queued", "running", "completed", "failed", "cancelled")

    def __init__(self, list_models: Callable[[], list[dict]]):
        self.list_models = list_models

    def describe(self):
        return []

    def collect(self):
        try:
            records = self.list_models()
        except Exception:  # the registry is not ready (start-up) or not readable: export nothing
            return
        by_status = GaugeMetricFamily("kpca_models", "Models by fit status.", labels=["status"])
        counts = {status: 0 for status in self.STATUSES}
        passes = 0
        for record in records:
            counts[record.status] = counts.get(record.status, 0) + 1
            passes += record.passes_done
        for status, count in counts.items():
            by_status.add_metric([status], count)
        yield by_status
        yield GaugeMetricFamily("kpca_fit_passes_completed", "Training passes completed, summed over models.",
                                value=passes)


class _EventsCollector:
    """``kpca_event_streams`` (open now) and ``kpca_event_record_reads_total`` (record reads of the
    shared watchers), from an `service.event_hub.EventHub`. Cost per scrape O(1)."""

    def __init__(self, hub):
        self.hub = hub

    def describe(self):
        return []

    def collect(self):
        yield GaugeMetricFamily("kpca_event_streams", "Server-sent event streams open.", value=self.hub.open)
        yield CounterMetricFamily("kpca_event_record_reads", "Model record reads made for the event streams "
                                  "(one per watched model per interval, whatever the number of streams).",
                                  value=self.hub.reads)


class _ProjectionsCollector:
    """``kpca_projections_total{where}``: projections computed in the API process (small models) and on the
    workers. Cost per scrape O(1)."""

    def __init__(self, counts):
        self.counts = counts

    def describe(self):
        return []

    def collect(self):
        family = CounterMetricFamily("kpca_projections", "Projection requests, by where they were computed: "
                                     "the API process (small models) or the workers.", labels=["where"])
        for where, count in (self.counts() or {}).items():
            family.add_metric([where], count)
        yield family
