"""Damaged data sets through a real server (issue 30, items 4, 5 and 10): a stored chunk changed after it
was once verified (mtime restored with ``os.utime``), a segment's ``zarr.json`` that reads the same bytes
as another dtype, a deleted segment digest document, an emptied ``meta.json`` and a registered array
swapped through a symlink are each a 409 ``corrupt`` (or ``conflict`` on ``source``) on every read path,
never a 500 and never the wrong rows; a set with damaged metadata is listed as corrupt and can be deleted."""

from __future__ import annotations

import io
import json
import os
import uuid
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.api_checks import assert_error, upload_rows, wait_for_fit

ROWS, FEATURES = 120, 5


def arrays_dir(data_dir: Path) -> Path:
    return data_dir.parent / f"{data_dir.name}-arrays"


def SERVER_SETTINGS(data_dir: Path) -> dict:  # noqa: N802 - the conftest's hook name
    arrays_dir(data_dir).mkdir(exist_ok=True)
    return {"register_prefixes": [str(arrays_dir(data_dir))]}


@pytest.fixture(scope="module")
def train() -> np.ndarray:
    return np.random.default_rng(3030).normal(size=(ROWS, FEATURES))


def segment(data_dir: Path, name: str) -> Path:
    return data_dir / "datasets" / name / "segments" / "0001.zarr"


def flip_restoring_mtime(path: Path) -> None:
    """Flip 8 bytes in the middle of ``path`` and put its access and modification times back."""
    info = os.stat(path)
    data = bytearray(path.read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 8):
        data[i] ^= 0xFF
    with open(path, "r+b") as handle:  # in place: same inode, same size
        handle.write(bytes(data))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert os.stat(path).st_mtime_ns == info.st_mtime_ns


def npy(response) -> np.ndarray:
    assert response.status_code == 200, response.text
    return np.load(io.BytesIO(response.content), allow_pickle=False)


def refused_everywhere(api, name: str, code: str = "corrupt", field: str = "dataset") -> None:
    for path in (f"/v1/datasets/{name}/chunks/0?format=npy", f"/v1/datasets/{name}/chunks/1?format=npy",
                 f"/v1/datasets/{name}/data.npy"):
        assert_error(api.get(path), 409, code, field)


def fit_exact(api, name: str, dataset: str) -> None:
    """A completed exact model ``name`` (3 components, Gaussian sigma 3) on ``dataset``."""
    r = api.post("/v1/models", json={"name": name, "dataset": dataset, "n_components": 3, "solver": "exact",
                                     "kernel": {"type": "gaussian", "sigma": 3.0}})
    assert r.status_code == 202, r.text
    assert wait_for_fit(api, name)["status"] == "completed"


def test_a_flipped_byte_with_its_mtime_restored_after_a_verified_read_is_refused(api, data_dir, train):
    upload_rows(api, "touched", train, chunks=2)
    np.testing.assert_array_equal(npy(api.get("/v1/datasets/touched/data.npy")), train)  # verified once
    np.testing.assert_array_equal(npy(api.get("/v1/datasets/touched/chunks/1?format=npy")), train[60:])
    flip_restoring_mtime(segment(data_dir, "touched") / "c" / "0" / "0")
    refused_everywhere(api, "touched")
    assert api.get("/v1/datasets/touched").json()["status"] == "corrupt"


def test_a_segment_read_as_another_dtype_is_refused_on_reads_and_serving(api, data_dir, train):
    upload_rows(api, "retyped", train, chunks=2)
    fit_exact(api, "on-retyped", "retyped")
    assert api.post("/v1/models/on-retyped/project", json={"rows": train[:2].tolist()}).status_code == 200
    meta_path = segment(data_dir, "retyped") / "zarr.json"
    doc = json.loads(meta_path.read_text())
    assert doc["data_type"] == "float64"
    meta_path.write_text(json.dumps({**doc, "data_type": "int64"}))
    refused_everywhere(api, "retyped")
    assert_error(api.post("/v1/models/on-retyped/project", json={"rows": train[:2].tolist()}), 409, "corrupt",
                 "dataset")


