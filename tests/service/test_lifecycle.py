"""Lifecycle safety over a real server: uploads under an existing name, deleting a data set in use,
registration closed by default, kernel parameters checked on the data's scale, and errors that name
the right field. The module's server has default settings (no register prefixes)."""

from __future__ import annotations

import re

import httpx
import numpy as np
import pytest

from client import UploadError, upload_array
from store import ModelRegistry
from store.names import validate_name
from store.jobs.records import ModelRecord
from tests.api_checks import assert_error, error_message, upload_rows, wait_for_fit
from tests.store_checks import version_checksum

# ----------------------------------------------------------------- client uploads


def test_other_rows_under_an_existing_name_are_refused_and_the_set_kept(api, rng):
    X = rng.normal(size=(300, 4)).astype(np.float32)
    before = upload_array(api, "kept", X, chunk_rows=128, progress=False)
    assert (before["version"], before["n_rows"]) == (1, 300)
    for other in (X + 1, X[:200], np.vstack([X, X[:5]])):  # other values, fewer rows, more rows
        with pytest.raises(UploadError, match="append=True") as refused:
            upload_array(api, "kept", other, chunk_rows=128, progress=False)
        assert "another name" in str(refused.value)
    after = api.get("/v1/datasets/kept").json()
    assert (after["version"], after["n_rows"], after["checksum"], after["staged"]) == (1, 300, before["checksum"], [])


def test_the_same_rows_again_with_any_chunking_are_a_no_op(api, rng):
    X = rng.normal(size=(1000, 3))
    first = upload_array(api, "again", X, dtype="float64", chunk_rows=128, progress=False)
    assert first["checksum"] == version_checksum(*np.array_split(X, range(128, 1000, 128)))
    for rows in (128, 100, 130, None):  # the duplicate-version bug: chunks 8, 9 were appended
        meta = upload_array(api, "again", X, dtype="float64", chunk_rows=rows, progress=False)
        assert (meta["status"], meta["version"], meta["n_rows"], meta["checksum"]) == \
            ("ready", 1, 1000, first["checksum"]), rows
    assert api.get("/v1/datasets/again").json()["versions"] == first["versions"]


def test_append_adds_the_rows_as_the_next_version(api, rng):
    X, Y = rng.normal(size=(250, 2)), rng.normal(size=(90, 2))
    upload_array(api, "grown", X, dtype="float64", chunk_rows=100, progress=False)
    meta = upload_array(api, "grown", Y, dtype="float64", chunk_rows=50, append=True, progress=False)
    assert (meta["version"], meta["n_rows"], meta["chunks"]) == (2, 340, list(range(5)))
    assert meta["checksum"] == version_checksum(X[:100], X[100:200], X[200:], Y[:50], Y[50:])
    # both versions again, cut another way: recognised version by version, nothing appended
    same = upload_array(api, "grown", np.vstack([X, Y]), dtype="float64", chunk_rows=64, progress=False)
    assert (same["version"], same["n_rows"], same["checksum"]) == (2, 340, meta["checksum"])
    with pytest.raises(UploadError, match="append=True"):
        upload_array(api, "grown", X, dtype="float64", progress=False)  # only version 1's rows: not the set


# ----------------------------------------------------------------- deleting a data set in use


def stored_model(registry, name: str, dataset: str, solver: str = "kha", status: str = "completed") -> None:
    """A model record as a worker would have left it."""
    registry.create(ModelRecord.model_validate({
        "name": name, "dataset": dataset, "kernel": {"type": "linear"}, "n_components": 2, "solver": solver,
        "params": {"passes": 1, "seed": 0}, "status": status}))


def test_deleting_a_data_set_that_models_use_is_409_naming_them(api, data_dir, rng):
    upload_rows(api, "used", rng.normal(size=(30, 3)))
    registry = ModelRegistry(data_dir)
    for i in range(12):
        stored_model(registry, f"user-{i:02d}", "used")
    response = api.delete("/v1/datasets/used")
    message = error_message(response, 409, "conflict", "name")
    named = re.findall(r"model '(user-\d\d)'", message)
    assert named == [f"user-{i:02d}" for i in range(10)] and "2 more" in message and "cascade=true" in message
    assert api.get("/v1/datasets/used").status_code == 200 and api.get("/v1/models/user-11").status_code == 200
    assert api.delete("/v1/datasets/used", params={"cascade": "true"}).status_code == 204
    assert api.get("/v1/datasets/used").status_code == 404
    assert all(api.get(f"/v1/models/user-{i:02d}").status_code == 404 for i in range(12))


