"""``/docs``: the API reference, served by the service itself with no external assets, and
``/openapi.json``, the document it reads.

FastAPI's own ``/docs`` loads Swagger UI from a CDN and is blank on a machine without internet
access; no copy of the Swagger UI files is installed with the package, so ``/docs`` is a small page
of our own (``service/static/docs``) that reads ``/openapi.json`` and renders every operation, its
parameters, request body and responses, every schema, and a "try it" form (``fetch``, same origin).
The page and its two assets hold no data and need no API key; the page asks for one when
``/openapi.json`` (read scope) answers 401.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse

from service.routes.static_page import CSS, JS, page_router
from service.security import READ, access

#: the page's assets: file name -> media type (nothing else under /docs/assets is served)
ASSETS = {"docs.js": JS, "docs.css": CSS}

router = page_router("/docs", "/docs/assets", "docs", ASSETS, "docs")


@router.api_route("/openapi.json", methods=["GET", "HEAD"], openapi_extra=access(READ))
async def openapi_document(request: Request) -> JSONResponse:
    """The app's OpenAPI document (``app.openapi()``), with the proxy's root path as its first server
    when the service runs under one, as FastAPI's own route (switched off in `service.app.create_app`
    so that this one declares its scope) answers it."""
    app = request.app
    document = app.openapi()
    root_path = request.scope.get("root_path", "").rstrip("/")
    if root_path and app.root_path_in_servers and root_path not in {s.get("url") for s in document.get("servers", [])}:
        document = {**document, "servers": [{"url": root_path}, *document.get("servers", [])]}
    return JSONResponse(document)
