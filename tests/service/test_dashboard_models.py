"""The models view and a model's page in headless Chromium, against a real server and LocalCluster (issue
29's dashboard): a fit started from the form and followed live, its parameters, history and pictures (full
size on click), resume with a passes box, cancel with messages that follow the state, a cancelled model's
pictures explained, denoising with a method choice, an API error verbatim, export and delete.

Defends against: a live chart that never updates, a resume button that can only earn a 409, messages that
go stale ("cancel: accepted (status now running)" after the fit stopped), an empty components figure with
no word why, pictures shrunk until unreadable, a denoise method the page does not send.
"""

from __future__ import annotations

import tarfile

import numpy as np
import pytest

from tests.api_checks import upload_rows, wait_for_fit
from tests.waiting import wait_until
from tests.service.dashboard_pages import PATCH, Dashboard, camera, noisy_png

COMPONENTS, PASSES = 4, 6


@pytest.fixture(scope="module")
def patches(api):
    rng = np.random.default_rng(5)
    corners = rng.integers(0, 256 - PATCH, size=(600, 2))
    rows = [camera()[y:y + PATCH, x:x + PATCH].ravel() / 255.0 for y, x in corners]
    upload_rows(api, "patches", rows)
    return "patches"


def fill_fit(board: Dashboard, name: str, passes: int, params: str = '{"init": "random"}') -> None:
    page = board.page
    page.fill("#fit-form input[name=name]", name)
    page.select_option("#fit-form select[name=dataset]", "patches")
    page.select_option("#fit-form select[name=kernel]", "gaussian")
    page.fill("#fit-form input[name=sigma]", "1.5")
    page.fill("#fit-form input[name=n_components]", str(COMPONENTS))
    page.select_option("#fit-form select[name=solver]", "kha")
    page.fill("#fit-form input[name=passes]", str(passes))
    page.fill("#fit-form input[name=params]", params)