def test_cascade_stops_a_running_fit_and_a_clustering(api, rng):
    upload_rows(api, "busy", rng.normal(size=(400, 3)))
    model = {"name": "busy-m", "dataset": "busy", "kernel": {"type": "gaussian", "sigma": 1.0}, "n_components": 2,
             "solver": "kha", "params": {"passes": 500, "seed": 0}}
    assert api.post("/v1/models", json=model).status_code == 202
    clustering = {"name": "busy-c", "dataset": "busy", "n_clusters": 2}
    assert api.post("/v1/clusterings", json=clustering).status_code == 202
    message = error_message(api.delete("/v1/datasets/busy"), 409, "conflict", "name")
    assert "model 'busy-m'" in message and "clustering 'busy-c'" in message
    assert api.delete("/v1/datasets/busy?cascade=true").status_code == 204
    for route in ("/v1/models/busy-m", "/v1/clusterings/busy-c", "/v1/datasets/busy"):
        assert_error(api.get(route), 404, "not_found", "name")


def test_unused_data_set_and_unknown_one(api, rng):
    upload_rows(api, "free", rng.normal(size=(5, 2)))
    assert api.delete("/v1/datasets/free").status_code == 204
    assert_error(api.delete("/v1/datasets/free?cascade=true"), 404, "not_found", "name")
    assert_error(api.delete("/v1/datasets/free?cascade=maybe"), 422, "invalid", "cascade")


# ----------------------------------------------------------------- registration closed by default


def test_registration_is_disabled_without_prefixes(api, tmp_path):
    import zarr

    existing = zarr.create_array(str(tmp_path / "x.zarr"), shape=(4, 2), dtype="float64", chunks=(2, 2))
    existing[:] = 1.0
    messages = set()
    for location in (str(tmp_path / "x.zarr"), str(tmp_path / "missing.zarr"), "/proc/self/cwd", "relative.zarr",
                     "s3://bucket/x.zarr"):
        response = api.post("/v1/datasets", json={"name": "reg", "source": {"zarr": location}})
        messages.add(error_message(response, 403, "forbidden", "source"))
    (message,) = messages  # one answer, whatever the location
    assert "disabled" in message and "KPCA_REGISTER_PREFIXES" in message and str(tmp_path) not in message
    assert api.get("/v1/datasets/reg").status_code == 404


# ----------------------------------------------------------------- kernel parameters on the data's scale


@pytest.fixture(scope="module")
def scaled(api):
    """A ready set of 200 rows of norm about 4."""
    upload_rows(api, "scaled", np.random.default_rng(3).normal(size=(200, 16)))
    return "scaled"


def model_on(dataset: str, name: str, kernel: dict) -> dict:
    return {"name": name, "dataset": dataset, "kernel": kernel, "n_components": 2, "solver": "kha",
            "params": {"passes": 1, "seed": 0}}


@pytest.mark.parametrize("kernel, field, words", [
    ({"type": "polynomial", "gamma": 1e300, "degree": 64}, "kernel.gamma", "too large"),
    ({"type": "polynomial", "gamma": 1.0, "degree": 64, "offset": 1e10}, "kernel.gamma", "too large"),
    ({"type": "polynomial", "gamma": 1e-300, "degree": 64, "offset": 0.0}, "kernel.gamma", "too small"),
    ({"type": "tanh", "gamma": 1e308}, "kernel.gamma", "too large"),
    ({"type": "gaussian", "sigma": 5e-324}, "kernel.sigma", "too small"),
    ({"type": "gaussian", "sigma": 1e-200}, "kernel.sigma", "too small"),
    ({"type": "laplacian", "sigma": 1e200}, "kernel.sigma", "too large"),
])
def test_kernel_that_overflows_on_the_data_is_422_at_creation(api, scaled, kernel, field, words):
    message = error_message(api.post("/v1/models", json=model_on(scaled, "overflow", kernel)), 422, "invalid", field)
    assert words in message
    assert api.get("/v1/models/overflow").status_code == 404  # nothing accepted, no fit to fail later


