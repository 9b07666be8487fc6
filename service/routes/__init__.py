"""One router per resource; `ROUTERS` holds them all, in the order `service.app.create_app` includes
them (where two routes could answer a request, the earlier one does).

Every route declares its scope and accepted media types in its decorator
(``openapi_extra=service.security.access(...)``)."""

from service.routes import (
    catalogue, clusterings, dashboard, dataset_rows, datasets, denoising, docs, events, health, model_archive, models,
    pictures, serving,
)

ROUTERS = (
    health.router,
    datasets.router,
    dataset_rows.router,
    models.router,
    model_archive.router,
    serving.router,
    denoising.router,
    pictures.router,
    clusterings.router,
    events.router,
    catalogue.router,
    docs.router,
    dashboard.router,
)

__all__ = ["ROUTERS"]
