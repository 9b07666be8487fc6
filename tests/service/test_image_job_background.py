"""``POST /v1/denoise-image?background=true&job=NAME`` (issue 55: large images as jobs): a 202 at once, the
job's progress with the time its step has left, its PNG kept for ``GET /v1/image-jobs/{job}/result``, the
same PNG the request would have answered; counted as a fit of its key while it runs, cancelled on request.
And ``kpca denoise-fit``, which runs such a job and shows its progress. Real server, cluster and data folder."""

from __future__ import annotations

import json
import re

import numpy as np

from store.image_jobs import ImageJobStore
from tests.api_checks import assert_error, upload_rows, wait_for_fit
from tests.service.test_api_denoise_tuned import PNG, fit_patch_model, noisy_of, png, scene, unpng
from tests.service.test_denoise_image_bounds import BIG, job_status, running
from tests.store_checks import aged_image_job

SERVER_SETTINGS = {"serving_deadline_s": 3600.0, "max_fits_per_key": 1}
SMALL = png(noisy_of(scene(40, 2), 0.1, 5))
FAST = "&tune=off&sigma=0.5&n_components=4&method=fixed-point"  # one candidate: seconds, not tuning


def test_a_background_job_keeps_the_png_its_request_would_have_answered(api):
    direct = api.post(f"/v1/denoise-image?second_stage=wiener{FAST}", content=SMALL, headers=PNG)
    assert direct.status_code == 200, direct.text
    started = api.post(f"/v1/denoise-image?second_stage=wiener{FAST}&job=bg&background=true", content=SMALL,
                       headers=PNG)
    assert started.status_code == 202, started.text
    assert started.headers["location"] == "/v1/image-jobs/bg"
    assert started.json()["background"] is True and started.json()["status"] == "running"
    record = job_status(api, "bg")
    assert record["status"] == "completed" and record["step_left_s"] is None, record
    assert [s["step"] for s in record["steps"]] == ["noise", "denoising", "second stage"]
    kept = api.get("/v1/image-jobs/bg/result")
    assert kept.status_code == 200 and kept.headers["content-type"] == "image/png"
    np.testing.assert_array_equal(unpng(kept.content), unpng(direct.content))
    chosen, want = json.loads(kept.headers["x-kpca-chosen"]), json.loads(direct.headers["x-kpca-chosen"])
    assert chosen == want and chosen["second_stage"] == "wiener"
    assert "denoising;dur=" in kept.headers["server-timing"]
    assert api.delete("/v1/image-jobs/bg").status_code == 204
    assert_error(api.get("/v1/image-jobs/bg/result"), 404, "not_found", "job")


def test_a_running_job_has_no_result_yet_counts_against_its_key_and_cancels(api):
    started = api.post("/v1/denoise-image?job=long&background=true", content=BIG, headers=PNG)
    assert started.status_code == 202, started.text
    running(api, "long")
    early = api.get("/v1/image-jobs/long/result")
    assert_error(early, 409, "conflict", "job")
    assert early.headers["retry-after"] == "2" and "still running" in early.json()["error"]["message"]
    upload_rows(api, "rows", np.random.default_rng(8).normal(size=(30, 3)))
    model = {"name": "m", "dataset": "rows", "n_components": 2, "solver": "exact",
             "kernel": {"type": "gaussian", "sigma": 2.0}}
    assert_error(api.post("/v1/models", json=model), 429, "too_many_fits", "name")
    again = api.post("/v1/denoise-image?job=long&background=true", content=SMALL, headers=PNG)
    assert again.status_code in (409, 429), again.text  # its name is taken and its key is at its limit
    assert api.post("/v1/image-jobs/long/cancel", json={}).status_code == 202
    assert job_status(api, "long")["status"] == "cancelled"
    ended = api.get("/v1/image-jobs/long/result")
    assert_error(ended, 409, "conflict", "job")
    assert "cancelled" in ended.json()["error"]["message"]
    assert api.post("/v1/models", json=model).status_code == 202  # the key's fit is free again
    assert wait_for_fit(api, "m")["status"] == "completed"


def test_a_request_that_answers_itself_keeps_no_result(api):
    r = api.post(f"/v1/denoise-image?job=inline{FAST}", content=SMALL, headers=PNG)
    assert r.status_code == 200, r.text
    assert_error(api.get("/v1/image-jobs/inline/result"), 404, "not_found", "job")


