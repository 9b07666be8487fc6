"""A damaged job record stays where it is (issue 52, item 1): one emptied or half-written ``model.json``
(or ``clustering.json``) made ``GET /v1/models``, every new fit, every data set delete and the resumes of
other models fail, and the watchdog throw every few seconds. Now the damaged job is listed as ``corrupt``
with the reason, reading it is a 409 ``corrupt`` naming its file, everything else works as before, the
watchdog logs it once, and ``DELETE`` removes it."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import numpy as np
import pytest

from tests.api_checks import assert_error, fitted, upload_rows, wait_for_fit
from tests.waiting import wait_until

ROWS, FEATURES = 40, 3
WATCHDOG_S = 0.2
SERVER_SETTINGS = {"watchdog_s": WATCHDOG_S}


@pytest.fixture(scope="module")
def train() -> np.ndarray:
    return np.random.default_rng(5252).normal(size=(ROWS, FEATURES))


@pytest.fixture(scope="module")
def dataset(api, train) -> str:
    upload_rows(api, "rows", train, chunks=2)
    return "rows"


def fit(api, name: str, dataset: str, solver: str = "exact", **params) -> dict:
    return fitted(api, {"name": name, "dataset": dataset, "n_components": 2, "solver": solver,
                        "kernel": {"type": "gaussian", "sigma": 2.0}, **({"params": params} if params else {})})


def damage(path: Path, how: str) -> None:
    if how == "emptied":
        path.write_bytes(b"")  # : > model.json
    else:  # half-written
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize("how", ["emptied", "half-written"])
def test_a_damaged_model_record_breaks_nothing_else_and_can_be_deleted(api, data_dir, dataset, train, how):
    victim, other = f"victim-{how}", f"other-{how}"
    assert fit(api, victim, dataset)["status"] == "completed"
    assert fit(api, other, dataset, solver="kha", passes=2, seed=0)["status"] == "completed"
    spare = f"spare-{how}"
    upload_rows(api, spare, train, chunks=1)
    damage(data_dir / "models" / victim / "model.json", how)

    error = assert_error(api.get(f"/v1/models/{victim}"), 409, "corrupt", "name")
    assert "model.json" in error["message"] and "DELETE" in error["message"]
    for full in ("false", "true"):
        listed = {m["name"]: m for m in api.get(f"/v1/models?full={full}").json()["models"]}
        assert listed[victim]["status"] == "corrupt"
        assert listed[victim]["error"]["code"] == "corrupt" and "model.json" in listed[victim]["error"]["message"]
        assert listed[other]["status"] == "completed"
    assert_error(api.post(f"/v1/models/{victim}/project", json={"rows": train[:2].tolist()}), 409, "corrupt",
                 "name")
    assert_error(api.post(f"/v1/models/{victim}/resume", json={}), 409, "corrupt", "name")

    # every other resource works as before
    assert fit(api, f"new-{how}", dataset)["status"] == "completed"
    r = api.post(f"/v1/models/{other}/resume", json={"passes": 3})
    assert r.status_code == 202, r.text
    assert wait_for_fit(api, other)["status"] == "completed"
    assert api.post(f"/v1/models/{other}/project", json={"rows": train[:2].tolist()}).status_code == 200
    assert api.delete(f"/v1/datasets/{spare}").status_code == 204
    upload_rows(api, spare, train, chunks=1)
    assert api.delete(f"/v1/datasets/{spare}?cascade=true").status_code == 204

    assert api.delete(f"/v1/models/{victim}").status_code == 204
    assert_error(api.get(f"/v1/models/{victim}"), 404, "not_found", "name")
    assert victim not in {m["name"] for m in api.get("/v1/models").json()["models"]}
    assert not (data_dir / "models" / victim).exists()


def test_a_damaged_clustering_record_is_listed_as_corrupt_and_can_be_deleted(api, data_dir, dataset):
    body = {"name": "grouped", "dataset": dataset, "n_clusters": 2, "solver": "exact",
            "kernel": {"type": "gaussian", "sigma": 2.0}}
    fitted(api, body, "/v1/clusterings")
    damage(data_dir / "clusterings" / "grouped" / "clustering.json", "emptied")
    error = assert_error(api.get("/v1/clusterings/grouped"), 409, "corrupt", "name")
    assert "clustering.json" in error["message"]
    listed = {c["name"]: c for c in api.get("/v1/clusterings").json()["clusterings"]}
    assert listed["grouped"]["status"] == "corrupt"
    fitted(api, {**body, "name": "grouped-2"}, "/v1/clusterings")
    assert api.delete("/v1/clusterings/grouped").status_code == 204
    assert_error(api.get("/v1/clusterings/grouped"), 404, "not_found", "name")


def test_the_watchdog_skips_a_damaged_record_and_logs_it_once(api, data_dir, dataset, caplog):
    assert fit(api, "watched", dataset)["status"] == "completed"
    caplog.set_level(logging.WARNING)
    damage(data_dir / "models" / "watched" / "model.json", "emptied")
    wait_until(lambda: any("models/watched/model.json" in r.getMessage() for r in caplog.records),
               what="the watchdog to read the damaged record", interval=WATCHDOG_S)
    time.sleep(20 * WATCHDOG_S)  # many more watchdog rounds (however many the machine runs, the verdict holds)
    noted = [r for r in caplog.records if "models/watched/model.json" in r.getMessage()]
    assert len(noted) == 1, [r.getMessage() for r in noted]
    assert not [r for r in caplog.records if "watchdog failed" in r.getMessage()]
    assert api.delete("/v1/models/watched").status_code == 204


@pytest.mark.parametrize("edit", [{"n_rows": ROWS - 7}, {"n_features": FEATURES + 1}], ids=["n_rows", "n_features"])
def test_an_edited_meta_json_is_corrupt_when_opened_not_served_as_ready(api, data_dir, train, edit):
    """Issue 52, item 4: an edit of meta.json that keeps it valid JSON (its mtime put back) was served as
    ready with the edited values until a chunk was read, and /project then gave a misleading 422."""
    name = f"edited-{next(iter(edit))}".replace("_", "-")
    upload_rows(api, name, train, chunks=2)
    assert fit(api, f"on-{name}", name)["status"] == "completed"
    path = data_dir / "datasets" / name / "meta.json"
    info = path.stat()
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, **edit}, indent=1, sort_keys=True))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))

    error = assert_error(api.get(f"/v1/datasets/{name}"), 409, "corrupt", "name")
    assert "meta.json" in error["message"] and "digest" in error["message"]
    listed = {d["name"]: d for d in api.get("/v1/datasets").json()["datasets"]}
    assert listed[name]["status"] == "corrupt" and listed["rows"]["status"] == "ready"
    r = api.post(f"/v1/models/on-{name}/project", json={"rows": train[:2].tolist()})
    assert r.status_code == 409 and r.json()["error"]["code"] == "corrupt", r.text
    assert api.delete(f"/v1/datasets/{name}?cascade=true").status_code == 204
    assert_error(api.get(f"/v1/models/on-{name}"), 404, "not_found", "name")