def test_fit_watch_pictures_resume_export_and_delete(api, server, browser, artefacts, patches, tmp_path):
    board = Dashboard(browser, server, artefacts, expected_failures=("(Conflict)",))  # the 409 provoked below
    page = board.page
    try:
        board.open("models")
        page.wait_for_selector("#fit-form select[name=dataset] option[value=patches]", state="attached")
        fill_fit(board, "camera-kha", PASSES)
        page.evaluate("""() => { window.seenPasses = [];
            new MutationObserver((records) => records.forEach((r) => r.addedNodes.forEach((n) =>
                window.seenPasses.push(n.textContent)))).observe(document.getElementById('watch-pass'),
                {childList: true}); }""")
        page.click("#fit-form button[type=submit]")
        board.until("location.hash === '#/models/camera-kha'")
        board.until("document.getElementById('watch-name').textContent === 'camera-kha'")
        board.until(f"document.getElementById('watch-pass').textContent === '{PASSES}/{PASSES}'")
        board.until("document.getElementById('watch-status').textContent === 'completed'")
        board.until_text("model-notice", f"completed {PASSES} passes")
        record = api.get("/v1/models/camera-kha").json()
        assert record["status"] == "completed" and record["params_used"]["passes"] == PASSES, record
        assert page.get_attribute("#chart", "data-points") == str(PASSES)
        seen = [text for text in page.evaluate("window.seenPasses") if text != "-"]
        assert seen == [f"{k}/{PASSES}" for k in range(1, PASSES + 1)], seen

        # parameters used, history (one row per pass)
        assert "eta0" in board.text("#model-params") and "init" in board.text("#model-params")
        page.click("#history-box summary")
        assert page.locator("#model-history tbody tr").count() == PASSES
        assert board.text("#history-count") == f"{PASSES} passes"

        # the pictures at their own size, and full size on click
        board.until("""['convergence-picture', 'components-picture'].every((id) =>
            document.getElementById(id).naturalWidth > 0)""")
        width = page.evaluate("document.getElementById('convergence-picture').getBoundingClientRect().width")
        assert page.evaluate("document.getElementById('convergence-picture').naturalWidth") == 900 and width >= 880
        board.shot("10-model-completed", docs="model", element="#model-details")
        page.click("#convergence-picture")
        page.wait_for_selector("#viewer:not([hidden])")
        assert page.evaluate("document.getElementById('viewer-image').naturalWidth") == 900
        assert "900 x 700 pixels" in board.text("#viewer-caption")
        page.keyboard.press("Escape")
        page.wait_for_selector("#viewer", state="hidden")

        # resume: the passes box says the new total; at or below the passes done, no button
        assert page.input_value("#resume-passes") == str(PASSES + 10)
        page.fill("#resume-passes", str(PASSES))
        assert page.is_disabled("#resume-button")
        page.fill("#resume-passes", str(PASSES + 2))
        page.click("#resume-button")
        board.until(f"document.getElementById('watch-pass').textContent === '{PASSES + 2}/{PASSES + 2}'")
        board.until_text("model-notice", f"completed {PASSES + 2} passes")
        assert api.get("/v1/models/camera-kha").json()["params"]["passes"] == PASSES + 2
        assert page.is_hidden("#message")
        board.until("document.getElementById('components-picture').naturalWidth > 0")  # drawn again

        # an API error, as the service words it: the same name again is a 409
        fill_fit(board, "camera-kha", PASSES)
        page.click("#fit-form button[type=submit]")
        page.wait_for_selector("#message:not([hidden])")
        clash = api.post("/v1/models", json={"name": "camera-kha", "dataset": "patches", "n_components": 2,
                                             "kernel": {"type": "linear"}}).json()["error"]
        assert clash["message"] in board.text("#message") and clash["code"] in board.text("#message")

        # export: the archive the service streams
        with page.expect_download() as download:
            page.click("#export-model")
        saved = tmp_path / "camera-kha.kpca.tar"
        download.value.save_as(saved)
        assert download.value.suggested_filename == "camera-kha.kpca.tar" and tarfile.is_tarfile(saved)

        # delete from its page: asked twice, then back to the list
        page.click("#delete-model-slot button")
        page.click("#delete-model-slot button")
        board.until("location.hash === '#/models'")
        page.wait_for_selector("#models tbody tr[data-name=camera-kha]", state="detached")
        assert page.is_hidden("#model-details") and api.get("/v1/models/camera-kha").status_code == 404
        assert not board.problems, (board.problems, board.refused)
    finally:
        board.close()


def test_cancel_and_resume_messages_follow_the_state(api, server, browser, artefacts, patches):
    board = Dashboard(browser, server, artefacts)
    page = board.page
    try:
        board.open("models")
        page.wait_for_selector("#fit-form select[name=dataset] option[value=patches]", state="attached")
        fill_fit(board, "long", 5000, '{"init": "random", "block_size": 25}')
        page.click("#fit-form button[type=submit]")
        board.until("document.getElementById('watch-status').textContent === 'running'")
        assert page.is_disabled("#resume-button") and page.is_enabled("#cancel-button")
        board.until("/^[1-9][0-9]*\\//.test(document.getElementById('watch-pass').textContent)")  # a pass to draw
        page.click("#cancel-button")
        # the notice says what was asked, then what happened: never "running" once it has stopped
        board.until_text("model-notice", "cancelled after pass")
        assert "cancel asked" not in board.text("#model-notice")
        assert board.text("#watch-status") == "cancelled" and page.is_disabled("#cancel-button")
        record = wait_for_fit(api, "long")
        assert record["status"] == "cancelled"
        # no empty components figure: a note says why there is none
        board.until_text("components-note", "drawn for a completed model; this one is cancelled")
        assert page.get_attribute("#components-picture", "src") is None
        assert page.is_enabled("#resume-button") and page.input_value("#resume-passes") == ""
        board.shot("11-model-cancelled", docs="model-cancelled", element="#model-details")

        page.click("#resume-button")
        board.until("document.getElementById('watch-status').textContent === 'running'")
        board.until_text("model-notice", "running")
        # a long resume in progress (issue 58): the counter goes on from the pass it stopped at, of the same
        # total, and says it is alive (the passes keep coming, the time left shown)
        stopped = record["progress"]["pass"]
        board.until(f"(() => {{ const m = /^(\\d+)\\/(\\d+)/.exec(document.getElementById('watch-pass').textContent);"
                    f" return m && Number(m[1]) > {stopped} + 1 && m[2] === '5000'; }})()")
        board.shot("11-model-resumed", docs="model-resumed", element="#model-details")
        page.click("#cancel-button")
        board.until_text("model-notice", "cancelled after pass")
        assert api.get("/v1/models/long").json()["status"] == "cancelled"
        assert not board.problems, (board.problems, board.refused)
    finally:
        board.close()


