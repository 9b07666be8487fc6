"""A page of our own with its assets, served from ``service/static/<folder>`` (``/docs``, ``/``).

The page and its assets hold no data and need no API key (each route declares the public scope,
`service.security.access`); only the asset names listed are served, so nothing else in the package
can be reached through them.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse

from service.errors import ApiError
from service.security import PUBLIC, access

STATIC = Path(__file__).resolve().parents[1] / "static"
JS, CSS = "text/javascript; charset=utf-8", "text/css; charset=utf-8"

#: Headers of every page: no framing by another site (clickjacking, where no API keys are set), and a
#: Content-Security-Policy that lets the page run only its own scripts and styles (no inline ones, no
#: other origin), show its own pictures and the blob: URLs it makes of downloaded ones, and call only
#: its own API.
PAGE_HEADERS = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: "
                               "data:; connect-src 'self'; form-action 'self'; base-uri 'none'; "
                               "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def page_router(page: str, assets_route: str, folder: str, assets: dict[str, str], what: str) -> APIRouter:
    """A router serving ``folder``'s ``index.html`` at ``page`` (with `PAGE_HEADERS`) and each of ``assets``
    (file name -> media type) at ``assets_route/{asset}``; any other asset name is a 404 on ``asset``. Cost: one
    file read per request."""
    root = STATIC / folder
    router = APIRouter(include_in_schema=False)

    @router.get(page, response_class=HTMLResponse, name=f"{folder}_page", openapi_extra=access(PUBLIC))
    async def serve_page() -> HTMLResponse:
        return HTMLResponse((root / "index.html").read_text(encoding="utf-8"), headers=PAGE_HEADERS)

    @router.get(f"{assets_route}/{{asset}}", name=f"{folder}_asset", openapi_extra=access(PUBLIC))
    async def serve_asset(asset: str) -> FileResponse:
        if asset not in assets:
            raise ApiError(404, "not_found", f"no {what} asset {asset[:100]!r}", "asset")
        return FileResponse(root / asset, media_type=assets[asset], headers={"Cache-Control": "no-cache"})

    return router
