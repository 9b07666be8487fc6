"""The dashboard at ``/`` (service/static/dashboard) against a real server and a real LocalCluster.

Without a browser: the page and every asset come from the service, none names another host, and only
the whitelisted assets are served. With headless Chromium (Playwright for Python, the Debian
``chromium`` package; no browser download): a user uploads a CSV of image patches through the form,
starts a fit, watches the chart and the pass counter reach the last pass and the status reach
completed, sees an API error verbatim, and denoises a noisy PNG through the form. Screenshots of each
step go to ``$KPCA_TEST_ARTEFACTS/dashboard`` (default ``test-artefacts/dashboard`` in the repository);
the browser comes from tests/service/browser.py.

Defends against: a page that loads a CDN (blank offline), a stream read that never updates the chart,
forms whose bodies the API refuses, errors swallowed or reworded by the page.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from service.routes.dashboard import ASSETS
from tests.page_checks import Links, external
from tests.service.browser import open_page

PATCH, N_PATCHES, COMPONENTS, PASSES = 8, 600, 4, 6
EXPECTED_TYPES = {".js": "text/javascript", ".css": "text/css"}


def test_the_page_and_its_assets_come_from_the_service(api, server):
    page = api.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    links = Links()
    links.feed(page.text)
    named = {url for url in links.urls if url.startswith("/dashboard/assets/")}
    imported = set()
    for asset, media_type in ASSETS.items():
        response = api.get(f"/dashboard/assets/{asset}")
        assert response.status_code == 200, asset
        assert response.headers["content-type"].startswith(EXPECTED_TYPES[Path(asset).suffix]), response.headers
        for found in re.findall(r"https?://[^\s\"'`)]+", response.text):
            assert not external(found, server), f"{asset} references {found}"
        imported |= {f"/dashboard/assets/{name}" for name in re.findall(r'from "\./([\w.-]+)"', response.text)}
    # every asset is reachable from the page (linked or imported), and everything named is served
    assert named | imported == {f"/dashboard/assets/{name}" for name in ASSETS}, (named, imported)
    for url in links.urls:
        assert not external(url, server + "/"), f"/ references an external asset: {url}"
    assert api.get("/dashboard/assets/index.html").status_code == 404
    assert api.get("/dashboard/assets/..%2Fdashboard.py").status_code == 404
    assert api.get("/dashboard/assets/other.js").status_code == 404


# ---- the browser (tests/service/browser.py) ---------------------------------------------------------


def _camera() -> np.ndarray:
    from skimage import data

    return data.camera()


def _png(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def test_a_user_uploads_fits_watches_and_denoises_through_the_page(api, server, browser, artefacts, tmp_path, rng):
    camera = _camera()
    # the training set: patches of the upper-left 256 x 256 quarter, a CSV with a header, values in [0, 1]
    corners = rng.integers(0, 256 - PATCH, size=(N_PATCHES, 2))
    patches = np.stack([camera[y:y + PATCH, x:x + PATCH].ravel() for y, x in corners]) / 255.0
    csv = tmp_path / "patches.csv"
    header = ",".join(f"p{i}" for i in range(PATCH * PATCH))
    np.savetxt(csv, patches, fmt="%.4f", delimiter=",", header=header, comments="")
    # the image to denoise: a 48 x 48 crop from elsewhere in the picture, with Gaussian noise
    crop = camera[300:348, 200:248].astype(float)
    noisy = tmp_path / "noisy.png"
    noisy.write_bytes(_png(np.clip(crop + rng.normal(scale=25, size=crop.shape), 0, 255).astype(np.uint8)))

    problems: list[str] = []
    page = open_page(browser, problems, expected_failures=("(Conflict)",))  # the 409 provoked below

    def shot(name: str) -> None:
        page.screenshot(path=str(artefacts / f"{name}.png"), full_page=True)

    try:
        page.goto(server + "/")
        page.wait_for_selector("#fit-form select[name=solver] option[value=kha]", state="attached")
        shot("01-empty")

        # upload: create, one CSV chunk, commit
        page.fill("#upload-form input[name=name]", "camera-patches")
        page.set_input_files("#upload-form input[name=file]", str(csv))
        page.click("#upload-form button[type=submit]")
        page.wait_for_function("document.getElementById('upload-status').textContent.includes('ready')")
        assert f"{N_PATCHES} rows x {PATCH * PATCH} features" in page.text_content("#upload-status")
        page.wait_for_selector("#datasets tbody tr:has-text('camera-patches') .status.ready")
        stored = api.get("/v1/datasets/camera-patches").json()
        assert (stored["status"], stored["n_rows"], stored["n_features"]) == ("ready", N_PATCHES, PATCH * PATCH)
        shot("02-uploaded")

        # fit: KHA on the uploaded set, watched live
        page.fill("#fit-form input[name=name]", "camera-kha")
        page.select_option("#fit-form select[name=dataset]", "camera-patches")
        page.select_option("#fit-form select[name=kernel]", "gaussian")
        page.fill("#fit-form input[name=sigma]", "1.5")
        page.fill("#fit-form input[name=n_components]", str(COMPONENTS))
        page.select_option("#fit-form select[name=solver]", "kha")
        page.fill("#fit-form input[name=passes]", str(PASSES))
        page.fill("#fit-form input[name=params]", '{"init": "random"}')  # a curve to watch, not an exact start
        # every text the pass indicator shows, in order
        page.evaluate("""() => { window.seenPasses = [];
            new MutationObserver((records) => records.forEach((r) => r.addedNodes.forEach((n) =>
                window.seenPasses.push(n.textContent)))).observe(document.getElementById('watch-pass'),
                {childList: true}); }""")
        page.click("#fit-form button[type=submit]")
        page.wait_for_function("document.getElementById('watch-name').textContent === 'camera-kha'")
        page.wait_for_function("/^\\d+\\/\\d+$/.test(document.getElementById('watch-pass').textContent)")
        shot("03-fit-running")
        page.wait_for_function(f"document.getElementById('watch-pass').textContent === '{PASSES}/{PASSES}'")
        page.wait_for_function("document.getElementById('watch-status').textContent === 'completed'")
        page.wait_for_selector("#models tbody tr:has-text('camera-kha') .status.completed")
        shot("04-fit-completed")
        record = api.get("/v1/models/camera-kha").json()
        assert record["status"] == "completed" and record["params_used"]["passes"] == PASSES, record
        assert record["n_components"] == COMPONENTS and record["kernel"]["sigma"] == 1.5
        # one chart point per pass, drawn in the line's colour, and the indicator moved
        assert page.get_attribute("#chart", "data-points") == str(PASSES)
        blue = page.evaluate("""() => { const c = document.getElementById('chart');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;
            for (let i = 0; i < d.length; i += 4) if (d[i] < 60 && d[i + 2] > 150) n++; return n; }""")
        assert blue > 50, f"the chart holds {blue} line pixels"
        seen = [text for text in page.evaluate("window.seenPasses") if text != "-"]
        assert seen == [f"{k}/{PASSES}" for k in range(1, PASSES + 1)], seen
        last_value = record["history"][-1]["convergence"]["value"]
        assert float(page.text_content("#watch-value")) == pytest.approx(last_value, rel=1e-3)

        # the pictures of the ended fit: the route's default convergence size, and the 8x8 patches' components
        page.wait_for_function("""() => ['convergence-picture', 'components-picture'].every((id) =>
            document.getElementById(id).naturalWidth > 0)""")
        sizes = page.evaluate("""() => ['convergence-picture', 'components-picture'].map((id) => {
            const img = document.getElementById(id); return [img.naturalWidth, img.naturalHeight, img.src]; })""")
        assert sizes[0][:2] == [900, 700], sizes
        assert all(src.startswith("blob:") for _, _, src in sizes), sizes
        assert page.text_content("#components-note") == ""
        shot("04b-pictures")

        # an API error is shown as the service words it: the same name again is a 409
        page.click("#fit-form button[type=submit]")
        page.wait_for_selector("#message:not([hidden])")
        expected = api.post("/v1/models", json={
            "name": "camera-kha", "dataset": "camera-patches", "kernel": {"type": "gaussian", "sigma": 1.5},
            "n_components": COMPONENTS, "solver": "kha", "params": {"init": "random", "passes": PASSES}}).json()["error"]
        shown = page.text_content("#message")
        assert expected["message"] in shown and expected["code"] in shown, (shown, expected)
        shot("05-error-shown")

        # denoise: the noisy PNG through the completed model, before and after side by side
        page.wait_for_selector("#denoise-form select[name=model] option[value=camera-kha]", state="attached")
        page.select_option("#denoise-form select[name=model]", "camera-kha")
        page.set_input_files("#denoise-form input[name=file]", str(noisy))
        page.fill("#denoise-form input[name=stride]", "2")
        page.click("#denoise-form button[type=submit]")
        page.wait_for_function("document.getElementById('denoise-after').naturalWidth > 0")
        sizes = page.evaluate("""() => ['denoise-before', 'denoise-after'].map((id) => {
            const img = document.getElementById(id); return [img.naturalWidth, img.naturalHeight]; })""")
        assert sizes == [[48, 48], [48, 48]], sizes
        assert "denoised in" in page.text_content("#denoise-status")
        shot("06-denoised")
        assert not problems, problems
    finally:
        shot("99-last")
        page.close()
