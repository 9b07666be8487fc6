"""``POST /v1/datasets`` with ``{"source": {"zarr": ...}}`` over a real server: register without copying."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.api_checks import assert_error, error_message
from tests.store_checks import snapshot, version_checksum


def arrays_dir(data_dir: Path) -> Path:
    """The one local folder this module's server may register arrays from (next to its data folder)."""
    return data_dir.parent / f"{data_dir.name}-arrays"


def SERVER_SETTINGS(data_dir: Path) -> dict:  # noqa: N802 - the conftest's hook name
    arrays_dir(data_dir).mkdir(exist_ok=True)
    return {"register_prefixes": [str(arrays_dir(data_dir)), "memory://allowed/"]}


def make_zarr(location: str, values: np.ndarray, chunks) -> str:
    array = zarr.create_array(store=location, shape=values.shape, dtype=values.dtype, chunks=chunks)
    array[...] = values
    return location


def register(api, name: str, location: str, **extra):
    return api.post("/v1/datasets", json={"name": name, "source": {"zarr": location}, **extra})


@pytest.fixture
def allowed(data_dir) -> Path:
    """A fresh folder below the allowed prefix."""
    folder = arrays_dir(data_dir) / uuid.uuid4().hex[:8]
    folder.mkdir()
    return folder


def test_register_local_zarr_is_201_and_writes_nothing_there(api, allowed, rng):
    values = rng.standard_normal((25, 3)).astype(np.float32)
    location = make_zarr(str(allowed / "x.zarr"), values, chunks=(10, 3))
    before = snapshot(allowed)
    response = register(api, "ext", location)
    assert response.status_code == 201, response.text
    assert response.headers["location"] == "/v1/datasets/ext"
    meta = response.json()
    assert (meta["status"], meta["version"], meta["n_rows"], meta["n_features"]) == ("ready", 1, 25, 3)
    assert (meta["dtype"], meta["source_dtype"]) == ("float32", "float32")
    assert meta["source"] == {"zarr": os.path.realpath(location)}
    assert meta["checksum"] == version_checksum(values[:10], values[10:20], values[20:])
    assert meta["chunks"] == [0, 1, 2] and meta["zarr_chunk_rows"] == 10
    assert api.get("/v1/datasets/ext").json() == meta
    # read-only: no uploads, commit is a no-op
    response = api.put("/v1/datasets/ext/chunks/3", json={"rows": [[1.0, 2.0, 3.0]]})
    assert "read-only" in error_message(response, 409, "conflict", "name")
    assert api.post("/v1/datasets/ext/commit", json={}).json() == meta
    # delete removes our record, never the array
    assert api.delete("/v1/datasets/ext").status_code == 204
    assert api.get("/v1/datasets/ext").status_code == 404
    assert snapshot(allowed) == before
    np.testing.assert_array_equal(zarr.open_array(location, mode="r")[:], values)


def test_register_integer_array_with_dtype(api, allowed):
    values = np.arange(30, dtype=np.int32).reshape(10, 3)
    location = make_zarr(str(allowed / "ints.zarr"), values, chunks=(4, 3))
    meta = register(api, "ints", location).json()
    assert (meta["dtype"], meta["source_dtype"]) == ("float64", "int32")
    as_f64 = values.astype(np.float64)
    assert meta["checksum"] == version_checksum(as_f64[:4], as_f64[4:8], as_f64[8:])
    meta = register(api, "ints32", location, dtype="float32").json()
    assert (meta["dtype"], meta["n_rows"]) == ("float32", 10)


def test_register_a_url_below_an_allowed_url_prefix(api, rng):
    values = rng.standard_normal((6, 2))
    location = make_zarr(f"memory://allowed/{uuid.uuid4().hex[:8]}.zarr", values, chunks=(4, 2))
    response = register(api, "remote", location)
    assert response.status_code == 201, response.text
    assert response.json()["source"] == {"zarr": location}
    assert response.json()["checksum"] == version_checksum(values[:4], values[4:])


