"""Configurable limits (service.limits, Settings.max_*): each over-limit request is a 413/422/429 naming
the field and the limit, refused before the work it would cost (real server, real cluster)."""

from __future__ import annotations

import io
import os
import signal
import struct
import subprocess
import sys
import threading
import time
import zlib

import httpx
import numpy as np
import pytest
from PIL import Image

from kpca.images.patches import patch_count
from service.images import png_header
from tests.api_checks import assert_error, upload_rows, wait_for_fit
from tests.e2e.service_process import free_port
from tests.waiting import PATIENCE_S, answers_healthz, wait_until

SERVER_SETTINGS = {
    "max_image_pixels": 20_000,
    "max_patches": 2_000,
    "max_image_dataset_rows": 1_000,
    "max_rows_per_request": 50,
    "max_serving_body_bytes": 200_000,
    "max_fits_per_key": 2,
    "max_data_bytes": 4_000_000,
}
PNG = {"Content-Type": "image/png"}


def png(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG")
    return buf.getvalue()


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def forged_png(width: int, height: int, depth: int = 8, colour: int = 0, size: int = 334) -> bytes:
    """A PNG whose header declares ``width`` x ``height`` but whose pixel data stops after ``size`` bytes
    (the issue's 334-byte file declaring 4096 x 4096)."""
    head = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0))
    pixels = zlib.compress(bytes(width + 1) * 64, 0)  # the first 64 rows of a black image, stored
    return head + chunk(b"IDAT", pixels[: size - len(head) - 12])


@pytest.fixture(scope="module")
def patch_model(api):
    """A 3x3-patch model (9 features) fitted on the patches of a small grey image."""
    y, x = np.mgrid[0:20, 0:20] / 19.0
    image = np.round(255 * (0.5 + 0.4 * np.sin(3 * x) * np.cos(2 * y))).astype(np.uint8)
    r = api.post("/v1/datasets/tiles/from-image?patch=3&stride=1", content=png(image), headers=PNG)
    assert r.status_code == 201, r.text
    r = api.post("/v1/models", json={"name": "tiles-rbf", "dataset": "tiles", "n_components": 4,
                                     "kernel": {"type": "gaussian", "sigma": 0.5}, "solver": "exact"})
    assert r.status_code == 202, r.text
    assert wait_for_fit(api, "tiles-rbf")["status"] == "completed"
    return "tiles-rbf"


def test_a_truncated_png_declaring_4096_squared_is_refused_from_its_header(api, patch_model):
    body = forged_png(4096, 4096)
    assert len(body) == 334 and png_header(body) == (4096, 4096, 8, 1)
    for url in ("/v1/datasets/bomb/from-image", f"/v1/models/{patch_model}/denoise-image"):
        # (its 334 bytes hold no pixels to decode: the refusal can come from nothing but the header)
        message = assert_error(api.post(url, content=body, headers=PNG), 413, "too_large", "body")["message"]
        assert "4096x4096" in message and "20000" in message and "KPCA_MAX_IMAGE_PIXELS" in message
    assert api.get("/v1/datasets/bomb").status_code == 404


def test_a_truncated_png_within_the_pixel_limit_is_a_400_not_a_500(api):
    # stride 8: 100 patches, within the row limit that is checked (from the header) before decoding
    assert_error(api.post("/v1/datasets/trunc/from-image?stride=8", content=forged_png(90, 90, size=80),
                          headers=PNG), 400, "bad_request", "body")


@pytest.mark.parametrize("body, status", [
    (forged_png(64, 64, depth=3, colour=2), 400),  # RGB takes bit depth 8 or 16 only
    (forged_png(64, 64, colour=5), 400),  # no colour type 5
    (forged_png(0, 64), 400),  # an empty image
    (forged_png(64, 64)[:20], 400),  # the header itself cut short
    (forged_png(64, 64)[:29] + b"\0\0\0\0" + forged_png(64, 64)[33:], 400),  # IHDR CRC wrong
    (b"GIF89a" + bytes(100), 400),  # not a PNG at all
])
def test_inconsistent_png_headers_are_refused(api, body, status):
    r = api.post("/v1/datasets/badhead/from-image", content=body, headers=PNG)
    assert_error(r, status, "bad_request", "body")


def test_a_tiny_png_cannot_become_a_large_data_set(api):
    """The issue's 141-byte PNG that became 15,625 rows: 126 x 126 pixels, 2 x 2 patches, stride 1."""
    body = png(np.full((126, 126), 7, dtype=np.uint8))
    assert len(body) < 200 and patch_count(126, 126, 2, 1) == 15_625
    message = assert_error(api.post("/v1/datasets/tiny/from-image?patch=2&stride=1", content=body,
                                    headers=PNG), 422, "invalid", "stride")["message"]
    assert "15625" in message and "1000" in message and "KPCA_MAX_IMAGE_DATASET_ROWS" in message
    assert api.get("/v1/datasets/tiny").status_code == 404
    r = api.post("/v1/datasets/tiny/from-image?patch=5&stride=5", content=body, headers=PNG)  # 26 x 26 patches
    assert r.status_code == 201, r.text
    assert r.json()["n_rows"] == patch_count(126, 126, 5, 5) == 26 * 26


