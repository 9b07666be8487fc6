"""What the dashboard's browser tests share: the page of a view, screenshots, and small inputs (image patches
as a CSV, noisy PNGs).

Screenshots go to the test artefacts (`tests.service.browser.artefacts`); the main views' are also
written to ``$KPCA_DOCS_SCREENSHOTS`` when it names a folder (``docs/screenshots``: the pictures of
docs/dashboard.md, one viewport each, so that they stay small).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
from PIL import Image

from tests.service.browser import open_page, wait_until

PATCH = 8


def camera() -> np.ndarray:
    from skimage import data

    return data.camera()


def png_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def noisy_png(path: Path, rng, top: int = 300, left: int = 200, side: int = 48, noise: float = 25.0) -> Path:
    """A ``side`` x ``side`` crop of camera with Gaussian noise, written to ``path``."""
    crop = camera()[top:top + side, left:left + side].astype(float)
    path.write_bytes(png_bytes(np.clip(crop + rng.normal(scale=noise, size=crop.shape), 0, 255).astype(np.uint8)))
    return path


def patches_csv(path: Path, rng, count: int = 600) -> Path:
    """``count`` random 8 x 8 patches of camera's upper-left quarter, values in [0, 1], a CSV with a header."""
    corners = rng.integers(0, 256 - PATCH, size=(count, 2))
    patches = np.stack([camera()[y:y + PATCH, x:x + PATCH].ravel() for y, x in corners]) / 255.0
    header = ",".join(f"p{i}" for i in range(PATCH * PATCH))
    np.savetxt(path, patches, fmt="%.4f", delimiter=",", header=header, comments="")
    return path


class Dashboard:
    """A dashboard page in headless Chromium with its problems (script and console errors), screenshots
    and the waits the tests use."""

    def __init__(self, browser, server: str, artefacts: Path, expected_failures: tuple[str, ...] = ()):
        self.problems: list[str] = []
        self.page = open_page(browser, self.problems, expected_failures)
        #: every 4xx and 5xx answer the page got, "STATUS METHOD URL", to explain a console error
        self.refused: list[str] = []
        self.page.on("response", lambda r: r.status >= 400 and self.refused.append(f"{r.status} {r.request.method} {r.url}"))
        self.server, self.artefacts = server, artefacts

    def open(self, view: str) -> None:
        """Go to ``#/view`` and wait for the lists and the solver catalogue."""
        self.page.goto(f"{self.server}/#/{view}")
        self.page.wait_for_selector("#fit-form select[name=solver] option[value=kha]", state="attached")
        wait_until(self.page, "document.getElementById('refreshed').textContent.startsWith('lists refreshed')")

    def go(self, fragment: str) -> None:
        self.page.evaluate(f"location.hash = {fragment!r}")

    def text(self, selector: str) -> str:
        return self.page.text_content(selector) or ""

    def until(self, condition: str) -> None:
        """Wait until the JavaScript expression ``condition`` is true."""
        wait_until(self.page, condition)

    def until_text(self, element_id: str, contains: str) -> None:
        self.until(f"(document.getElementById({element_id!r}).textContent || '').includes({contains!r})")

    def shot(self, name: str, docs: str | None = None, element: str | None = None) -> None:
        """A full-page screenshot ``name``.png in the artefacts; with ``docs``, the viewport (or the
        ``element`` of that selector) also as ``docs``.png in ``$KPCA_DOCS_SCREENSHOTS``."""
        self.page.screenshot(path=str(self.artefacts / f"{name}.png"), full_page=True)
        folder = os.environ.get("KPCA_DOCS_SCREENSHOTS")
        if docs and folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            target = Path(folder) / f"{docs}.png"
            if element:
                self.page.locator(element).screenshot(path=str(target))
            else:
                self.page.screenshot(path=str(target))

    def close(self) -> None:
        self.shot(f"99-last-{id(self)}")
        self.page.close()
