"""Liveness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from service.security import PUBLIC, READ, access

router = APIRouter(tags=["health"])


@router.get("/healthz", openapi_extra=access(PUBLIC))
async def healthz() -> dict[str, str]:
    """Liveness: answered on the event loop, so that it never waits for a request thread (issue 30).
    ``python -m service`` answers it earlier still, in its HTTP protocol (`service.health_protocol`), with
    the same bytes; this route answers where the app is served another way (embedded, tests)."""
    return {"status": "ok"}


@router.get("/metrics", openapi_extra=access(READ), response_class=Response)
def metrics(request: Request) -> Response:
    """Request counts and latencies of this app, in the Prometheus text format."""
    app_metrics = request.app.state.metrics
    return Response(app_metrics.render(), media_type=app_metrics.content_type)