def test_patches_per_image_request_are_counted_before_any_work(api, patch_model, rng):
    image = rng.integers(0, 256, size=(90, 90), dtype=np.uint8)
    url = f"/v1/models/{patch_model}/denoise-image"
    message = assert_error(api.post(url + "?stride=1&tune=off", content=png(image), headers=PNG),
                           422, "invalid", "stride")["message"]
    assert "7744 patches" in message and "2000" in message and "KPCA_MAX_PATCHES" in message
    r = api.post(url + "?stride=3&tune=off", content=png(image), headers=PNG)  # 30 x 30 = 900 patches
    assert r.status_code == 200, r.text
    with Image.open(io.BytesIO(r.content)) as out:
        assert out.size == (90, 90)
    # its default, tuned, reads its patches a band at a time (issue 55): the limit holds where they are all held
    # at once (tune=off above, hyperresolution), not here
    r = api.post(url + "?stride=1", content=png(image), headers=PNG)
    assert r.status_code == 200, r.text
    with Image.open(io.BytesIO(r.content)) as out:
        assert out.size == (90, 90)
    # the one-call route reads its tiles a band at a time: the limit holds where every patch is held at once,
    # one model of the whole image (tile=0) or the kept data set of them (keep)
    fast = "?tune=off&sigma=0.5&n_components=2&method=fixed-point&second_stage=off"
    for extra, field in (("&tile=0", "stride"), ("&keep=kept", "stride")):
        message = assert_error(api.post("/v1/denoise-image" + fast + extra, content=png(image), headers=PNG),
                               422, "invalid", field)["message"]
        assert "7056 patches" in message and "KPCA_MAX_PATCHES" in message  # 7 x 7 patches, stride 1
    r = api.post("/v1/denoise-image" + fast, content=png(image), headers=PNG)
    assert r.status_code == 200, r.text
    # upscaling multiplies the pixels: 180 x 180 is over the 20,000-pixel limit
    assert_error(api.post(url + "?stride=3&upscale=2", content=png(image), headers=PNG), 413, "too_large", "upscale")


def test_rows_per_request(api, patch_model):
    rows = np.full((51, 9), 0.5)
    for route in ("project", "reconstruct", "denoise"):
        message = assert_error(api.post(f"/v1/models/{patch_model}/{route}", json={"rows": rows.tolist()}),
                               413, "too_large", "rows")["message"]
        assert "51 rows" in message and "50" in message
        assert api.post(f"/v1/models/{patch_model}/{route}", json={"rows": rows[:50].tolist()}).status_code == 200
    # a clustering's predict too, checked before the clustering is looked up
    assert_error(api.post("/v1/clusterings/absent/predict", json={"rows": rows.tolist()}), 413, "too_large", "rows")
    assert api.post("/v1/clusterings/absent/predict", json={"rows": rows[:50].tolist()}).status_code == 404
    api.post("/v1/datasets", json={"name": "wide", "n_features": 9, "dtype": "float64"}).raise_for_status()
    buf = io.BytesIO()
    np.save(buf, rows)
    r = api.put("/v1/datasets/wide/chunks/0", content=buf.getvalue(),
                headers={"Content-Type": "application/octet-stream"})
    assert_error(r, 413, "too_large", "rows")
    assert api.put("/v1/datasets/wide/chunks/0", json={"rows": rows[:50].tolist()}).status_code == 200


