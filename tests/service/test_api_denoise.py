"""Pre-images and image denoising through HTTP (real server, real cluster)."""

import io

import numpy as np
import pytest
from PIL import Image

from tests.api_checks import assert_error, wait_for_fit

N = 400


def png(array):
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG")
    return buf.getvalue()


def unpng(body):
    with Image.open(io.BytesIO(body)) as img:
        return np.asarray(img)


@pytest.fixture(scope="module")
def digits_model(api, digits):
    api.post("/v1/datasets", json={"name": "digits", "n_features": 64, "dtype": "float64"})
    api.put("/v1/datasets/digits/chunks/0", json={"rows": digits[:N].tolist()})
    api.post("/v1/datasets/digits/commit", json={})
    r = api.post("/v1/models", json={"name": "digits-exact", "dataset": "digits", "n_components": 24,
                                     "kernel": {"type": "gaussian", "sigma": 3.0}, "solver": "exact"})
    assert r.status_code == 202
    assert wait_for_fit(api, "digits-exact")["status"] == "completed"
    return "digits-exact"


@pytest.fixture(scope="module")
def scene():
    """A smooth 48 x 48 grey test image with edges (uint8)."""
    y, x = np.mgrid[0:48, 0:48] / 47.0
    image = 0.5 + 0.3 * np.sin(4 * x) * np.cos(3 * y)
    image[10:30, 12:20] = 0.9
    image[30:40, 25:45] = 0.15
    return np.clip(np.round(image * 255), 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def patch_model(api, scene):
    r = api.post("/v1/datasets/scene/from-image?patch=5&stride=1", content=png(scene),
                 headers={"Content-Type": "image/png"})
    assert r.status_code == 201, r.text
    meta = r.json()
    assert meta["status"] == "ready" and meta["n_features"] == 25 and meta["n_rows"] == 44 * 44
    r = api.post("/v1/models", json={"name": "scene-rbf", "dataset": "scene", "n_components": 12,
                                     "kernel": {"type": "gaussian", "sigma": 0.5}, "solver": "exact"})
    assert r.status_code == 202
    assert wait_for_fit(api, "scene-rbf")["status"] == "completed"
    return "scene-rbf"


def test_reconstruct_training_rows_and_denoise_held_out_digits(api, digits_model, digits, rng):
    clean = digits[:5]
    out = np.asarray(api.post(f"/v1/models/{digits_model}/reconstruct", json={"rows": clean.tolist()}).json()["rows"])
    assert out.shape == (5, 64)
    assert np.mean((out - clean) ** 2) < 0.25 * np.mean((clean - clean.mean()) ** 2)
    held_out = digits[1000:1030]
    noisy = held_out + rng.normal(scale=0.35, size=held_out.shape)
    denoised = np.asarray(api.post(f"/v1/models/{digits_model}/denoise", json={"rows": noisy.tolist()}).json()["rows"])
    assert np.mean((denoised - held_out) ** 2) < 0.7 * np.mean((noisy - held_out) ** 2)


@pytest.mark.parametrize("method", ["fixed-point", "kwok-tsang", "gradient", "learned"])
def test_every_method_returns_finite_rows(api, digits_model, digits, method):
    rows = np.vstack([digits[1100:1103], np.full((1, 64), 50.0)])  # last row far from all training data
    r = api.post(f"/v1/models/{digits_model}/denoise", json={"rows": rows.tolist(), "method": method})
    assert r.status_code == 200, r.text
    out = np.asarray(r.json()["rows"])
    assert out.shape == (4, 64) and np.all(np.isfinite(out))


def test_preimage_request_errors(api, digits_model):
    row = [[0.0] * 64]
    assert api.post(f"/v1/models/{digits_model}/denoise", json={"rows": row, "method": "magic"}).status_code == 422
    r = api.post(f"/v1/models/{digits_model}/denoise", json={"rows": row, "options": {"colour": 1}})
    assert r.status_code == 422 and r.json()["error"]["field"] == "options.colour"
    r = api.post(f"/v1/models/{digits_model}/reconstruct", json={"rows": [[0.0] * 3]})
    assert r.status_code == 422 and r.json()["error"]["field"] == "rows"
    assert api.post("/v1/models/nope/denoise", json={"rows": row}).status_code == 404


def test_denoise_image_round_trips_shape_and_dtype_and_improves_snr(api, patch_model, scene, rng):
    noisy = np.clip(scene + rng.normal(scale=20, size=scene.shape), 0, 255).astype(np.uint8)
    r = api.post(f"/v1/models/{patch_model}/denoise-image?stride=1", content=png(noisy),
                 headers={"Content-Type": "image/png"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "image/png"
    out = unpng(r.content)
    assert out.shape == scene.shape and out.dtype == np.uint8

    def snr(estimate):
        err = scene.astype(float) - estimate.astype(float)
        return 10 * np.log10(np.sum(scene.astype(float) ** 2) / np.sum(err**2))

    assert snr(out) > snr(noisy) + 2.0
    # the same PNG sent and asked for as octet-stream (as generated clients do): the same bytes back, so typed
    as_bytes = api.post(f"/v1/models/{patch_model}/denoise-image?stride=1", content=png(noisy),
                        headers={"Content-Type": "application/octet-stream", "Accept": "application/octet-stream"})
    assert as_bytes.status_code == 200 and as_bytes.headers["content-type"] == "application/octet-stream"
    assert as_bytes.content == r.content


def test_hyperresolution_doubles_the_shape(api, patch_model, scene):
    small = scene[::2, ::2]
    r = api.post(f"/v1/models/{patch_model}/denoise-image?stride=2&upscale=2", content=png(small),
                 headers={"Content-Type": "image/png"})
    assert r.status_code == 200, r.text
    assert unpng(r.content).shape == (2 * small.shape[0], 2 * small.shape[1])


def test_image_errors(api, patch_model, scene):
    colour = np.stack([scene] * 3, axis=-1)
    r = api.post(f"/v1/models/{patch_model}/denoise-image", content=png(colour), headers={"Content-Type": "image/png"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "image"
    r = api.post(f"/v1/models/{patch_model}/denoise-image", content=b"not a png", headers={"Content-Type": "image/png"})
    assert r.status_code == 400 and r.json()["error"]["field"] == "body"
    r = api.post(f"/v1/models/{patch_model}/denoise-image", content=png(scene), headers={"Content-Type": "image/jpeg"})
    assert r.status_code == 415
    r = api.post(f"/v1/models/{patch_model}/denoise-image", content=b"not a png",
                 headers={"Content-Type": "application/octet-stream"})  # a PNG's bytes as generated clients send them
    assert r.status_code == 400 and r.json()["error"]["field"] == "body"
    r = api.post(f"/v1/models/{patch_model}/denoise-image?stride=9", content=png(scene),
                 headers={"Content-Type": "image/png"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "stride"
    tiny = scene[:3, :3]
    r = api.post(f"/v1/models/{patch_model}/denoise-image", content=png(tiny), headers={"Content-Type": "image/png"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "image"
    r = api.post("/v1/datasets/too-big/from-image?patch=60", content=png(scene), headers={"Content-Type": "image/png"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "patch"


def test_transform_a_whole_data_set_in_chunked_tasks(api, digits_model, digits, data_dir):
    from store import DatasetStore

    r = api.post(f"/v1/models/{digits_model}/transform", json={"dataset": "digits", "output": "digits-z"})
    assert r.status_code == 201, r.text
    meta = r.json()
    assert meta["status"] == "ready" and meta["n_rows"] == N and meta["n_features"] == 24
    direct = np.asarray(api.post(f"/v1/models/{digits_model}/project",
                                 json={"rows": digits[:N].tolist()}).json()["components"])
    stored = np.asarray(DatasetStore(data_dir).open_array("digits-z")[:])
    np.testing.assert_allclose(stored, direct, rtol=1e-5, atol=1e-5 * np.abs(direct).max())
    clash = api.post(f"/v1/models/{digits_model}/transform", json={"dataset": "digits", "output": "digits-z"})
    assert_error(clash, 409, "conflict", "output")  # the output exists: not the model's ``name``
    wrong = api.post(f"/v1/models/{digits_model}/transform", json={"dataset": "nope", "output": "x"})
    assert_error(wrong, 404, "not_found", "dataset")


@pytest.fixture(scope="module")
def linear_model(api, digits_model):
    r = api.post("/v1/models", json={"name": "digits-linear", "dataset": "digits", "n_components": 8,
                                     "kernel": {"type": "linear"}, "solver": "exact"})
    assert r.status_code == 202, r.text
    assert wait_for_fit(api, "digits-linear")["status"] == "completed"
    return "digits-linear"


@pytest.mark.parametrize("method, options, field", [
    ("auto", {"restarts": 8}, "options.restarts"),  # auto is gradient on a linear kernel: no restarts
    ("fixed-point", {}, "method"),  # a radial kernel's method
    ("gradient", {"n_iter": 5}, "options.n_iter"),
])
def test_transform_and_denoise_share_one_validation(api, linear_model, digits, method, options, field):
    """Issue 30, item 6: /transform with operation denoise was a 500 where /denoise gave a 422; both now
    refuse the same request with the same 422, before any work, and the output is not created."""
    body = {"method": method, "options": options}
    direct = api.post(f"/v1/models/{linear_model}/denoise", json={"rows": digits[:2].tolist(), **body})
    assert_error(direct, 422, "invalid", field)
    whole = api.post(f"/v1/models/{linear_model}/transform",
                     json={"dataset": "digits", "output": "digits-lin-out", "operation": "denoise", **body})
    assert_error(whole, 422, "invalid", field)
    assert whole.json()["error"]["message"] == direct.json()["error"]["message"]
    assert api.get("/v1/datasets/digits-lin-out").status_code == 404


def test_transform_project_takes_no_preimage_options(api, linear_model):
    r = api.post(f"/v1/models/{linear_model}/transform",
                 json={"dataset": "digits", "output": "digits-lin-p", "options": {"restarts": 2}})
    assert_error(r, 422, "invalid", "options.restarts")
