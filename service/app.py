"""The application factory.

``create_app(settings)`` builds a fresh app with its own metrics registry; the
lifespan opens the stores and the dask backend and puts them on ``app.state``,
where the route dependencies (`service.deps`) find them.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool

from service.errors import install_error_handlers
from service.limits import BodyLimitMiddleware
from service.metrics import Metrics, MetricsMiddleware
from service.routes import datasets, health, models
from service.settings import Settings, get_settings
from store import DatasetStore, ModelRegistry
from workers import Backend

log = logging.getLogger(__name__)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    data_dir = Path(settings.data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    app.state.datasets = DatasetStore(data_dir)
    app.state.models = ModelRegistry(data_dir)
    backend = Backend(data_dir, scheduler=settings.scheduler, n_workers=settings.n_workers)
    await run_in_threadpool(backend.start)  # starting a LocalCluster blocks for seconds
    app.state.backend = backend
    log.info("kpca-stream serving data from %s", data_dir)
    try:
        yield
    finally:
        app.state.backend = None
        await run_in_threadpool(backend.close)


def create_app(settings: Settings | None = None) -> FastAPI:
    """A new kpca-stream app; ``settings`` default to the environment (`get_settings`)."""
    settings = settings or get_settings()
    app = FastAPI(
        title="kpca-stream",
        summary="Out-of-core, streaming kernel PCA over REST",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.metrics = Metrics()

    install_error_handlers(app)
    # added last = outermost: metrics see every response, including 413s
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=settings.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)

    app.include_router(health.router)
    app.include_router(datasets.router)
    app.include_router(models.router)
    return app
