"""Every advice is tested by following it (issue 52): each 409 or 422 (and the 429) that tells the user what
to do is provoked here, and then exactly what it says is done, and succeeds. (The advice of damage: a
damaged checkpoint's resume, tests/service/test_api_damaged_models.py; a damaged data set, model,
clustering or image job record deleted, tests/service/test_damage_matrix.py; damaged rows uploaded again,
tests/service/test_api_integrity.py; a damaged staged chunk uploaded again, test_damage_matrix.py too.)"""

from __future__ import annotations

import io
import json
import re
import tarfile

import numpy as np
import pytest

from tests.api_checks import assert_error, fitted, upload_rows, wait_for_fit
from tests.damage import damage

SERVER_SETTINGS = {"max_fits_per_key": 2}
KERNEL = {"type": "gaussian", "sigma": 3.0}


@pytest.fixture(scope="module")
def rows() -> np.ndarray:
    return np.random.default_rng(5253).normal(size=(60, 4))


def model(name: str, dataset: str = "rows", solver: str = "exact", **params) -> dict:
    return {"name": name, "dataset": dataset, "n_components": 2, "solver": solver, "kernel": KERNEL,
            **({"params": params} if params else {})}


@pytest.fixture(scope="module")
def dataset(api, rows) -> str:
    upload_rows(api, "rows", rows, chunks=2)
    return "rows"


def test_a_fit_on_a_set_not_committed_advises_the_commit(api, rows):
    upload_rows(api, "uncommitted", rows, commit=False)
    message = assert_error(api.post("/v1/models", json=model("early", "uncommitted")), 409, "conflict",
                           "dataset")["message"]
    assert "POST /v1/datasets/uncommitted/commit" in message
    assert api.post("/v1/datasets/uncommitted/commit", json={}).status_code == 200
    fitted(api, model("early", "uncommitted"))


def test_reading_a_staged_chunk_advises_the_commit(api, rows):
    upload_rows(api, "staged", rows, commit=False)
    message = assert_error(api.get("/v1/datasets/staged/chunks/0"), 409, "conflict", "name")["message"]
    assert "POST /v1/datasets/staged/commit" in message
    api.post("/v1/datasets/staged/commit", json={}).raise_for_status()
    assert api.get("/v1/datasets/staged/chunks/0").status_code == 200


def test_a_committed_chunk_with_other_rows_advises_appending_from_the_next_index(api, dataset, rows):
    message = assert_error(api.put("/v1/datasets/rows/chunks/0", json={"rows": rows[:3].tolist()}), 409,
                           "conflict", "index")["message"]
    index = int(re.search(r"chunk index >= (\d+)", message).group(1))
    assert api.put(f"/v1/datasets/rows/chunks/{index}", json={"rows": rows[:3].tolist()}).status_code == 200
    message = assert_error(api.get(f"/v1/datasets/rows/chunks/{index}"), 409, "conflict", "index")["message"]
    assert "POST /v1/datasets/rows/commit" in message  # a staged chunk of a committed set: the same advice
    assert api.post("/v1/datasets/rows/commit", json={}).json()["version"] == 2
    assert api.get(f"/v1/datasets/rows/chunks/{index}").status_code == 200


def test_a_staged_chunk_with_other_rows_advises_deleting_the_set(api, rows):
    upload_rows(api, "immutable", rows[:10], commit=False)
    message = assert_error(api.put("/v1/datasets/immutable/chunks/0", json={"rows": rows[10:20].tolist()}), 409,
                           "conflict", "index")["message"]
    assert "the set is deleted" in message
    assert api.delete("/v1/datasets/immutable").status_code == 204
    upload_rows(api, "immutable", rows[10:20])


def test_deleting_a_set_in_use_advises_the_cascade(api, rows):
    upload_rows(api, "used", rows)
    fitted(api, model("user", "used"))
    message = assert_error(api.delete("/v1/datasets/used"), 409, "conflict", "name")["message"]
    assert "?cascade=true" in message
    assert api.delete("/v1/datasets/used?cascade=true").status_code == 204
    assert api.get("/v1/models/user").status_code == 404


