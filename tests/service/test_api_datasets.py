"""``/v1/datasets`` over a real server: CRUD, chunk uploads in both encodings, commit, every 4xx."""

from __future__ import annotations

import io

import numpy as np
import pytest

from tests.api_checks import assert_error, npy_bytes

MAX_BODY_BYTES = 64 * 1024
MAX_IMPORT_BYTES = 2 * MAX_BODY_BYTES
SERVER_SETTINGS = {"max_body_bytes": MAX_BODY_BYTES, "max_import_bytes": MAX_IMPORT_BYTES}

NPY = {"Content-Type": "application/octet-stream"}


def create(api, name: str, n_features: int = 4, dtype: str = "float32"):
    response = api.post("/v1/datasets", json={"name": name, "n_features": n_features, "dtype": dtype})
    assert response.status_code == 201, response.text
    return response


# ------------------------------------------------------------------ CRUD


def test_create_get_list_delete(api):
    response = create(api, "crud", n_features=3)
    assert response.headers["location"] == "/v1/datasets/crud"
    created = response.json()
    assert created["name"] == "crud"
    assert created["n_features"] == 3
    assert created["dtype"] == "float32"
    assert created["status"] == "open"
    assert created["n_rows"] == 0
    assert created["chunks"] == []

    assert api.get("/v1/datasets/crud").json() == created
    names = [d["name"] for d in api.get("/v1/datasets").json()["datasets"]]
    assert "crud" in names

    assert api.delete("/v1/datasets/crud").status_code == 204
    assert_error(api.get("/v1/datasets/crud"), 404, "not_found", "name")
    names = [d["name"] for d in api.get("/v1/datasets").json()["datasets"]]
    assert "crud" not in names


def test_unknown_dataset_is_404(api):
    assert_error(api.get("/v1/datasets/nope"), 404, "not_found", "name")
    assert_error(api.delete("/v1/datasets/nope"), 404, "not_found", "name")
    assert_error(api.post("/v1/datasets/nope/commit", json={}), 404, "not_found", "name")
    response = api.put("/v1/datasets/nope/chunks/0", content=npy_bytes(np.ones((2, 4))), headers=NPY)
    assert_error(response, 404, "not_found", "name")


def test_name_clash_is_409(api):
    create(api, "clash")
    response = api.post("/v1/datasets", json={"name": "clash", "n_features": 4})
    assert_error(response, 409, "conflict", "name")


@pytest.mark.parametrize("name", ["", "-lead", "has space", "a/b", "x" * 65, "dot..dot", "é"])
def test_bad_name_is_422(api, name):
    response = api.post("/v1/datasets", json={"name": name, "n_features": 4})
    assert_error(response, 422, "invalid", "name")


@pytest.mark.parametrize(
    "body, field",
    [
        ({"name": "bad", "n_features": 0}, "n_features"),
        ({"name": "bad", "n_features": "four"}, "n_features"),
        ({"name": "bad", "n_features": 4, "dtype": "int8"}, "dtype"),
        ({"name": "bad"}, "n_features"),
        ({"name": "bad", "n_features": 4, "colour": "red"}, "colour"),
    ],
)
def test_bad_create_body_is_422(api, body, field):
    assert_error(api.post("/v1/datasets", json=body), 422, "invalid", field)


def test_unparseable_json_body_is_400(api):
    response = api.post("/v1/datasets", content=b"{not json", headers={"Content-Type": "application/json"})
    assert_error(response, 400, "bad_request", "body")


def test_path_name_is_validated(api):
    assert_error(api.get("/v1/datasets/..hidden"), 422, "invalid", "name")


# ---------------------------------------------------------------- uploads


