"""Every denoising route answers its defaults within the limits the service sets itself (issue 55; a real
server, a real cluster).

A tuned request (``tune=auto``, the default) was budgeted as the untuned default's fixed point of 3 restarts of
100 steps, 300 kernel passes a row, which the tuning never runs: a stored patch model's ``/denoise-image``
with nothing but ``stride`` was refused with a 413 (4.7e11 units of work against the limit of 1e11, for a
model of 3600 patches). It is now counted as the tuning runs it (`kpca.images.model_tuning.tuned_work`). Here
the limit is scaled down with the data (4e9 for a model of 1936 patches of 25 values: the old count of a
48 x 48 image at the default stride 2 was 7.7e9, the tuning's own is 1.7e9; of 400 rows for ``/denoise``
tuned, 5.8e9 and 1.3e9): each image route called with its defaults answers, so does a tuned ``/denoise``,
and a request whose tuning would be too large is still refused, naming the figures.
"""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from kpca.images.model_tuning import candidates_for, image_tuning_rows, tuned_work
from kpca.images.patches import extract_patches, patch_count
from service import Settings, create_app
from tests.api_checks import assert_error
from tests.service.serving_load import SETTINGS, served
from tests.service.test_api_denoise_tuned import PNG, fit_patch_model, png, scene, unpng
from tests.service.test_denoise_image_bounds import job_status

LIMIT = 4 * 10**9


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    settings = {**SETTINGS, "max_serving_work": LIMIT, "serving_deadline_s": 600.0}
    with served(create_app(Settings(data_dir=tmp_path_factory.mktemp("data"), **settings))) as url:
        with httpx.Client(base_url=url, timeout=600) as client:
            yield client


@pytest.fixture(scope="module")
def patch_model(api):
    return fit_patch_model(api, "scene", "scene")


def noisy(seed: int) -> np.ndarray:
    noise = np.random.default_rng(seed).normal(0.0, 0.08 * 255, (48, 48))
    return np.clip(np.round(scene(48, 2) + noise), 0, 255).astype(np.uint8)


def test_the_limit_here_refused_the_old_count_and_takes_the_tunings():
    """The figures the module docstring gives: the old count over the limit, the tuning's own under it."""
    points, features = 1936, 25
    for tuning, answered in ((image_tuning_rows(48, 48, 5, 2), patch_count(48, 48, 5, 2)), (400, 400)):
        assert answered * points * features * 3 * 100 > LIMIT  # restarts 3 x n_iter 100: what the routes counted
        assert tuned_work(candidates_for(12, "gaussian", {}), tuning, answered) * points * features <= LIMIT


def test_the_stored_models_denoise_image_answers_its_defaults(api, patch_model):
    r = api.post(f"/v1/models/{patch_model}/denoise-image", content=png(noisy(1)), headers=PNG)
    assert r.status_code == 200, r.text
    assert unpng(r.content).shape == (48, 48)


def test_the_stored_models_tuned_denoise_answers(api, patch_model):
    """``/denoise`` with ``tune=auto`` (its default is ``off``: the fixed point of 3 restarts of 100 steps, which
    it runs and is counted as)."""
    rows = extract_patches(noisy(2) / 255.0, 5, 2)[0][:400]  # 400 noisy patches, as the model's rows are
    r = api.post(f"/v1/models/{patch_model}/denoise", json={"rows": rows.tolist(), "tune": "auto"})
    assert r.status_code == 200, r.text
    assert np.asarray(r.json()["rows"]).shape == rows.shape


def test_the_one_call_route_answers_its_defaults(api):
    r = api.post("/v1/denoise-image", content=png(noisy(3)), headers=PNG)
    assert r.status_code == 200, r.text
    assert unpng(r.content).shape == (48, 48)


def test_a_tuning_too_large_for_the_limit_is_refused_naming_it_and_runs_in_the_background(api, patch_model):
    """Over the serving work limit the request is refused, naming it; as a background job (no serving deadline,
    counted against its key) the same request runs and answers (issue 55: the model route's defaults up to
    the pixel limit, as a job)."""
    big = np.tile(noisy(4), (4, 4))  # 192 x 192: the windows' tuning and 35,344 patches served
    url = f"/v1/models/{patch_model}/denoise-image?stride=1"
    message = assert_error(api.post(url, content=png(big), headers=PNG), 413, "too_large", "stride")["message"]
    assert "KPCA_MAX_SERVING_WORK" in message and "tune=off" in message and "background=true" in message
    started = api.post(url + "&background=true&job=big", content=png(big), headers=PNG)
    assert started.status_code == 202, started.text
    assert job_status(api, "big")["status"] == "completed"
    r = api.get("/v1/image-jobs/big/result")
    assert r.status_code == 200 and unpng(r.content).shape == (192, 192)
    assert api.delete("/v1/image-jobs/big").status_code == 204
