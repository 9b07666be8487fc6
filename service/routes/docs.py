"""``/docs``: the API reference, served by the service itself with no external assets.

FastAPI's own ``/docs`` loads Swagger UI from a CDN and is blank on a machine without internet
access; no copy of the Swagger UI files is installed with the package, so ``/docs`` is a small page
of our own (``service/static/docs``) that reads ``/openapi.json`` and renders every operation, its
parameters, request body and responses, every schema, and a "try it" form (``fetch``, same origin).
The page and its two assets hold no data and need no API key; the page asks for one when
``/openapi.json`` answers 401.
"""

from __future__ import annotations

from service.routes.static_page import CSS, JS, page_router

#: the page's assets: file name -> media type (nothing else under /docs/assets is served)
ASSETS = {"docs.js": JS, "docs.css": CSS}

router = page_router("/docs", "/docs/assets", "docs", ASSETS, "docs")
