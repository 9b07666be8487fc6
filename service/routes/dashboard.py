"""``/``: the dashboard, a page of our own served by the service with no external assets.

Plain HTML, CSS and JavaScript modules under ``service/static/dashboard``: lists of data sets and
models, a live chart of a fit read from ``/v1/models/{name}/events`` (``fetch`` streaming, so an
``Authorization`` header can be sent), cancel and resume, a data set upload form (CSV or ``.npy``),
a fit form and an image denoising form. The page and its assets hold no data and need no API key;
every API call from the page sends the key the user typed, asked for when a call answers 401.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse

from service.errors import ApiError

STATIC = Path(__file__).resolve().parents[1] / "static" / "dashboard"
#: the page's assets: file name -> media type (nothing else under /dashboard/assets is served)
ASSETS = {
    "dashboard.css": "text/css; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "api.js": "text/javascript; charset=utf-8",
    "chart.js": "text/javascript; charset=utf-8",
    "upload.js": "text/javascript; charset=utf-8",
}

router = APIRouter(include_in_schema=False)


@router.get("/", response_class=HTMLResponse)
async def dashboard_page() -> HTMLResponse:
    """The dashboard page (its scripts call the API from the browser)."""
    return HTMLResponse((STATIC / "index.html").read_text(encoding="utf-8"))


@router.get("/dashboard/assets/{asset}")
async def dashboard_asset(asset: str) -> FileResponse:
    """One of the page's own assets (`ASSETS`); 404 for any other name."""
    if asset not in ASSETS:
        raise ApiError(404, "not_found", f"no dashboard asset {asset[:100]!r}", "asset")
    return FileResponse(STATIC / asset, media_type=ASSETS[asset], headers={"Cache-Control": "no-cache"})