def test_a_deleted_segment_digest_document_is_corrupt_and_the_set_can_be_deleted(api, data_dir, train):
    upload_rows(api, "undigested", train, chunks=2)
    fit_exact(api, "on-undigested", "undigested")
    (data_dir / "datasets" / "undigested" / "segments" / "0001.json").unlink()
    refused_everywhere(api, "undigested")
    assert_error(api.get("/v1/models/on-undigested/export"), 409, "corrupt", "dataset")
    listed = {m["name"]: m for m in api.get("/v1/datasets").json()["datasets"]}
    assert listed["undigested"]["status"] == "corrupt"
    assert api.delete("/v1/datasets/undigested?cascade=true").status_code == 204
    assert_error(api.get("/v1/datasets/undigested"), 404, "not_found", "name")


def test_an_emptied_meta_json_is_corrupt_on_every_route_and_the_set_can_be_deleted(api, data_dir, train):
    upload_rows(api, "emptied", train, chunks=2)
    r = api.post("/v1/models", json={"name": "on-emptied", "dataset": "emptied", "n_components": 3,
                                     "solver": "exact", "kernel": {"type": "gaussian", "sigma": 3.0}})
    assert r.status_code == 202, r.text
    assert wait_for_fit(api, "on-emptied")["status"] == "completed"
    (data_dir / "datasets" / "emptied" / "meta.json").write_bytes(b"")
    message = assert_error(api.get("/v1/datasets/emptied"), 409, "corrupt", "name")["message"]
    assert "emptied" in message and "delete" in message
    refused_everywhere(api, "emptied", field="name")
    assert_error(api.post("/v1/models", json={"name": "on-emptied-2", "dataset": "emptied", "n_components": 3,
                                              "solver": "exact", "kernel": {"type": "gaussian", "sigma": 3.0}}),
                 409, "corrupt", "dataset")
    response = api.post("/v1/models/on-emptied/project", json={"rows": train[:2].tolist()})
    assert response.status_code == 409 and response.json()["error"]["code"] == "corrupt", response.text
    listed = {m["name"]: m for m in api.get("/v1/datasets").json()["datasets"]}
    assert listed["emptied"]["status"] == "corrupt"
    assert api.delete("/v1/datasets/emptied?cascade=true").status_code == 204
    assert "emptied" not in {m["name"] for m in api.get("/v1/datasets").json()["datasets"]}


def test_a_registered_array_swapped_through_a_symlink_is_not_served(api, data_dir, tmp_path, train):
    allowed = arrays_dir(data_dir) / uuid.uuid4().hex[:8]
    allowed.mkdir()
    real = allowed / "real.zarr"
    array = zarr.create_array(store=str(real), shape=train.shape, dtype="float64", chunks=(40, FEATURES))
    array[...] = train
    r = api.post("/v1/datasets", json={"name": "linked", "source": {"zarr": str(real)}})
    assert r.status_code == 201, r.text
    np.testing.assert_array_equal(npy(api.get("/v1/datasets/linked/data.npy")), train)
    outside = tmp_path / "outside.zarr"  # same shape and dtype, other rows, outside the allowed prefix
    other = zarr.create_array(store=str(outside), shape=train.shape, dtype="float64", chunks=(40, FEATURES))
    other[...] = train + 1.0
    moved = allowed / "moved.zarr"
    os.rename(real, moved)
    os.symlink(outside, real)
    for path in ("/v1/datasets/linked/chunks/0?format=npy", "/v1/datasets/linked/data.npy"):
        response = api.get(path)
        assert response.status_code == 409, response.text
        assert response.json()["error"]["code"] in ("corrupt", "conflict")
        assert response.json()["error"]["field"] in ("source", "dataset")


def test_a_registered_array_changed_in_place_is_corrupt(api, data_dir, train):
    allowed = arrays_dir(data_dir) / uuid.uuid4().hex[:8]
    allowed.mkdir()
    location = allowed / "inplace.zarr"
    array = zarr.create_array(store=str(location), shape=train.shape, dtype="float64", chunks=(40, FEATURES))
    array[...] = train
    assert api.post("/v1/datasets", json={"name": "inplace", "source": {"zarr": str(location)}}).status_code == 201
    np.testing.assert_array_equal(npy(api.get("/v1/datasets/inplace/data.npy")), train)
    changed = train.copy()
    changed[41, 2] += 1.0
    zarr.open_array(str(location), mode="r+")[40:80] = changed[40:80]
    assert_error(api.get("/v1/datasets/inplace/chunks/1?format=npy"), 409, "corrupt", "dataset")
    assert_error(api.get("/v1/datasets/inplace/data.npy"), 409, "corrupt", "dataset")  # marked: refused up front
    assert api.get("/v1/datasets/inplace").json()["corrupt_chunks"] == [1]
