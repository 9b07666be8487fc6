"""The dashboard (``/``) on a server with API keys, in headless Chromium (tests/service/browser.py).

The page asks for a key when the API answers 401, sends it as ``Authorization: Bearer`` on every call
(the event stream too: it is read with ``fetch``, since ``EventSource`` cannot send the header), shows a
403 as the service words it, and keeps the key for the tab (sessionStorage) across a reload; its cancel
and resume buttons stop and continue a fit.

Defends against: a dashboard that works only on an open server, or whose live chart stays empty
behind a key.
"""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from service.routes.dashboard import ASSETS
from tests.service.browser import open_page, wait_until

READ_KEY = "dash-read-0123456789"
WRITE_KEY = "dash-write-9876543210"
SERVER_SETTINGS = {"api_keys": f"{READ_KEY}:read, {WRITE_KEY}:write"}
PASSES = 3
LONG_PASSES = 5000  # a fit still running when the test cancels it


@pytest.fixture(scope="module")
def writer(server):
    with httpx.Client(base_url=server, timeout=60.0, headers={"Authorization": f"Bearer {WRITE_KEY}"}) as client:
        yield client


def test_the_page_and_its_assets_need_no_key_but_the_lists_do(server):
    with httpx.Client(base_url=server, timeout=30.0) as anonymous:
        assert anonymous.get("/").status_code == 200
        for asset in ASSETS:
            assert anonymous.get(f"/dashboard/assets/{asset}").status_code == 200, asset
        assert anonymous.get("/v1/models").status_code == 401


def test_the_page_asks_for_a_key_and_sends_it_on_every_call(server, writer, browser, artefacts, digits, tmp_path):
    csv = tmp_path / "digits.csv"
    np.savetxt(csv, digits[:200], fmt="%.4f", delimiter=",")  # no header line
    problems: list[str] = []
    # the 401s before a key is given and the 403 of the read key are expected; the browser logs them
    page = open_page(browser, problems, expected_failures=("(Unauthorized)", "(Forbidden)"))

    def use_key(key: str) -> None:
        page.fill("#api-key", key)
        page.click("#key-form button[type=submit]")

    try:
        page.goto(server + "/#/datasets")
        wait_until(page, "document.getElementById('key-status').textContent.includes('needs an API key')")
        wait_until(page, "document.getElementById('refreshed').textContent.includes('401')")
        page.screenshot(path=str(artefacts / "11-key-asked.png"), full_page=True)

        # a read key lists, but cannot upload: the 403 is shown as the service words it
        use_key(READ_KEY)
        wait_until(page, "document.getElementById('refreshed').textContent.startsWith('lists refreshed')")
        page.fill("#upload-form input[name=name]", "digits")
        page.set_input_files("#upload-form input[name=file]", str(csv))
        page.click("#upload-form button[type=submit]")
        page.wait_for_selector("#message:not([hidden])")
        refused = httpx.post(server + "/v1/datasets", json={"name": "digits", "n_features": 64, "dtype": "float64"},
                             headers={"Authorization": f"Bearer {READ_KEY}"})
        assert refused.status_code == 403
        assert refused.json()["error"]["message"] in page.text_content("#message")
        page.screenshot(path=str(artefacts / "12-read-key-refused.png"), full_page=True)

        # a write key: upload, fit, and the live stream with the key
        use_key(WRITE_KEY)
        page.click("#upload-form button[type=submit]")
        wait_until(page, "document.getElementById('upload-status').textContent.includes('ready')")
        page.click("#tabs a[data-view=models]")
        page.wait_for_selector("#fit-form select[name=dataset] option[value=digits]", state="attached")
        page.fill("#fit-form input[name=name]", "digits-kha")
        page.select_option("#fit-form select[name=dataset]", "digits")
        page.fill("#fit-form input[name=n_components]", "2")
        page.select_option("#fit-form select[name=solver]", "kha")
        page.fill("#fit-form input[name=passes]", str(PASSES))
        page.fill("#fit-form input[name=params]", '{"init": "random"}')
        page.click("#fit-form button[type=submit]")
        wait_until(page, f"document.getElementById('watch-pass').textContent === '{PASSES}/{PASSES}'")
        wait_until(page, "document.getElementById('watch-status').textContent === 'completed'")
        assert page.get_attribute("#chart", "data-points") == str(PASSES)
        assert writer.get("/v1/models/digits-kha").json()["status"] == "completed"
        # the pictures are fetched with the key too (8x8 digits: components.png works)
        wait_until(page, """() => ['convergence-picture', 'components-picture'].every((id) =>
            document.getElementById(id).naturalWidth > 0)""")
        page.screenshot(path=str(artefacts / "13-fit-with-key.png"), full_page=True)

        # cancel and resume a long fit from the buttons
        page.fill("#fit-form input[name=name]", "digits-long")
        page.fill("#fit-form input[name=passes]", str(LONG_PASSES))
        page.click("#fit-form button[type=submit]")
        wait_until(page, "document.getElementById('watch-name').textContent === 'digits-long'")
        wait_until(page, "document.getElementById('watch-status').textContent === 'running'")
        page.click("#cancel-button")
        wait_until(page, "document.getElementById('watch-status').textContent === 'cancelled'")
        cancelled = writer.get("/v1/models/digits-long").json()
        assert cancelled["status"] == "cancelled" and cancelled["progress"]["pass"] < LONG_PASSES, cancelled["progress"]
        page.screenshot(path=str(artefacts / "14-cancelled.png"), full_page=True)
        page.click("#resume-button")
        wait_until(page, "['queued', 'running'].includes(document.getElementById('watch-status').textContent)")
        page.click("#cancel-button")
        wait_until(page, "document.getElementById('watch-status').textContent === 'cancelled'")
        assert writer.get("/v1/models/digits-long").json()["status"] == "cancelled"

        # the key stays for the tab
        page.reload()
        assert page.input_value("#api-key") == WRITE_KEY
        page.wait_for_selector("#models tbody tr:has-text('digits-kha') .status.completed")
        assert not problems, problems
    finally:
        page.close()
