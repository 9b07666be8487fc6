"""``/docs``: the API reference, served by the service itself with no external assets.

FastAPI's own ``/docs`` loads Swagger UI from a CDN and is blank on a machine without internet
access; no copy of the Swagger UI files is installed with the package, so ``/docs`` is a small page
of our own (``service/static/docs``) that reads ``/openapi.json`` and renders every operation, its
parameters, request body and responses, every schema, and a "try it" form (``fetch``, same origin).
The page and its two assets hold no data and need no API key; the page asks for one when
``/openapi.json`` answers 401.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse

from service.errors import ApiError

STATIC = Path(__file__).resolve().parents[1] / "static" / "docs"
#: the page's assets: file name -> media type (nothing else under /docs/assets is served)
ASSETS = {"docs.js": "text/javascript; charset=utf-8", "docs.css": "text/css; charset=utf-8"}

router = APIRouter(include_in_schema=False)


@router.get("/docs", response_class=HTMLResponse)
async def docs_page() -> HTMLResponse:
    """The API reference page (reads ``/openapi.json`` in the browser)."""
    return HTMLResponse((STATIC / "index.html").read_text(encoding="utf-8"))


@router.get("/docs/assets/{asset}")
async def docs_asset(asset: str) -> FileResponse:
    """One of the page's own assets (`ASSETS`); 404 for any other name."""
    if asset not in ASSETS:
        raise ApiError(404, "not_found", f"no docs asset {asset[:100]!r}", "asset")
    return FileResponse(STATIC / asset, media_type=ASSETS[asset])