def test_upload_npy_and_json_then_commit(api, rng):
    create(api, "mixed", n_features=4, dtype="float64")
    floats = rng.standard_normal((5, 4))
    ints = rng.integers(-100, 100, size=(3, 4)).astype(np.int32)
    json_rows = rng.standard_normal((2, 4)).round(6).tolist()

    response = api.put("/v1/datasets/mixed/chunks/0", content=npy_bytes(floats), headers=NPY)
    assert response.status_code == 200, response.text
    assert response.json()["chunks"] == [0]
    response = api.put("/v1/datasets/mixed/chunks/1", content=npy_bytes(ints), headers=NPY)
    assert response.status_code == 200, response.text
    response = api.put("/v1/datasets/mixed/chunks/2", json={"rows": json_rows})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["chunks"] == [0, 1, 2]
    assert body["n_rows"] == 10
    assert body["status"] == "open"

    # idempotent by index
    again = api.put("/v1/datasets/mixed/chunks/0", content=npy_bytes(floats), headers=NPY)
    assert again.status_code == 200, again.text
    assert again.json()["n_rows"] == 10

    committed = api.post("/v1/datasets/mixed/commit", json={})
    assert committed.status_code == 200, committed.text
    ready = committed.json()
    assert ready["status"] == "ready"
    assert ready["n_rows"] == 10
    assert ready["checksum"]
    assert api.get("/v1/datasets/mixed").json()["status"] == "ready"

    # a committed chunk cannot change; a new index is staged for version 2
    changed = api.put("/v1/datasets/mixed/chunks/2", json={"rows": [[9.0] * 4] * 2})
    assert "committed version 1" in assert_error(changed, 409, "conflict", "index")["message"]
    late = api.put("/v1/datasets/mixed/chunks/3", json={"rows": json_rows})
    assert late.status_code == 200, late.text
    assert (late.json()["version"], late.json()["staged"], late.json()["n_rows"]) == (1, [3], 10)


def test_same_index_different_rows_is_409(api, rng):
    create(api, "immutable")
    api.put("/v1/datasets/immutable/chunks/0", json={"rows": [[1, 2, 3, 4]]}).raise_for_status()
    response = api.put("/v1/datasets/immutable/chunks/0", json={"rows": [[4, 3, 2, 1]]})
    assert_error(response, 409, "conflict", "index")


def test_commit_with_missing_index_names_it(api, rng):
    create(api, "gappy")
    for index in (0, 1, 3):
        api.put(f"/v1/datasets/gappy/chunks/{index}", json={"rows": [[index, 0, 0, 1]]}).raise_for_status()
    error = assert_error(api.post("/v1/datasets/gappy/commit", json={}), 422, "invalid", "chunks")
    assert "2" in error["message"]
    assert api.get("/v1/datasets/gappy").json()["status"] == "open"


def test_commit_with_no_chunks_is_422(api):
    create(api, "nochunks")
    assert_error(api.post("/v1/datasets/nochunks/commit", json={}), 422, "invalid", "chunks")


def test_wrong_columns_is_422_on_rows(api, rng):
    create(api, "columns")
    response = api.put("/v1/datasets/columns/chunks/0", content=npy_bytes(rng.standard_normal((3, 5))), headers=NPY)
    error = assert_error(response, 422, "invalid", "rows")
    assert "4" in error["message"]
    response = api.put("/v1/datasets/columns/chunks/0", json={"rows": [[1.0, 2.0]]})
    assert_error(response, 422, "invalid", "rows")
    response = api.put("/v1/datasets/columns/chunks/0", content=npy_bytes(np.ones((2, 2, 4))), headers=NPY)
    assert_error(response, 422, "invalid", "rows")


def test_nan_row_is_reported(api, rng):
    create(api, "nans")
    rows = rng.standard_normal((6, 4))
    rows[4, 2] = np.nan
    response = api.put("/v1/datasets/nans/chunks/0", content=npy_bytes(rows), headers=NPY)
    error = assert_error(response, 422, "invalid", "rows")
    assert "row 4" in error["message"]

    rows[4, 2] = 0.0
    rows[2, 0] = np.inf
    response = api.put("/v1/datasets/nans/chunks/0", content=npy_bytes(rows), headers=NPY)
    assert "row 2" in assert_error(response, 422, "invalid", "rows")["message"]
    assert api.get("/v1/datasets/nans").json()["chunks"] == []


