"""Reading rows back over a real server (``GET .../chunks/{i}``, ``.../data.npy``) and the pages of
every list route (``limit``, ``cursor``, ``next_cursor``)."""

from __future__ import annotations

import io

import numpy as np
import pytest

from store import ClusteringRegistry, ModelRegistry
from store.jobs.records import ModelRecord
from tests.api_checks import assert_error, npy_bytes

OCTET = {"Accept": "application/octet-stream"}


def load(body: bytes) -> np.ndarray:
    return np.load(io.BytesIO(body), allow_pickle=False)


def upload(api, name: str, parts: list[np.ndarray], dtype: str, commit: bool = True) -> None:
    api.post("/v1/datasets", json={"name": name, "n_features": parts[0].shape[1], "dtype": dtype}).raise_for_status()
    for i, part in enumerate(parts):
        response = api.put(f"/v1/datasets/{name}/chunks/{i}", content=npy_bytes(part),
                           headers={"Content-Type": "application/octet-stream"})
        assert response.status_code == 200, response.text
    if commit:
        api.post(f"/v1/datasets/{name}/commit", json={}).raise_for_status()


@pytest.fixture(scope="module")
def uploaded(api) -> dict[str, list[np.ndarray]]:
    """Sets "f32" and "f64" of three chunks of 7, 5 and 9 rows (random, full precision), committed."""
    rng = np.random.default_rng(19)
    sets = {}
    for dtype in ("float32", "float64"):
        parts = [rng.standard_normal((n, 3)).astype(dtype) * 1e3 for n in (7, 5, 9)]
        upload(api, dtype.replace("float", "f"), parts, dtype)
        sets[dtype.replace("float", "f")] = parts
    return sets


@pytest.mark.parametrize("name", ["f32", "f64"])
def test_chunks_read_back_bit_for_bit_as_npy_and_json(api, uploaded, name):
    for i, part in enumerate(uploaded[name]):
        as_npy = api.get(f"/v1/datasets/{name}/chunks/{i}", headers=OCTET)
        assert as_npy.status_code == 200 and as_npy.headers["content-type"] == "application/octet-stream"
        rows = load(as_npy.content)
        assert rows.dtype == part.dtype and rows.tobytes() == part.tobytes()
        assert load(api.get(f"/v1/datasets/{name}/chunks/{i}", params={"format": "npy"}).content).tobytes() \
            == part.tobytes()
        body = api.get(f"/v1/datasets/{name}/chunks/{i}").json()
        assert (body["dataset"], body["version"], body["index"], body["n_rows"]) == (name, 1, i, len(part))
        assert np.array(body["rows"], dtype=part.dtype).tobytes() == part.tobytes()
        assert api.get(f"/v1/datasets/{name}/chunks/{i}", headers={"Accept": "application/json"}).json() == body


@pytest.mark.parametrize("name", ["f32", "f64"])
@pytest.mark.parametrize("route", ["data.npy", "download"])
def test_the_whole_version_downloads_as_one_npy(api, uploaded, name, route):
    response = api.get(f"/v1/datasets/{name}/{route}")
    assert response.status_code == 200, response.text
    assert int(response.headers["content-length"]) == len(response.content)
    whole = load(response.content)
    expected = np.concatenate(uploaded[name])
    assert whole.dtype == expected.dtype and whole.shape == expected.shape
    assert whole.tobytes() == expected.tobytes()


def test_a_version_argument_reads_that_version(api, rng):
    first, second = rng.standard_normal((4, 2)), rng.standard_normal((6, 2))
    upload(api, "grown", [first], "float64")
    api.put("/v1/datasets/grown/chunks/1", json={"rows": second.tolist()}).raise_for_status()
    # staged, not committed: refused on the index until committed
    assert_error(api.get("/v1/datasets/grown/chunks/1"), 409, "conflict", "index")
    api.post("/v1/datasets/grown/commit", json={}).raise_for_status()
    assert load(api.get("/v1/datasets/grown/data.npy", params={"version": 1}).content).tobytes() == first.tobytes()
    both = load(api.get("/v1/datasets/grown/data.npy").content)
    assert both.tobytes() == np.concatenate([first, second]).tobytes()
    assert load(api.get("/v1/datasets/grown/chunks/1", headers=OCTET).content).tobytes() == second.tobytes()
    assert_error(api.get("/v1/datasets/grown/chunks/1", params={"version": 1}), 404, "not_found", "index")
    assert api.get("/v1/datasets/grown/chunks/0", params={"version": 1}).json()["version"] == 1