def test_source_outside_the_prefixes_is_403(api, tmp_path, allowed, rng):
    outside = make_zarr(str(tmp_path / "outside.zarr"), rng.standard_normal((4, 2)), chunks=(2, 2))
    message = error_message(register(api, "outside", outside), 403, "forbidden", "source")
    assert "KPCA_REGISTER_PREFIXES" in message and "register_prefixes" in message
    # a symbolic link inside the allowed folder that leads outside it is judged by its target
    os.symlink(outside, allowed / "link.zarr")
    os.symlink("/proc/self/cwd", allowed / "proc.zarr")
    escaping = str(allowed / ".." / ".." / tmp_path.name / "outside.zarr")  # '..' cannot climb out
    sibling = str(allowed.parent) + "-sibling/x.zarr"  # sharing the prefix's spelling is not below it
    refused = [outside, str(tmp_path / "missing.zarr"), str(allowed / "link.zarr"), str(allowed / "proc.zarr"),
               "/proc/self/root/etc", "/proc/self/cwd", escaping, sibling,
               "s3://bucket/x.zarr", "memory://other/x.zarr", "memory://allowed-not/x.zarr"]
    for location in refused:
        # one answer for all: whether the path exists, what it resolves to, where a link leads: none of it
        assert error_message(register(api, "outside", location), 403, "forbidden", "source") == message, location
    for revealing in (str(tmp_path), "outside.zarr", "/proc", os.getcwd(), "exist"):
        assert revealing not in message
    assert_error(register(api, "outside", "memory://allowed/../other/x.zarr"), 422, "invalid", "source")
    assert api.get("/v1/datasets/outside").status_code == 404


def test_unusable_sources_are_422_on_source(api, allowed, rng):
    make_zarr(str(allowed / "flat.zarr"), np.arange(8.0), chunks=(4,))
    make_zarr(str(allowed / "nan.zarr"), np.array([[1.0, 2.0], [np.nan, 0.0], [3.0, 4.0]]), chunks=(2, 2))
    zarr.open_group(str(allowed / "group.zarr"), mode="w")
    cases = {
        str(allowed / "missing.zarr"): "cannot open a zarr array",
        str(allowed / "group.zarr"): "cannot open a zarr array",
        str(allowed / "flat.zarr"): "must be 2-D",
        str(allowed / "nan.zarr"): "row 1 contains NaN or inf",
        "relative/path.zarr": "absolute",
        "x.zarr": "absolute",
        "memory://allowed/nothing-here.zarr": "cannot open a zarr array",
    }
    before = snapshot(allowed)
    for location, fragment in cases.items():
        message = error_message(register(api, "unusable", location), 422, "invalid", "source")
        assert fragment in message, (location, message)
    assert snapshot(allowed) == before
    assert not (allowed / "missing.zarr").exists()
    assert api.get("/v1/datasets/unusable").status_code == 404


@pytest.mark.parametrize(
    "body, field",
    [
        ({"name": "both", "n_features": 3, "source": {"zarr": "/x.zarr"}}, "n_features"),
        ({"name": "neither"}, "n_features"),
        ({"name": "empty", "source": {"zarr": ""}}, "source.zarr"),
        ({"name": "shape", "source": "/x.zarr"}, "source"),
        ({"name": "extra", "source": {"zarr": "/x.zarr", "mode": "w"}}, "source.mode"),
        ({"name": "dtype", "source": {"zarr": "/x.zarr"}, "dtype": "int8"}, "dtype"),
    ],
)
def test_malformed_register_bodies_are_422(api, body, field):
    assert_error(api.post("/v1/datasets", json=body), 422, "invalid", field)


def test_register_name_clash_is_409(api, allowed, rng):
    location = make_zarr(str(allowed / "x.zarr"), rng.standard_normal((4, 2)), chunks=(2, 2))
    api.post("/v1/datasets", json={"name": "taken", "n_features": 2}).raise_for_status()
    assert_error(register(api, "taken", location), 409, "conflict", "name")
    assert api.get("/v1/datasets/taken").json()["status"] == "open"
