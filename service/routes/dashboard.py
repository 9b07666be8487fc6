"""``/``: the dashboard, a page of our own served by the service with no external assets.

Plain HTML, CSS and JavaScript modules under ``service/static/dashboard``, one per view: data sets
(list, details, download, delete, upload of a CSV or ``.npy`` file, a PNG made into its patches),
models (list, fit form, a model's page: its fit live from ``/v1/models/{name}/events`` read with
``fetch`` streaming so that an ``Authorization`` header can be sent, cancel, resume with passes,
parameters, history, pictures, denoising, export, delete), clusterings, and several fits' convergence
on one chart. The page and its assets hold no data and need no API key;
every API call from the page sends the key the user typed, asked for when a call answers 401.
"""

from __future__ import annotations

from service.routes.static_page import CSS, JS, page_router

#: the page's assets: file name -> media type (nothing else under /dashboard/assets is served)
ASSETS = {"dashboard.css": CSS, **{f"{module}.js": JS for module in (
    "app", "api", "ui", "lists", "chart", "upload", "datasets", "models", "model-view", "denoise", "clusterings",
    "compare", "photo", "imagejob")}}

router = page_router("/", "/dashboard/assets", "dashboard", ASSETS, "dashboard")