def test_reading_errors_name_the_field(api, uploaded):
    assert_error(api.get("/v1/datasets/absent/chunks/0"), 404, "not_found", "name")
    assert_error(api.get("/v1/datasets/absent/data.npy"), 404, "not_found", "name")
    assert_error(api.get("/v1/datasets/f32/chunks/3"), 404, "not_found", "index")
    assert_error(api.get("/v1/datasets/f32/chunks/-1"), 422, "invalid", "index")
    assert_error(api.get("/v1/datasets/f32/chunks/0", params={"version": 9}), 404, "not_found", "version")
    assert_error(api.get("/v1/datasets/f32/data.npy", params={"version": 9}), 404, "not_found", "version")
    assert_error(api.get("/v1/datasets/f32/data.npy", params={"version": 0}), 422, "invalid", "version")
    assert_error(api.get("/v1/datasets/f32/chunks/0", params={"format": "csv"}), 422, "invalid", "format")
    upload(api, "unfinished", [np.ones((3, 2))], "float64", commit=False)
    assert_error(api.get("/v1/datasets/unfinished/chunks/0"), 409, "conflict", "name")
    assert_error(api.get("/v1/datasets/unfinished/download"), 409, "conflict", "name")


# ------------------------------------------------------------------- pages
def walk(api, route: str, key: str, **params) -> tuple[list[str], int]:
    """Names over every page of ``route`` and the number of pages."""
    names, cursor, pages = [], None, 0
    while True:
        response = api.get(route, params={**params, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200, response.text
        body = response.json()
        names += [entry["name"] for entry in body[key]]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            return names, pages


def model_record(name: str) -> ModelRecord:
    return ModelRecord.model_validate({
        "name": name, "dataset": "f64", "kernel": {"type": "linear"}, "n_components": 2, "solver": "kha",
        "params": {"passes": 3, "seed": 0}, "status": "completed"})


def test_every_list_walks_its_pages(api, uploaded, data_dir):
    for i in range(5):
        api.post("/v1/datasets", json={"name": f"page-{i}", "n_features": 2}).raise_for_status()
    every = [d["name"] for d in api.get("/v1/datasets", params={"limit": 1000}).json()["datasets"]]
    assert every == sorted(every) and len(every) >= 5
    names, pages = walk(api, "/v1/datasets", "datasets", limit=2)
    assert names == every and pages == (len(every) + 1) // 2

    models = ModelRegistry(data_dir)
    for i in range(5):
        models.create(model_record(f"model-{i}"))
    names, pages = walk(api, "/v1/models", "models", limit=2)
    assert [n for n in names if n.startswith("model-")] == [f"model-{i}" for i in range(5)]
    assert pages == (len(names) + 1) // 2
    names, _ = walk(api, "/v1/clusterings", "clusterings", limit=2)
    assert names == [r.name for r in ClusteringRegistry(data_dir).list()]


def test_model_entries_are_summaries_unless_full(api, uploaded, data_dir):
    ModelRegistry(data_dir).create(model_record("summarised"))
    entry = api.get("/v1/models", params={"cursor": "summarise", "limit": 1}).json()["models"][0]
    assert entry["name"] == "summarised" and "history" not in entry and "params" not in entry
    assert (entry["status"], entry["dataset"], entry["solver"], entry["n_components"]) == ("completed", "f64", "kha", 2)
    full = api.get("/v1/models", params={"cursor": "summarise", "limit": 1, "full": "true"}).json()["models"][0]
    assert full == api.get("/v1/models/summarised").json()


@pytest.mark.parametrize("route", ["/v1/datasets", "/v1/models", "/v1/clusterings"])
def test_bad_page_arguments_are_422_naming_the_field(api, route):
    for limit in (0, 1001, "many"):
        assert_error(api.get(route, params={"limit": limit}), 422, "invalid", "limit")
    for cursor in ("../etc", "a" * 65, "two..dots"):
        assert_error(api.get(route, params={"cursor": cursor}), 422, "invalid", "cursor")
