"""A large photograph denoised as a background image job, as a user would run it (issue 55): from the command
line (``kpca denoise-fit``) and from the dashboard's "Denoise a photograph" form, on a service started as
``make run`` starts it (`bench._service.service_process`: ``python -m service``, its embedded cluster, a fresh
data folder).

The photograph: the centre ``--size`` x ``--size`` crop of scikit-image's bundled ``retina`` (1411 x 1411,
the largest bundled photograph) in grey, Gaussian noise of standard deviation ``--noise`` added and clipped to
[0, 1], an 8-bit PNG. Measured: the command's wall time and its progress lines (stderr, one per poll), the
job's steps, the dashboard's time from the click to the shown answer with a screenshot while it runs and one
at the end (``docs/screenshots/denoise-photo-{size}-progress.png`` and ``-done.png``), the PSNR of the answer
against the clean crop, and with ``--bm3d`` BM3D on the same pixels in this process (its noise from
scikit-image's estimate), the anchor the issue names. Writes bench/results/photo_job.json.

    python bench/photo_job.py [--size 1024] [--noise 0.1] [--bm3d] [--no-dashboard]
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402
from skimage import data  # noqa: E402
from skimage.color import rgb2gray  # noqa: E402
from skimage.metrics import peak_signal_noise_ratio  # noqa: E402

from bench._common import ROOT, save  # noqa: E402
from bench._service import service_process  # noqa: E402

SCREENSHOTS = ROOT / "docs" / "screenshots"
CHROMIUM = os.environ.get("KPCA_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def photograph(size: int, noise: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The clean centre crop (float, [0, 1]) and its noisy 8-bit copy."""
    grey = rgb2gray(data.retina())
    top = (grey.shape[0] - size) // 2
    clean = grey[top:top + size, top:top + size]
    noisy = np.clip(clean + np.random.default_rng(seed).normal(0.0, noise, clean.shape), 0.0, 1.0)
    return clean, np.round(noisy * 255).astype(np.uint8)


def png_bytes(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def unpng(body: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(body)) as image:
        return np.asarray(image)


def from_cli(url: str, noisy_path: Path, out_path: Path) -> dict:
    """``kpca denoise-fit`` as a user runs it: wall time, its progress lines, what it printed."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "client", "--url", url, "denoise-fit", str(noisy_path), "-o",
                           str(out_path)], capture_output=True, text=True, cwd=ROOT, timeout=1800)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"kpca denoise-fit failed ({done.returncode}): {done.stderr[-2000:]}")
    lines = done.stderr.strip().splitlines()
    return {"seconds": round(seconds, 2), "progress_lines": len(lines), "first_lines": lines[:3],
            "some_lines": lines[3:-1:max(1, len(lines) // 8)], "last_line": lines[-1] if lines else None,
            "stdout": done.stdout.strip()}


def until(page, expression: str, timeout_s: float) -> None:
    """Poll ``expression`` in ``page`` until truthy (the dashboard's Content-Security-Policy refuses the
    in-page eval of Playwright's ``wait_for_function``; ``page.evaluate`` is not governed by it)."""
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for: {expression}")
        page.wait_for_timeout(200)


def from_dashboard(url: str, noisy_path: Path, size: int) -> dict:
    """The dashboard's form: click to answer shown, a screenshot while it runs and at the end."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{url}/#/datasets")
            page.wait_for_selector("#view-datasets:not([hidden])")
            page.set_input_files("#photo-form input[name=file]", str(noisy_path))
            started = time.perf_counter()
            page.click("#photo-form button[type=submit]")
            until(page, "(document.getElementById('photo-status').textContent || '').includes('left in this step')"
                  " && /: (denoising|second stage) /.test(document.getElementById('photo-status').textContent)", 600)
            progress_text = page.text_content("#photo-status")
            page.locator("#photo-form").screenshot(path=str(SCREENSHOTS / f"denoise-photo-{size}-progress.png"))
            until(page, "(document.getElementById('photo-status').textContent || '').includes('denoised ')", 1800)
            seconds = time.perf_counter() - started
            until(page, "document.getElementById('photo-after').complete", 60)
            done_text = page.text_content("#photo-status")
            page.locator("#photo-form").screenshot(path=str(SCREENSHOTS / f"denoise-photo-{size}-done.png"))
        finally:
            browser.close()
    return {"seconds": round(seconds, 2), "progress_status": progress_text, "final_status": done_text,
            "screenshots": [f"docs/screenshots/denoise-photo-{size}-progress.png",
                            f"docs/screenshots/denoise-photo-{size}-done.png"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--noise", type=float, default=0.1)
    ap.add_argument("--bm3d", action="store_true", help="BM3D on the same pixels, in this process")
    ap.add_argument("--dashboard", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--name", default="photo_job")
    args = ap.parse_args()
    clean, noisy = photograph(args.size, args.noise)
    result: dict = {"image": f"retina, centre {args.size} x {args.size}, grey", "noise": args.noise,
                    "noisy_psnr_db": peak_signal_noise_ratio(clean, noisy / 255.0, data_range=1.0)}
    with tempfile.TemporaryDirectory() as folder, service_process() as url:
        noisy_path, out_path = Path(folder) / "noisy.png", Path(folder) / "denoised.png"
        noisy_path.write_bytes(png_bytes(noisy))
        result["cli"] = from_cli(url, noisy_path, out_path)
        result["cli"]["psnr_db"] = peak_signal_noise_ratio(clean, unpng(out_path.read_bytes()) / 255.0, data_range=1.0)
        if args.dashboard:
            result["dashboard"] = from_dashboard(url, noisy_path, args.size)
    if args.bm3d:
        import bm3d
        from skimage.restoration import estimate_sigma

        unit = noisy / 255.0
        started = time.perf_counter()
        estimate = bm3d.bm3d(unit, sigma_psd=float(estimate_sigma(unit)))
        result["bm3d"] = {"seconds": round(time.perf_counter() - started, 2),
                          "psnr_db": peak_signal_noise_ratio(clean, np.clip(estimate, 0, 1), data_range=1.0)}
        result["cli_over_bm3d"] = round(result["cli"]["seconds"] / result["bm3d"]["seconds"], 2)
    save(args.name, result)


if __name__ == "__main__":
    main()
