"""What a small request may make the service store, with the default settings (issue 30, item 9).

A 2048^2 PNG of a few KB cut into 64 x 64 patches every 7 pixels was 81,225 rows x 4,096 features
(1.3 GB of float32, 38.7 s, a 3 GB worker); it is refused from the PNG's header, before any work,
naming patch, stride and the limit. The data folder's size is bounded by default (a fraction of the
disk's free bytes at start), not unlimited.
"""

from __future__ import annotations

import io
import shutil
import time

import numpy as np
import pytest
from PIL import Image

from service import Settings, create_app
from service.errors import ApiError
from service.limits import DATA_DISK_FRACTION, DataUsage, automatic_data_limit, folder_bytes, resolved_data_limit
from tests.api_checks import assert_error
from tests.waiting import wait_until


def png(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def test_a_few_kb_of_png_cannot_become_gigabytes_of_patches(api):
    y, x = np.mgrid[0:2048, 0:2048]
    body = png(((x // 256 + y // 256) % 2 * 255).astype(np.uint8))  # a checkerboard: a few KB
    assert len(body) < 16_384
    r = api.post("/v1/datasets/bomb/from-image?patch=64&stride=7", content=body,
                 headers={"Content-Type": "image/png"})
    message = assert_error(r, 422, "invalid", "patch")["message"]
    for part in ("patch 64", "stride 7", "4096 features", "KPCA_MAX_IMAGE_DATASET_VALUES", str(2**25)):
        assert part in message, message
    assert api.get("/v1/datasets/bomb").status_code == 404
    small = api.post("/v1/datasets/fine/from-image?patch=8&stride=8", content=body,
                     headers={"Content-Type": "image/png"})  # 65,536 rows x 64: within the limits
    assert small.status_code == 201, small.text


def test_the_data_folder_is_bounded_by_default(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "old.bin").write_bytes(b"x" * 10_000)
    free = shutil.disk_usage(tmp_path).free
    limit = automatic_data_limit(tmp_path / "data")
    assert abs(limit - (10_000 + DATA_DISK_FRACTION * free)) < 0.01 * free  # other writers move `free` a little
    assert folder_bytes(str(tmp_path / "data")) == 10_000
    assert automatic_data_limit(tmp_path / "not-yet" / "data") > 0  # a folder created later: its disk's
    assert resolved_data_limit(tmp_path, 0) is None and resolved_data_limit(tmp_path, 123) == 123
    assert Settings(max_data_bytes="unlimited").max_data_bytes == 0
    assert Settings(max_data_bytes="").max_data_bytes is None
    app = create_app(Settings(data_dir=tmp_path / "data", scheduler=None, n_workers=1))
    assert app.state.data_usage.limit is not None and app.state.data_usage.limit > 10_000


def test_the_data_usage_figure_is_walked_outside_the_callers_thread(tmp_path):
    """`DataUsage.check` runs on the event loop: a stale figure is refreshed by a walk in a thread of its
    own, never in the caller (a walk of a busy data folder stalled the event loop), and the
    bytes counted meanwhile (`add`) are kept."""
    (tmp_path / "old.bin").write_bytes(b"x" * 10_000)
    usage = DataUsage(tmp_path, limit=50_000, ttl_s=0.5)
    (tmp_path / "new.bin").write_bytes(b"x" * 20_000)  # written by another process (a worker)
    usage.add(1_000)  # an upload counted by this one
    assert usage.used() == 11_000  # walked when made, plus the upload
    time.sleep(0.6)  # past the figure's ttl (a loaded machine only sleeps longer)
    assert usage.used() == 11_000  # stale: the caller gets the figure at once, the walk runs elsewhere
    wait_until(lambda: usage.used() == 30_000, what="the walk's figure", interval=0.01)
    usage.add(500)
    usage.check(19_500)
    with pytest.raises(ApiError) as refused:
        usage.check(19_501)
    assert (refused.value.status_code, refused.value.code, refused.value.field) == (413, "storage_full", "body")