def test_the_limit_follows_the_kernel_precision(api, scaled):
    """(gamma 16 + 1)^32 ~ 2e39: beyond float32 but well inside float64."""
    body = model_on(scaled, "precision", {"type": "polynomial", "gamma": 1.0, "degree": 32})
    refused = {**body, "params": {"passes": 1, "seed": 0, "kernel_precision": "float32"}}
    assert "float32" in error_message(api.post("/v1/models", json=refused), 422, "invalid", "kernel.gamma")
    assert api.post("/v1/models", json=body).status_code == 202
    assert api.delete("/v1/models/precision").status_code == 204


def test_a_polynomial_kernel_that_fits_the_scale_is_accepted_and_fits(api, scaled):
    body = model_on(scaled, "poly-ok", {"type": "polynomial", "gamma": 1.0 / 16, "degree": 8})
    assert api.post("/v1/models", json=body).status_code == 202
    assert wait_for_fit(api, "poly-ok")["status"] == "completed"


# ----------------------------------------------------------------- the field named, the schema, 405s


def test_errors_name_the_field_at_fault(api, scaled):
    body = model_on("a..b", "m-dots", {"type": "linear"})
    assert_error(api.post("/v1/models", json=body), 422, "invalid", "dataset")
    assert_error(api.post("/v1/models", json={**body, "dataset": scaled, "name": "a..b"}), 422, "invalid", "name")
    assert_error(api.post("/v1/clusterings", json={"name": "c", "dataset": "a..b", "n_clusters": 2}),
                 422, "invalid", "dataset")
    for raw in (b'{"name": "\xff\xfe"}', b"\xff"):
        response = api.post("/v1/datasets", content=raw, headers={"Content-Type": "application/json"})
        assert_error(response, 400, "bad_request", "body")


def test_405_lists_every_method_of_the_path(api):
    cases = {("PUT", "/v1/datasets/x"): "DELETE, GET", ("POST", "/v1/models/x"): "DELETE, GET",
             ("DELETE", "/v1/datasets"): "GET, POST", ("GET", "/v1/models/x/cancel"): "POST",
             ("PATCH", "/v1/datasets/x/chunks/0"): "GET, PUT"}  # GET reads a chunk back, PUT uploads it
    for (method, path), allow in cases.items():
        response = api.request(method, path)
        assert_error(response, 405, "method_not_allowed", None)
        assert response.headers["allow"] == allow, (method, path)


def test_openapi_names_match_the_servers_rule(api):
    schema = api.get("/openapi.json").json()
    for spec in (schema["components"]["schemas"]["ModelCreate"]["properties"]["dataset"],
                 next(p for p in schema["paths"]["/v1/datasets/{name}"]["get"]["parameters"])["schema"]):
        pattern, longest = re.compile(spec["pattern"]), spec["maxLength"]
        for name in ("a", "digits", "a.b", "a.", "a_-.x", "9" * 64, "a..b", "a...", ".a", "-a", "a/b", "a b", "é",
                     "a" * 65, "x.._", "a.-.b"):
            try:
                allowed = validate_name(name) == name
            except Exception:
                allowed = False
            assert (bool(pattern.search(name)) and len(name) <= longest) == allowed, name
    for path, method in (("/v1/models", "post"), ("/v1/datasets/{name}/chunks/{index}", "put"),
                         ("/v1/models/{name}/cancel", "post"), ("/v1/datasets", "post")):
        assert {"400", "415"} <= set(schema["paths"][path][method]["responses"]), (path, method)
    assert "415" not in schema["paths"]["/v1/models"]["get"]["responses"]  # a GET reads no body


def test_client_refuses_before_sending_anything(server, rng):
    """The refusal comes from GETs (the metadata, then the first stored chunk, which already differs);
    a client whose PUTs would fail proves none was sent."""
    sent = []
    with httpx.Client(base_url=server, event_hooks={"request": [lambda r: sent.append(r.method)]}) as client:
        upload_array(client, "quiet", rng.normal(size=(20, 2)), progress=False)
        sent.clear()
        with pytest.raises(UploadError):
            upload_array(client, "quiet", rng.normal(size=(20, 2)), progress=False)
    assert sent == ["POST", "GET", "GET"]