def test_denoise_an_image_with_a_method_and_see_it_full_size(api, server, browser, artefacts, patches, rng, tmp_path):
    api.post("/v1/models", json={"name": "denoiser", "dataset": "patches", "n_components": COMPONENTS,
                                 "kernel": {"type": "gaussian", "sigma": 1.5}, "solver": "exact"}).raise_for_status()
    assert wait_for_fit(api, "denoiser")["status"] == "completed"
    noisy = noisy_png(tmp_path / "noisy.png", rng)
    board = Dashboard(browser, server, artefacts)
    page = board.page
    try:
        board.open("models/denoiser")
        page.wait_for_selector("#denoise-form:not([hidden])")
        page.set_input_files("#denoise-form input[name=file]", str(noisy))
        page.select_option("#denoise-form select[name=method]", "kwok-tsang")
        page.check("#denoise-form input[name=compare]")
        denoise_requests = []
        page.on("request", lambda request: denoise_requests.append(request.url) if "denoise-image" in request.url else None)
        with page.expect_request(lambda request: "denoise-image" in request.url) as sent:
            page.click("#denoise-form button[type=submit]")
        assert "method=kwok-tsang" in sent.value.url and "stride=2" in sent.value.url
        assert "job=dashboard-" in sent.value.url and "background=true" in sent.value.url  # a background job:
        job = sent.value.url.split("job=")[1].split("&")[0]  # no serving deadline to end it in a 503 (issue 55)
        board.until("document.getElementById('denoise-compare').naturalWidth > 0")
        board.until_text("denoise-status", "with kwok-tsang")
        wait_until(lambda: api.get(f"/v1/image-jobs/{job}").status_code == 404, what="the job's record deleted")
        assert len(denoise_requests) == 1, denoise_requests  # one request per click, side by side or not (issue 55)
        sizes = page.evaluate("""() => ['denoise-before', 'denoise-after'].map((id) => {
            const img = document.getElementById(id); return [img.naturalWidth, img.getBoundingClientRect().width]; })""")
        assert [natural for natural, _ in sizes] == [48, 48] and all(shown >= 48 * 8 for _, shown in sizes), sizes
        assert page.evaluate("document.getElementById('denoise-compare').naturalWidth") >= 2 * 48 * 10
        board.shot("12-denoised", docs="denoise", element="#denoise-form")
        page.click("#denoise-after")
        page.wait_for_selector("#viewer:not([hidden])")
        assert "48 x 48 pixels, shown 13 times" in board.text("#viewer-caption")
        page.click("#viewer")
        page.wait_for_selector("#viewer", state="hidden")
        # the same form hyper-resolves: 2x, as one background job with its progress (issue 55)
        page.select_option("#denoise-form select[name=upscale]", "2")
        page.select_option("#denoise-form select[name=method]", "auto")
        page.uncheck("#denoise-form input[name=compare]")
        with page.expect_request(lambda request: "denoise-image" in request.url and "upscale=2" in request.url) as sent:
            page.click("#denoise-form button[type=submit]")
        assert "background=true" in sent.value.url and "job=dashboard-" in sent.value.url
        board.until_text("denoise-status", "hyper-resolved 2x in ")
        assert page.evaluate("document.getElementById('denoise-after').naturalWidth") == 2 * 48
        assert len(denoise_requests) == 2, denoise_requests
        board.shot("13-hyper-resolved", docs="hyperresolve", element="#denoise-form")
        assert not board.problems, (board.problems, board.refused)
    finally:
        board.close()
