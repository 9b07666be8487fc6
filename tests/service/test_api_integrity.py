"""Damaged stored data through HTTP: a flipped byte in a committed chunk is a 409 ``corrupt`` on every
route that reads it (never a 500 or a silent wrong answer), a failed fit says ``corrupt``, a failed
``/transform`` leaves no output, ``/verify`` finds it, and re-uploading the chunk repairs it; a damaged
staged file spoils neither the list nor other sets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.api_checks import assert_error, upload_rows, wait_for_fit

ROWS, FEATURES = 200, 8


def flip_bytes(path: Path) -> None:
    """Flip 8 bytes in the middle of a stored (zstd) chunk file, in place, as a failing disk would."""
    data = bytearray(path.read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 8):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def train(rng_module) -> np.ndarray:
    return rng_module.normal(size=(ROWS, FEATURES))


@pytest.fixture(scope="module")
def rng_module() -> np.random.Generator:
    return np.random.default_rng(1818)


@pytest.fixture(scope="module")
def model(api, train) -> str:
    upload_rows(api, "train", train, chunks=2)
    upload_rows(api, "other", train[:50] + 0.5)
    r = api.post("/v1/models", json={"name": "m", "dataset": "train", "n_components": 4, "solver": "exact",
                                     "kernel": {"type": "gaussian", "sigma": 3.0}})
    assert r.status_code == 202, r.text
    assert wait_for_fit(api, "m")["status"] == "completed"
    return "m"


def test_a_flipped_byte_is_refused_everywhere_until_the_chunk_is_uploaded_again(api, model, train, data_dir):
    before = api.post(f"/v1/models/{model}/project", json={"rows": train[:3].tolist()})
    assert before.status_code == 200
    assert api.get("/v1/datasets/train/verify").json() == {
        "ok": True, "version": 1, "chunks_checked": 2, "corrupt_chunks": []}

    flip_bytes(data_dir / "datasets" / "train" / "segments" / "0001.zarr" / "c" / "0" / "0")

    # a fit that meets the damaged chunk fails with code corrupt, naming the set and what to do
    r = api.post("/v1/models", json={"name": "m2", "dataset": "train", "n_components": 4, "solver": "exact",
                                     "kernel": {"type": "gaussian", "sigma": 3.0}})
    assert r.status_code == 202, r.text
    failed = wait_for_fit(api, "m2")
    assert failed["status"] == "failed" and failed["error"]["code"] == "corrupt", failed
    assert "'train'" in failed["error"]["message"] and "upload" in failed["error"]["message"]

    meta = api.get("/v1/datasets/train").json()
    assert meta["status"] == "corrupt" and meta["corrupt_chunks"], meta

    # serving a model that needs the training rows: 409 corrupt, not 500 and not a wrong answer
    message = assert_error(api.post(f"/v1/models/{model}/project", json={"rows": train[:3].tolist()}),
                           409, "corrupt", "dataset")["message"]
    assert "train" in message and "chunk" in message
    # a new model on the marked set is refused at creation
    assert_error(api.post("/v1/models", json={"name": "m3", "dataset": "train", "n_components": 4,
                                              "solver": "exact", "kernel": {"type": "gaussian", "sigma": 3.0}}),
                 409, "corrupt", "dataset")
    # transform of a clean set through the model: its tasks fail, the output is removed
    assert_error(api.post(f"/v1/models/{model}/transform", json={"dataset": "other", "output": "other-z"}),
                 409, "corrupt", "dataset")
    assert api.get("/v1/datasets/other-z").status_code == 404
    # transform of the damaged set itself
    assert_error(api.post(f"/v1/models/{model}/transform", json={"dataset": "train", "output": "train-z"}),
                 409, "corrupt", "dataset")
    assert api.get("/v1/datasets/train-z").status_code == 404

    report = api.get("/v1/datasets/train/verify").json()
    assert report["ok"] is False and report["version"] == 1 and report["chunks_checked"] == 2
    assert report["corrupt_chunks"] and set(report["corrupt_chunks"]) <= {0, 1}

    # repair: the original rows of the damaged chunks uploaded again, then commit
    halves = np.array_split(train, 2)
    for index in report["corrupt_chunks"]:
        r = api.put(f"/v1/datasets/train/chunks/{index}", json={"rows": halves[index].tolist()})
        assert r.status_code == 200, r.text
    repaired = api.post("/v1/datasets/train/commit", json={}).json()
    assert (repaired["status"], repaired["corrupt_chunks"], repaired["version"]) == ("ready", [], 1)
    assert api.get("/v1/datasets/train/verify").json()["ok"] is True
    after = api.post(f"/v1/models/{model}/project", json={"rows": train[:3].tolist()})
    assert after.status_code == 200
    np.testing.assert_allclose(after.json()["components"], before.json()["components"])


def test_verify_of_an_unknown_set_or_version(api, model):
    assert_error(api.get("/v1/datasets/nope/verify"), 404, "not_found", "name")
    assert_error(api.get("/v1/datasets/other/verify?version=7"), 404, "not_found", "version")
    api.post("/v1/datasets", json={"name": "empty", "n_features": 2})
    assert_error(api.get("/v1/datasets/empty/verify"), 409, "conflict", "name")


@pytest.mark.parametrize("damage", ["header", "truncated"])
def test_a_damaged_staged_file_spoils_only_its_own_set(api, model, data_dir, damage):
    name = f"staged-{damage}"
    upload_rows(api, name, np.ones((20, 3)), chunks=2, commit=False)
    path = data_dir / "datasets" / name / "staging" / "000001.npy"
    body = path.read_bytes()
    path.write_bytes(b"\x93NUMPY\x01\x00garbage!" + body[16:] if damage == "header" else body[:-13])

    listed = api.get("/v1/datasets")
    assert listed.status_code == 200
    sets = {m["name"]: m for m in listed.json()["datasets"]}
    assert sets["train"]["status"] in ("ready", "corrupt") and sets["other"]["status"] == "ready"
    assert (sets[name]["status"], sets[name]["damaged_staged"]) == ("corrupt", [1])

    message = assert_error(api.post(f"/v1/datasets/{name}/commit", json={}), 422, "invalid", "chunks")["message"]
    assert "staged chunk 1" in message and "upload chunk 1 again" in message
    r = api.put(f"/v1/datasets/{name}/chunks/1", json={"rows": np.ones((10, 3)).tolist()})
    assert r.status_code == 200, r.text
    committed = api.post(f"/v1/datasets/{name}/commit", json={}).json()
    assert (committed["status"], committed["n_rows"]) == ("ready", 20)


def test_a_transform_whose_tasks_meet_a_damaged_chunk_leaves_no_output(api, model, data_dir):
    flip_bytes(data_dir / "datasets" / "other" / "segments" / "0001.zarr" / "c" / "0" / "0")
    assert api.get("/v1/datasets/other").json()["status"] == "ready"  # not yet known: the tasks find it
    assert_error(api.post(f"/v1/models/{model}/transform", json={"dataset": "other", "output": "other-t"}),
                 409, "corrupt", "dataset")
    assert api.get("/v1/datasets/other-t").status_code == 404
    assert "other-t" not in {m["name"] for m in api.get("/v1/datasets").json()["datasets"]}
    assert api.get("/v1/datasets/other").json()["status"] == "corrupt"


def test_a_data_set_whose_meta_json_is_damaged_is_listed_as_corrupt_and_can_be_deleted(api, data_dir):
    upload_rows(api, "unreadable", np.ones((6, 3)))
    path = data_dir / "datasets" / "unreadable" / "meta.json"
    path.write_text(path.read_text()[:-30])
    listed = {m["name"]: m for m in api.get("/v1/datasets").json()["datasets"]}
    entry = listed["unreadable"]
    assert (entry["status"], entry["n_features"], entry["dtype"], entry["n_rows"]) == ("corrupt", 0, "unknown", 0)
    assert entry["error"] == ("its metadata cannot be read (not JSON, truncated or altered: JSONDecodeError); "
                              "delete the data set")
    assert set(entry) == set(listed["other"]) and listed["other"]["error"] is None
    assert api.delete("/v1/datasets/unreadable").status_code == 204
    assert "unreadable" not in {m["name"] for m in api.get("/v1/datasets").json()["datasets"]}
    assert_error(api.delete("/v1/datasets/unreadable"), 404, "not_found", "name")
