"""The application factory.

``create_app(settings)`` builds a fresh app with its own metrics registry; the
lifespan opens the stores and the dask backend and puts them on ``app.state``,
where the route dependencies (`service.deps`) find them.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import cast

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.middleware.cors import CORSMiddleware

from service import security
from service.errors import install_error_handlers
from service.event_hub import EventHub
from service.http_protocol import STATE_KEY as HTTP_GUARDS
from service.http_protocol import Guards
from service.limits import BodyLimitMiddleware, DataUsage, folder_bytes, resolved_data_limit
from service.metrics import Metrics, MetricsMiddleware
from service.record_views import RecordViews
from service.routes import ROUTERS
from service.schemas.openapi import install_openapi
from service.settings import Settings, get_settings
from service.threads import set_thread_limits, wait_for_cluster
from store.jobs.archive import sweep_imports
from store.jobs.registry import JobRegistry
from store.places import (
    checkpoints_at,
    clusterings_at,
    datasets_at,
    image_jobs_at,
    is_url,
    local_folder,
    location,
    models_at,
    prepared,
    tune,
)
from store.running import RunningRequests
from workers import Backend
from workers.plugins import import_modules, warm_projections_here

log = logging.getLogger(__name__)

#: seconds an API process answers from a record it read from an object store, without asking again (store.places)
RECENT_S = 1.0


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[dict]:
    settings: Settings = app.state.settings
    set_thread_limits(settings.api_threads, settings.api_wait_threads)  # service/threads.py
    data_dir = prepared(settings.data_dir)  # a folder's absolute path or an object store's URL (store.places)
    tune(settings.lease_ttl_s, settings.read_cache_mb)  # this process's leases and read cache, as its workers
    # on an object store a read is a round trip: a status poll or a projection's check answers from a record read
    # less than RECENT_S ago (a worker's write is seen within it; this process's own at once)
    app.state.datasets = datasets_at(data_dir, recent_s=RECENT_S)
    app.state.models = models_at(data_dir, recent_s=RECENT_S)
    app.state.image_jobs = image_jobs_at(data_dir)
    app.state.checkpoints = checkpoints_at(data_dir)
    app.state.clusterings = clusterings_at(data_dir, recent_s=RECENT_S)
    local = local_folder(data_dir)  # this machine's part: the data folder, or a folder of it for an object store
    app.state.running = RunningRequests(local)  # the /v1/denoise-image requests running, by key
    swept = await run_in_threadpool(sweep_imports, local)
    if swept:
        log.warning("removed %d leftovers of interrupted model imports from %s", len(swept), local / ".imports")
    backend = Backend(data_dir, scheduler=settings.scheduler, n_workers=settings.n_workers,
                      plugins=cast(list[str], settings.solver_plugins),  # `Settings`' validator made it a list
                      local_projections=(settings.local_projection_values, settings.local_projection_work),
                      warm_workers=settings.warm_workers, worker_environ=settings.worker_environ())
    await run_in_threadpool(backend.start)  # starting a LocalCluster blocks for seconds
    # Small projections run in this process: their jitted code loaded before the first request, not in it.
    if settings.warm_workers and settings.local_projection_values > 0:
        await run_in_threadpool(warm_projections_here)
    app.state.backend = backend
    # What the imports and the start made lives as long as the process: kept out of the collector's full
    # collections, which otherwise scan it all with the event loop stopped (about 0.1 s on an idle 2-core
    # machine; /healthz answered in up to 0.42 s under bench/load.py).
    gc.freeze()
    log.info("kpca-stream serving data from %s", data_dir)
    watchdog = asyncio.create_task(_watch_fits(backend, (app.state.models, app.state.clusterings),
                                               settings.watchdog_s))
    try:
        # the lifespan state: what the HTTP protocol of `python -m service` reads (service/http_protocol.py)
        yield {HTTP_GUARDS: Guards(header_timeout_s=settings.header_timeout_s)}
    finally:
        watchdog.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watchdog
        app.state.backend = None
        await run_in_threadpool(backend.close, settings.shutdown_timeout_s)


async def _watch_fits(backend: Backend, registries: tuple[JobRegistry, ...], interval_s: float) -> None:
    """At start-up and then every ``interval_s``: resubmit the fits (of models, of clusterings) that
    lost their runner (service restart, dead worker), which resume from their last checkpoint, and move
    the fits waiting for a busy worker's fit slot to a free one (`workers.fits.Fits.balance`).
    Cancelled (the service stops), it ends at once: a cluster call it waits for is left to its thread,
    so a blocked scheduler cannot hold the stop."""
    while True:
        for registry in registries:
            try:
                resubmitted = await wait_for_cluster(backend.recover, registry, abandon_on_cancel=True)
                if resubmitted:
                    log.warning("resubmitted %s without a live runner: %s", registry.kind_folder,
                                ", ".join(resubmitted))
            except Exception:
                log.exception("fit watchdog failed on %s; retrying in %.0f s", registry.kind_folder, interval_s)
        try:
            for key, source, target in await wait_for_cluster(backend.balance_fits, abandon_on_cancel=True):
                log.info("fit task %s waits for a fit slot on %s; moving it to %s, whose slot is free", key, source,
                         target)
        except Exception:
            log.exception("fit watchdog could not balance the fits; retrying in %.0f s", interval_s)
        await asyncio.sleep(interval_s)


def _install_security(app: FastAPI, settings: Settings) -> None:
    """Host check, API keys and content types (`service.security`) by the access each route of ``app``
    declares (a RuntimeError if one declares none), inside CORS when it is configured (a preflight
    carries no key), and their responses in the OpenAPI document."""
    keys = security.parse_key_entries(settings.api_keys)
    app.add_middleware(security.SecurityMiddleware, keys=keys, hosts=security.allowed_hosts(settings),
                       rules=security.route_rules(app))
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins,
                           allow_methods=["GET", "POST", "PUT", "DELETE"],
                           allow_headers=["Authorization", "Content-Type"], expose_headers=["Location"])
    plain_openapi = app.openapi
    # replacing the method is FastAPI's documented way to extend the document (its type says method)
    app.openapi = lambda: security.document_security(plain_openapi(), bool(keys))  # type: ignore[method-assign]


def operation_id(route) -> str:
    """A route's OpenAPI ``operationId``: its function's name, unique over the API (tests/service/test_openapi*
    hold it). O(1)."""
    return route.name


def create_app(settings: Settings | None = None) -> FastAPI:
    """A new kpca-stream app; ``settings`` default to the environment (`get_settings`). A RuntimeError
    if a route does not declare its access (`service.security.route_rules`)."""
    settings = settings or get_settings()
    app = FastAPI(
        title="kpca-stream",
        summary="Out-of-core, streaming kernel PCA over REST",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # Swagger UI loads from a CDN: /docs is our own page (service.routes.docs)
        redoc_url=None,
        openapi_url=None,  # served by service.routes.docs, which declares its scope like every route
        # operation ids are the route functions' names (create_model, denoise_image), not FastAPI's default of
        # name, path and method (create_model_v1_models_post): what generated clients name their calls by
        generate_unique_id_function=operation_id,
    )
    app.state.settings = settings
    app.state.metrics = Metrics()
    data_dir = location(settings.data_dir)
    if is_url(data_dir):  # an object store's quota is the store's own: a refused write is a 507 (StoreRefused)
        app.state.data_usage = DataUsage(data_dir, None, used=0)
    else:
        used = folder_bytes(data_dir) if settings.max_data_bytes != 0 else 0  # one walk: the limit's and the figure's
        app.state.data_usage = DataUsage(data_dir, resolved_data_limit(data_dir, settings.max_data_bytes, used),
                                         used=used)
    app.state.metrics.watch_models(lambda: app.state.models.list())
    app.state.record_views = RecordViews()
    app.state.event_hub = EventHub(lambda name: app.state.models.get(name), settings.max_event_streams)
    app.state.metrics.watch_events(app.state.event_hub)
    app.state.metrics.watch_projections(
        lambda: dict(getattr(getattr(app.state, "backend", None), "projections", {})))
    # plugin solvers are in the schemas from the start (a list: `Settings`' validator made it one)
    import_modules(cast(list[str], settings.solver_plugins))

    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    # the security table is read from the routes: the middleware comes after the routers
    # added last = outermost: metrics see every response, including 413s
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=settings.max_body_bytes,
                       max_serving_body_bytes=settings.max_serving_body_bytes,
                       max_import_bytes=settings.max_import_bytes, body_timeout_s=settings.body_timeout_s,
                       body_min_bytes_per_s=settings.body_min_bytes_per_s)
    _install_security(app, settings)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)
    install_openapi(app)  # 400/415 documented on every operation that reads a body
    return app