def test_serving_routes_have_the_smaller_body_limit(api, patch_model):
    rows = np.full((45, 9), 0.123456789012345).tolist()
    padded = '{"rows": ' + str(rows).replace(",", "," + " " * 600) + "}"
    assert 200_000 < len(padded) < 1_000_000
    r = api.post(f"/v1/models/{patch_model}/project", content=padded, headers={"Content-Type": "application/json"})
    assert_error(r, 413, "too_large", "body")
    # the same body is fine for an upload (max_body_bytes, 64 MiB by default)
    api.post("/v1/datasets", json={"name": "padded", "n_features": 9, "dtype": "float64"}).raise_for_status()
    r = api.put("/v1/datasets/padded/chunks/0", content=padded, headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text


def test_concurrent_fits_per_key_are_limited(api, digits):
    upload_rows(api, "slow", digits[:300], chunks=6)  # 50 rows a request (max_rows_per_request)
    slow = {"dataset": "slow", "n_components": 4, "kernel": {"type": "gaussian", "sigma": 3.0},
            "solver": "kha", "params": {"passes": 10_000, "init": "random"}}
    for name in ("slow-1", "slow-2"):
        assert api.post("/v1/models", json={"name": name, **slow}).status_code == 202
    r = api.post("/v1/models", json={"name": "slow-3", **slow})
    message = assert_error(r, 429, "too_many_fits", "name")["message"]
    assert "KPCA_MAX_FITS_PER_KEY" in message and int(r.headers["Retry-After"]) > 0
    r = api.post("/v1/clusterings", json={"name": "slow-c", "dataset": "slow", "n_clusters": 3,
                                          "kernel": {"type": "gaussian", "sigma": 3.0}})
    assert_error(r, 429, "too_many_fits", "name")
    assert api.get("/v1/models/slow-3").status_code == 404
    api.post("/v1/models/slow-1/cancel", json={}).raise_for_status()
    assert wait_for_fit(api, "slow-1")["status"] == "cancelled"
    assert api.post("/v1/models", json={"name": "slow-3", **slow}).status_code == 202
    for name in ("slow-1", "slow-2", "slow-3"):
        assert api.delete(f"/v1/models/{name}").status_code == 204


def test_a_full_data_folder_refuses_uploads(api, data_dir, rng):
    """Last in the module: fills the folder up to max_data_bytes (4 MB)."""
    api.post("/v1/datasets", json={"name": "filler", "n_features": 100, "dtype": "float64"}).raise_for_status()
    rows = rng.normal(size=(50, 100))
    full = None
    for index in range(200):  # 40 kB a chunk: 100 chunks would be 4 MB
        r = api.put(f"/v1/datasets/filler/chunks/{index}", json={"rows": rows.tolist()})
        if r.status_code != 200:
            full = r
            break
    assert full is not None, "the data folder was never full"
    message = assert_error(full, 413, "storage_full", "body")["message"]
    assert "4000000" in message and "KPCA_MAX_DATA_BYTES" in message
    used = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(data_dir) for f in fs)
    assert used <= 4_000_000


@pytest.mark.slow
def test_sigterm_stops_the_service_within_seconds_while_a_request_runs(tmp_path):
    """`python -m service` with a long denoise-image request in flight (a large but allowed image on a
    big model) and a long fit running: SIGTERM ends the process and its workers within ~10 s."""
    port = free_port()
    env = {**os.environ, "KPCA_N_WORKERS": "1", "KPCA_SHUTDOWN_TIMEOUT_S": "3",
           "KPCA_MAX_SERVING_WORK": str(10**15)}  # a request long enough to be in flight at the signal
    proc = subprocess.Popen([sys.executable, "-m", "service", "--host", "127.0.0.1", "--port", str(port),
                             "--data-dir", str(tmp_path)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=url, timeout=120) as api:
            def up() -> bool:
                assert proc.poll() is None, proc.stdout.read().decode()
                return answers_healthz(url)

            wait_until(up, what="the service to answer /healthz", interval=0.2)
            rng = np.random.default_rng(0)
            image = rng.integers(0, 256, size=(400, 400), dtype=np.uint8)
            r = api.post("/v1/datasets/big/from-image?patch=11&stride=8", content=png(image), headers=PNG)
            assert r.status_code == 201, r.text
            r = api.post("/v1/models", json={"name": "big-exact", "dataset": "big", "n_components": 32,
                                             "kernel": {"type": "gaussian", "sigma": 30.0}, "solver": "exact"})
            assert r.status_code == 202, r.text
            assert wait_for_fit(api, "big-exact", timeout=300)["status"] == "completed"
            api.post("/v1/models", json={"name": "big-kha", "dataset": "big", "n_components": 8,
                                         "kernel": {"type": "gaussian", "sigma": 30.0}, "solver": "kha",
                                         "params": {"passes": 10_000}}).raise_for_status()
            answers = []
            request = threading.Thread(target=lambda: answers.append(_post_quietly(
                url + "/v1/models/big-exact/denoise-image?stride=1&method=fixed-point", png(image[:256, :256]))))
            request.start()
            time.sleep(3.0)  # it reaches the service (a loaded machine that is slower makes it run longer)
            assert not answers, f"the denoise request finished too soon to test shutdown: {answers}"
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=PATIENCE_S)
        stopped = time.monotonic() - started
        request.join(timeout=PATIENCE_S)
        # within seconds (KPCA_SHUTDOWN_TIMEOUT_S 3 and the cluster's close), not at the end of the request's
        # hours of work: bounded generously, for a loaded machine
        assert stopped < 60.0, f"took {stopped:.1f} s to stop"
    finally:
        if proc.poll() is None:
            proc.kill()
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything left in its group (dask workers)
        except ProcessLookupError:
            pass
        proc.wait()


def _post_quietly(url: str, body: bytes):
    try:
        return httpx.post(url, content=body, headers=PNG, timeout=120).status_code
    except httpx.HTTPError as exc:
        return exc