def test_a_resume_of_a_completed_fit_advises_more_passes_and_its_example_works(api, dataset):
    fitted(api, model("iterated", solver="kha", passes=2, seed=0, init="random"))
    message = assert_error(api.post("/v1/models/iterated/resume", json={}), 409, "conflict", "passes")["message"]
    example = json.loads(re.search(r"e\.g\. (\{[^}]*\})", message).group(1))
    assert api.post("/v1/models/iterated/resume", json=example).status_code == 202
    assert wait_for_fit(api, "iterated")["progress"]["pass"] == example["passes"]
    message = assert_error(api.post("/v1/models/iterated/resume", json={"passes": example["passes"]}), 422,
                           "invalid", "passes")["message"]
    done = int(re.search(r"exceed the (\d+) passes", message).group(1))
    assert api.post("/v1/models/iterated/resume", json={"passes": done + 1}).status_code == 202
    assert wait_for_fit(api, "iterated")["progress"]["pass"] == done + 1


def test_a_resume_of_a_fit_made_in_one_go_advises_a_new_model(api, dataset):
    fitted(api, model("once"))
    message = assert_error(api.post("/v1/models/once/resume", json={}), 409, "conflict", "name")["message"]
    assert "fit a new model instead" in message
    fitted(api, model("once-again"))


def test_an_export_of_a_fit_not_completed_advises_its_resume(api, dataset):
    r = api.post("/v1/models", json=model("stopped", solver="kha", passes=400, seed=0))
    assert r.status_code == 202
    api.post("/v1/models/stopped/cancel", json={})
    assert wait_for_fit(api, "stopped")["status"] in ("cancelled", "completed")
    if api.get("/v1/models/stopped").json()["status"] == "cancelled":
        message = assert_error(api.get("/v1/models/stopped/export"), 409, "conflict", "name")["message"]
        assert "POST /v1/models/stopped/resume" in message
        done = (api.get("/v1/models/stopped").json().get("progress") or {}).get("pass", 0)  # one pass more, not 400
        assert api.post("/v1/models/stopped/resume", json={"passes": done + 1}).status_code == 202
        assert wait_for_fit(api, "stopped")["status"] == "completed"
    assert api.get("/v1/models/stopped/export").status_code == 200


def test_an_import_under_a_taken_name_advises_another_name(api, dataset):
    fitted(api, model("exported"))
    archive = api.get("/v1/models/exported/export").content
    headers = {"Content-Type": "application/x-tar"}
    message = assert_error(api.post("/v1/models/import", content=archive, headers=headers), 409, "conflict",
                           "name")["message"]
    assert "import under another name (name=...)" in message
    r = api.post("/v1/models/import?name=imported", content=archive, headers=headers)
    assert r.status_code == 201, r.text
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        assert "model.json" in tar.getnames()


def test_too_many_fits_advise_cancelling_one_and_retrying(api, dataset):
    for name in ("busy-1", "busy-2"):
        assert api.post("/v1/models", json=model(name, solver="kha", passes=400, seed=0)).status_code == 202
    message = assert_error(api.post("/v1/models", json=model("third")), 429, "too_many_fits", "name")["message"]
    assert "cancel one, and retry" in message
    api.post("/v1/models/busy-1/cancel", json={})
    wait_for_fit(api, "busy-1")
    assert api.post("/v1/models", json=model("third")).status_code == 202  # the retry is taken
    api.post("/v1/models/busy-2/cancel", json={})  # (the one worker's fit slot: "third" runs after it)
    wait_for_fit(api, "busy-2")
    assert wait_for_fit(api, "third")["status"] == "completed"


def test_a_damaged_record_advises_delete_and_create_again(api, data_dir, dataset):
    fitted(api, model("recreated"))
    damage(data_dir / "models" / "recreated" / "model.json", "truncated")
    message = assert_error(api.get("/v1/models/recreated"), 409, "corrupt", "name")["message"]
    assert "DELETE /v1/models/recreated" in message and "create it again" in message
    assert api.delete("/v1/models/recreated").status_code == 204
    fitted(api, model("recreated"))


def test_damaged_labels_advise_delete_and_create_again(api, data_dir, dataset):
    body = {"name": "grouped", "dataset": "rows", "n_clusters": 2, "solver": "exact", "kernel": KERNEL}
    fitted(api, body, "/v1/clusterings")
    damage(data_dir / "clusterings" / "grouped" / "labels.npy", "bit-flipped")
    message = assert_error(api.get("/v1/clusterings/grouped"), 409, "corrupt", "name")["message"]
    assert "DELETE /v1/clusterings/grouped" in message and "create it again" in message
    assert api.delete("/v1/clusterings/grouped").status_code == 204
    assert len(fitted(api, body, "/v1/clusterings")["labels"]) == api.get("/v1/datasets/rows").json()["n_rows"]