def test_background_needs_a_job_and_takes_neither_keep_nor_compare(api):
    assert_error(api.post("/v1/denoise-image?background=true", content=SMALL, headers=PNG), 422, "invalid", "job")
    assert_error(api.post("/v1/denoise-image?background=true&job=j&keep=k", content=SMALL, headers=PNG), 422,
                 "invalid", "keep")
    assert_error(api.post("/v1/denoise-image?background=true&job=j&compare=true", content=SMALL, headers=PNG),
                 422, "invalid", "compare")
    assert_error(api.post("/v1/denoise-image?background=true&job=j&sigma=1&method=linear", content=SMALL,
                          headers=PNG), 422, "invalid", "sigma")
    assert_error(api.get("/v1/image-jobs/nothing/result"), 404, "not_found", "job")


def test_the_command_line_runs_a_background_job_and_shows_its_progress(kpca, api, tmp_path):
    image, out = tmp_path / "noisy.png", tmp_path / "clean.png"
    image.write_bytes(SMALL)
    direct = api.post("/v1/denoise-image", content=SMALL, headers=PNG)
    assert direct.status_code == 200, direct.text
    result = kpca("denoise-fit", str(image), "-o", str(out), "--job", "from-cli")
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(unpng(out.read_bytes()), unpng(direct.content))
    lines = result.stderr.strip().splitlines()  # one line per poll: step, units, seconds, time left
    assert lines and re.fullmatch(r"completed, \d+\.\d s", lines[-1]), lines
    assert result.stdout.startswith(f"wrote {out} in ") and "second_stage" in result.stdout
    assert_error(api.get("/v1/image-jobs/from-cli"), 404, "not_found", "job")  # its record deleted after


def test_a_stored_models_route_runs_in_the_background_too(api):
    """``POST /v1/models/{name}/denoise-image?background=true&job=NAME``: the same 202, progress and kept PNG,
    equal to the request's own answer with the route's defaults."""
    model = fit_patch_model(api, "bg-scene", "bg-rbf")
    direct = api.post(f"/v1/models/{model}/denoise-image", content=SMALL, headers=PNG)
    assert direct.status_code == 200, direct.text
    started = api.post(f"/v1/models/{model}/denoise-image?job=through-model&background=true", content=SMALL,
                       headers=PNG)
    assert started.status_code == 202 and started.json()["kind"] == "denoise-image", started.text
    record = job_status(api, "through-model")
    assert record["status"] == "completed" and record["background"], record
    kept = api.get("/v1/image-jobs/through-model/result")
    assert kept.status_code == 200
    np.testing.assert_array_equal(unpng(kept.content), unpng(direct.content))
    assert json.loads(kept.headers["x-kpca-chosen"]) == json.loads(direct.headers["x-kpca-chosen"])
    assert_error(api.post(f"/v1/models/{model}/denoise-image?background=true", content=SMALL, headers=PNG), 422,
                 "invalid", "job")
    assert_error(api.post(f"/v1/models/{model}/denoise-image?background=true&job=j&compare=true", content=SMALL,
                          headers=PNG), 422, "invalid", "compare")


def test_a_job_that_ended_a_day_ago_is_removed_as_the_next_one_starts(api, data_dir):
    """``KPCA_IMAGE_JOB_KEEP_S`` (a day by default): a background job that ended longer ago than that, its answer
    never fetched nor deleted, is removed when the next background job starts, not before."""
    assert api.post(f"/v1/denoise-image?job=stale&background=true{FAST}", content=SMALL, headers=PNG).status_code == 202
    assert job_status(api, "stale")["status"] == "completed"
    aged_image_job(ImageJobStore(data_dir), "stale", 2 * 86_400)
    assert api.get("/v1/image-jobs/stale/result").status_code == 200  # kept until a job starts
    assert api.post(f"/v1/denoise-image?job=next&background=true{FAST}", content=SMALL, headers=PNG).status_code == 202
    assert_error(api.get("/v1/image-jobs/stale"), 404, "not_found", "job")
    assert job_status(api, "next")["status"] == "completed"
    assert api.get("/v1/image-jobs/next/result").status_code == 200  # the one that ended now stays
    assert api.delete("/v1/image-jobs/next").status_code == 204