def test_nan_in_json_rows_is_refused(api):
    create(api, "jsonnan")
    body = b'{"rows": [[1, 2, 3, 4], [1, NaN, 3, 4]]}'
    response = api.put("/v1/datasets/jsonnan/chunks/0", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code in (400, 422), response.text
    assert response.json()["error"]["field"] in ("rows", "body")


def test_empty_chunk_is_422(api):
    create(api, "empty")
    response = api.put("/v1/datasets/empty/chunks/0", json={"rows": []})
    assert "empty" in assert_error(response, 422, "invalid", "rows")["message"]
    response = api.put("/v1/datasets/empty/chunks/0", content=npy_bytes(np.empty((0, 4))), headers=NPY)
    assert_error(response, 422, "invalid", "rows")


@pytest.mark.parametrize(
    "body",
    [
        {"rows": [[1, 2, 3, 4], [1, 2, 3]]},
        {"rows": [[1, 2, 3, "four"]]},
        {"rows": [[1, 2, 3, True]]},
        {"rows": [1, 2, 3, 4]},
        {"rows": "1,2,3,4"},
        {"values": [[1, 2, 3, 4]]},
        [[1, 2, 3, 4]],
    ],
)
def test_malformed_json_rows_are_422_on_rows(api, body):
    name = "ragged"
    if api.get(f"/v1/datasets/{name}").status_code == 404:
        create(api, name)
    assert_error(api.put(f"/v1/datasets/{name}/chunks/0", json=body), 422, "invalid", "rows")


@pytest.mark.parametrize(
    "content",
    [b"", b"not an npy file", npy_bytes(np.ones((2, 4)))[:-8], npy_bytes(np.ones((2, 4))) + b"tail"],
)
def test_unparseable_npy_is_400(api, content):
    name = "garbage"
    if api.get(f"/v1/datasets/{name}").status_code == 404:
        create(api, name)
    response = api.put(f"/v1/datasets/{name}/chunks/0", content=content, headers=NPY)
    assert_error(response, 400, "bad_request", "body")


def test_forged_npy_header_is_400(api):
    create(api, "forged")
    buffer = io.BytesIO()  # a valid header declaring 10**12 rows, followed by one row
    np.lib.format.write_array_header_1_0(buffer, {"descr": "<f8", "fortran_order": False, "shape": (10**12, 4)})
    forged = buffer.getvalue() + np.ones(4).tobytes()
    response = api.put("/v1/datasets/forged/chunks/0", content=forged, headers=NPY)
    assert_error(response, 400, "bad_request", "body")


def test_non_numeric_npy_is_422(api):
    create(api, "strings")
    response = api.put("/v1/datasets/strings/chunks/0", content=npy_bytes(np.array([["a"] * 4])), headers=NPY)
    assert_error(response, 422, "invalid", "rows")


def test_pickled_npy_is_refused(api):
    create(api, "pickles")
    buffer = io.BytesIO()
    np.save(buffer, np.array([[object()] * 4], dtype=object), allow_pickle=True)
    response = api.put("/v1/datasets/pickles/chunks/0", content=buffer.getvalue(), headers=NPY)
    assert response.status_code in (400, 422), response.text


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_wrong_content_type_is_415(api, content_type):
    name = "mediatype"
    if api.get(f"/v1/datasets/{name}").status_code == 404:
        create(api, name)
    headers = {"Content-Type": content_type} if content_type else {}
    response = api.put(f"/v1/datasets/{name}/chunks/0", content=b"1,2,3,4\n", headers=headers)
    assert_error(response, 415, "unsupported_media_type", "content-type")


def test_negative_index_is_422(api):
    create(api, "negative")
    response = api.put("/v1/datasets/negative/chunks/-1", json={"rows": [[1, 2, 3, 4]]})
    assert_error(response, 422, "invalid", "index")


# ------------------------------------------------------------- body limit


@pytest.mark.parametrize("size", [MAX_BODY_BYTES + 1, 64 * MAX_BODY_BYTES])
def test_body_over_limit_is_413_by_content_length(api, size):
    if api.get("/v1/datasets/huge").status_code == 404:
        create(api, "huge")
    response = api.put("/v1/datasets/huge/chunks/0", content=b"\0" * size, headers=NPY)
    assert_error(response, 413, "too_large", "body")
    assert api.get("/v1/datasets/huge").json()["chunks"] == []


@pytest.mark.parametrize("size", [MAX_BODY_BYTES + 1, 64 * MAX_BODY_BYTES])
def test_body_over_limit_is_413_without_content_length(api, size):
    if api.get("/v1/datasets/huge").status_code == 404:
        create(api, "huge")

    def stream():  # a generator body is sent chunked, with no Content-Length
        for _ in range(8):
            yield b"\0" * (size // 8 + 1)

    response = api.put("/v1/datasets/huge/chunks/0", content=stream(), headers=NPY)
    assert_error(response, 413, "too_large", "body")
    assert api.get("/v1/datasets/huge").json()["chunks"] == []
    assert api.get("/healthz").status_code == 200  # the connection is still usable


def test_a_model_archive_has_its_own_limit_above_the_body_limit(api):
    """The import streams its archive to disk: a body over max_body_bytes reaches the archive checks (a 422 for
    these zero bytes), one over max_import_bytes is a 413 naming KPCA_MAX_IMPORT_BYTES, on either header."""
    tar = {"Content-Type": "application/x-tar"}
    inside = api.post("/v1/models/import", content=bytes(MAX_BODY_BYTES + 512), headers=tar)
    assert_error(inside, 422, "invalid", "body")
    over = api.post("/v1/models/import", content=bytes(MAX_IMPORT_BYTES + 1), headers=tar)
    assert_error(over, 413, "too_large", "body")
    assert "KPCA_MAX_IMPORT_BYTES" in over.json()["error"]["message"]
    streamed = api.post("/v1/models/import", content=iter([bytes(MAX_BODY_BYTES)] * 3), headers=tar)
    assert_error(streamed, 413, "too_large", "body")
    elsewhere = api.put("/v1/datasets/x/chunks/0", content=bytes(MAX_BODY_BYTES + 512), headers=NPY)
    assert "KPCA_MAX_BODY_BYTES" in elsewhere.json()["error"]["message"]


def test_json_body_over_limit_is_413(api):
    rows = [[0.123456789] * 4] * 3000  # ~ 90 kB of JSON
    assert_error(api.post("/v1/datasets", json={"name": "x", "n_features": 4, "rows": rows}), 413, "too_large", "body")


def test_body_at_limit_is_accepted(api, rng):
    create(api, "atlimit", n_features=8, dtype="float64")
    header_size = len(npy_bytes(np.ones((1, 8)))) - 8 * 8
    n_rows = (MAX_BODY_BYTES - header_size) // 64
    payload = npy_bytes(rng.standard_normal((n_rows, 8)))
    assert len(payload) <= MAX_BODY_BYTES
    response = api.put("/v1/datasets/atlimit/chunks/0", content=payload, headers=NPY)
    assert response.status_code == 200, response.text
    assert response.json()["n_rows"] == n_rows


def test_streamed_json_body_over_limit_is_413(api):
    def stream():
        yield b'{"name": "streamed", "n_features": 4, "padding": "'
        for _ in range(5):
            yield b"x" * (MAX_BODY_BYTES // 4)
        yield b'"}'

    response = api.post("/v1/datasets", content=stream(), headers={"Content-Type": "application/json"})
    assert_error(response, 413, "too_large", "body")
    assert api.get("/v1/datasets/streamed").status_code == 404


def test_json_route_with_non_json_content_type_is_415(api):
    response = api.post("/v1/datasets", content=b'{"name": "plain", "n_features": 4}', headers={"Content-Type": "text/plain"})
    assert_error(response, 415, "unsupported_media_type", "content-type")
