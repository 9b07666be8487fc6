"""Headless Chromium for the dashboard tests: Playwright for Python driving Debian's ``chromium`` package.

No browser is downloaded (``playwright install`` is never run): Playwright launches the binary at
``$KPCA_CHROMIUM`` (default ``/usr/bin/chromium``, which ``make browser`` installs where it can). Without
Playwright or that binary the tests that use `browser` are skipped with a message saying how to install.
Screenshots go to `artefacts`: ``$KPCA_TEST_ARTEFACTS/dashboard``, default ``test-artefacts/dashboard``.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("KPCA_CHROMIUM", "/usr/bin/chromium")
#: without the background-networking flags Chromium waits on the closed network
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
HOW_TO_INSTALL = ("install it with `apt-get install -y chromium` (as root; `make browser` does it), or point "
                  "KPCA_CHROMIUM at a Chromium binary; Playwright for Python comes with the test extra "
                  "(pip install -e '.[test]'); `playwright install` is not needed")
TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def browser() -> Iterator:
    """A headless Chromium (Playwright ``Browser``) for the module; skipped, saying how to install, without one."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip(f"Playwright for Python is not installed; {HOW_TO_INSTALL}")
    if not (shutil.which(CHROMIUM) or Path(CHROMIUM).is_file()):
        pytest.skip(f"no Chromium at {CHROMIUM}: {HOW_TO_INSTALL}")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def artefacts_folder() -> Path:
    """``$KPCA_TEST_ARTEFACTS/dashboard``, default ``test-artefacts/dashboard`` in the repository."""
    root = Path(os.environ["KPCA_TEST_ARTEFACTS"]) if os.environ.get("KPCA_TEST_ARTEFACTS") else REPO / "test-artefacts"
    return root / "dashboard"


def empty_artefacts() -> None:
    """Empty the screenshots' folder: once per test run, before any test (tests/conftest.py), so that
    parallel test processes never remove each other's screenshots."""
    shutil.rmtree(artefacts_folder(), ignore_errors=True)


@pytest.fixture(scope="session")
def artefacts() -> Path:
    """The folder of the dashboard screenshots (emptied by `empty_artefacts` when the run started)."""
    folder = artefacts_folder()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def open_page(browser, problems: list[str], expected_failures: tuple[str, ...] = ()):
    """A new page (1280 px wide, `TIMEOUT_MS` per wait) whose script errors and console errors are appended
    to ``problems``, except failed loads whose message holds one of ``expected_failures`` (such as
    ``"(Conflict)"`` for a 409 the test provokes: the browser logs every non-2xx fetch)."""
    page = browser.new_page(viewport={"width": 1280, "height": 1100})
    page.set_default_timeout(TIMEOUT_MS)
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))

    def console(message) -> None:
        if message.type == "error" and not any(text in message.text for text in expected_failures):
            problems.append(f"console: {message.text}")

    page.on("console", console)
    return page


def wait_until(page, expression: str, timeout_ms: float = TIMEOUT_MS) -> None:
    """Poll a JavaScript expression (or ``() => ...`` function) in ``page`` until it is truthy.

    Playwright's ``wait_for_function`` evaluates its predicate with an in-page ``eval``, which the
    dashboard's Content-Security-Policy (no 'unsafe-eval') refuses; ``page.evaluate`` goes through the
    browser's debugging protocol, which the policy does not govern, so the page is tested under the very
    policy it is served with."""
    deadline = time.monotonic() + timeout_ms / 1000
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_ms / 1000:.0f} s waiting for: {expression}")
        page.wait_for_timeout(50)
