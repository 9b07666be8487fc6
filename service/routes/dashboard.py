"""``/``: the dashboard, a page of our own served by the service with no external assets.

Plain HTML, CSS and JavaScript modules under ``service/static/dashboard``: lists of data sets and
models, a live chart of a fit read from ``/v1/models/{name}/events`` (``fetch`` streaming, so an
``Authorization`` header can be sent), cancel and resume, a data set upload form (CSV or ``.npy``),
a fit form and an image denoising form. The page and its assets hold no data and need no API key;
every API call from the page sends the key the user typed, asked for when a call answers 401.
"""

from __future__ import annotations

from service.routes.static_page import CSS, JS, page_router

#: the page's assets: file name -> media type (nothing else under /dashboard/assets is served)
ASSETS = {"dashboard.css": CSS, "app.js": JS, "api.js": JS, "chart.js": JS, "upload.js": JS}

router = page_router("/", "/dashboard/assets", "dashboard", ASSETS, "dashboard")
