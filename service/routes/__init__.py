"""One router per resource; `ROUTERS` holds them all, in the order `service.app.create_app` includes
them: the busiest first (serving, model records, data set uploads), since FastAPI tries a request
against each route in turn, twice (once to find the route, once to run it), and the routes before it
cost each request about as much as its dependencies. No route could answer another's request (a test
tries each route's own path on them all), so the order changes only what routing costs.

Every route declares its scope and accepted media types in its decorator
(``openapi_extra=service.security.access(...)``)."""

from service.routes import (
    catalogue,
    clusterings,
    dashboard,
    dataset_rows,
    datasets,
    denoising,
    docs,
    events,
    health,
    model_archive,
    model_images,
    models,
    pictures,
    rows,
    transform,
)

ROUTERS = (
    health.router,
    rows.router,
    model_images.router,
    transform.router,
    models.router,
    datasets.router,
    dataset_rows.router,
    model_archive.router,
    denoising.router,
    pictures.router,
    clusterings.router,
    events.router,
    catalogue.router,
    docs.router,
    dashboard.router,
)

__all__ = ["ROUTERS"]
