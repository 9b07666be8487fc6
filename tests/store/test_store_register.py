"""Registering an existing zarr array as a data set: no copy, never a write where the array lives."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr

from store import Conflict, DatasetStore, Invalid, NotFound
from tests.store_checks import snapshot, version_checksum


def make_zarr(path: Path, values: np.ndarray, chunks, **kwargs) -> str:
    array = zarr.create_array(store=str(path), shape=values.shape, dtype=values.dtype, chunks=chunks, **kwargs)
    array[...] = values
    return str(path)


@pytest.fixture
def external(tmp_path: Path) -> Path:
    folder = tmp_path / "external"
    folder.mkdir()
    return folder


@pytest.fixture
def store(root: Path) -> DatasetStore:
    return DatasetStore(root)


def test_register_reads_rows_without_writing_there(store, external, rng):
    values = rng.normal(size=(20, 5)).astype(np.float32)
    url = make_zarr(external / "x.zarr", values, chunks=(7, 5))
    before = snapshot(external)
    meta = store.register("ext", url)
    assert meta.status == "ready" and meta.version == 1
    assert (meta.n_rows, meta.n_features, meta.dtype) == (20, 5, "float32")
    assert meta.source.zarr == url and meta.source_dtype == "float32"
    assert meta.zarr_chunk_rows == 7 and meta.chunks == [0, 1, 2] and meta.staged == []
    assert meta.checksum == version_checksum(values[:7], values[7:14], values[14:])
    assert [v.model_dump() for v in meta.versions] == [
        {"version": 1, "n_rows": 20, "n_chunks": 3, "checksum": meta.checksum, "committed_at": meta.committed_at}]
    assert store.get("ext") == meta and [m.name for m in store.list()] == ["ext"]
    rows = store.open_array("ext")
    assert rows.shape == (20, 5) and rows.dtype == np.float32 and rows.chunks == (7, 5)
    assert rows[:].tobytes() == values.tobytes()
    assert rows[6:15].tobytes() == values[6:15].tobytes()
    assert rows[3:4, :].tobytes() == values[3:4].tobytes()
    with pytest.raises(ValueError, match="read-only"):
        rows[0:1] = 0.0
    assert store.commit("ext") == meta  # nothing staged: a no-op
    assert snapshot(external) == before  # no file written, touched or added where the array lives


def test_delete_keeps_the_external_array(store, external, rng):
    values = rng.normal(size=(9, 3))
    url = make_zarr(external / "keep.zarr", values, chunks=(4, 3))
    before = snapshot(external)
    store.register("ext", url)
    store.delete("ext")
    with pytest.raises(NotFound):
        store.get("ext")
    assert snapshot(external) == before
    np.testing.assert_array_equal(zarr.open_array(url, mode="r")[:], values)
    assert store.register("ext", url).n_rows == 9  # the name is free again


def test_integer_source_is_read_as_float64(store, external):
    values = np.arange(-12, 12, dtype=np.int16).reshape(8, 3)
    url = make_zarr(external / "ints.zarr", values, chunks=(3, 3))
    meta = store.register("ints", url)
    assert (meta.dtype, meta.source_dtype) == ("float64", "int16")
    rows = store.open_array("ints")
    assert rows.dtype == np.float64
    assert rows[2:7].dtype == np.float64
    np.testing.assert_array_equal(rows[:], values.astype(np.float64))
    as_f64 = values.astype(np.float64)
    assert meta.checksum == version_checksum(as_f64[:3], as_f64[3:6], as_f64[6:])
    meta32 = store.register("ints32", url, dtype="float32")
    assert (meta32.dtype, meta32.source_dtype) == ("float32", "int16")
    assert store.open_array("ints32")[:].dtype == np.float32


def test_column_chunked_and_sharded_sources(store, external, rng):
    values = rng.normal(size=(17, 6))
    url = make_zarr(external / "cols.zarr", values, chunks=(5, 2))
    meta = store.register("cols", url)
    assert meta.zarr_chunk_rows == 5 and store.open_array("cols").chunks == (5, 6)
    assert meta.checksum == version_checksum(values[:5], values[5:10], values[10:15], values[15:])
    url = make_zarr(external / "sharded.zarr", values, chunks=(4, 6), shards=(8, 6))
    meta = store.register("sharded", url)
    assert meta.zarr_chunk_rows == 8 and meta.chunks == [0, 1, 2]
    assert store.open_array("sharded")[:].tobytes() == values.tobytes()


def test_zarr_v2_source(store, external, rng):
    values = rng.normal(size=(6, 2))
    url = make_zarr(external / "v2.zarr", values, chunks=(4, 2), zarr_format=2)
    assert store.register("v2", url).n_rows == 6
    np.testing.assert_array_equal(store.open_array("v2")[:], values)


@pytest.mark.parametrize("bad_value, message", [(np.nan, "row 13 contains NaN or inf"),
                                                (np.inf, "row 13 contains NaN or inf"),
                                                (-np.inf, "row 13 contains NaN or inf")])
def test_non_finite_source_is_rejected(store, external, root, rng, bad_value, message):
    values = rng.normal(size=(30, 4))
    values[13, 2] = bad_value
    values[20, 0] = np.nan
    url = make_zarr(external / "bad.zarr", values, chunks=(8, 4))
    with pytest.raises(Invalid) as info:
        store.register("bad", url)
    assert (info.value.field, info.value.message) == ("source", message)
    with pytest.raises(NotFound):
        store.get("bad")
    assert store.list() == []


def test_source_too_large_for_float32_is_rejected(store, external):
    values = np.ones((4, 2))
    values[3, 1] = 1e300
    url = make_zarr(external / "big.zarr", values, chunks=(2, 2))
    with pytest.raises(Invalid) as info:
        store.register("big", url, dtype="float32")
    assert info.value.field == "source" and info.value.message.startswith("row 3 contains values too large")
    assert store.register("big", url).dtype == "float64"


@pytest.mark.parametrize(
    "values, message",
    [
        (np.arange(10.0), "must be 2-D"),
        (np.zeros((2, 3, 4)), "must be 2-D"),
        (np.zeros((1, 3)), "at least 2 rows"),
        (np.zeros((5, 0)), "at least 1 column"),
        (np.zeros((4, 2), dtype=bool), "only integer and float arrays"),
        (np.zeros((4, 2), dtype=np.complex64), "only integer and float arrays"),
    ],
)
def test_bad_source_shapes_and_dtypes(store, external, values, message):
    url = make_zarr(external / "odd.zarr", values, chunks=tuple(max(1, n) for n in values.shape))
    before = snapshot(external)
    with pytest.raises(Invalid) as info:
        store.register("odd", url)
    assert info.value.field == "source"
    assert message in info.value.message
    assert store.list() == []
    assert snapshot(external) == before


def test_unopenable_sources(store, external, root, rng):
    cases = {
        "relative/x.zarr": "must be absolute",
        str(external / "missing.zarr"): "cannot open a zarr array at",
        str(external): "cannot open a zarr array at",  # a folder without an array
        "nosuchprotocol://bucket/x.zarr": "cannot open a zarr array at",
        "": "path or URL of 1 to 4096 characters",
        "x" * 5000: "path or URL of 1 to 4096 characters",
        "/tmp/nul\0byte": "non-empty path or URL",
    }
    zarr.open_group(str(external / "group.zarr"), mode="w")
    cases[str(external / "group.zarr")] = "cannot open a zarr array at"
    before = snapshot(external)
    for url, message in cases.items():
        with pytest.raises(Invalid) as info:
            store.register("src", url)
        assert info.value.field == "source", url
        assert message in info.value.message, (url, info.value.message)
    assert not (external / "missing.zarr").exists()
    assert snapshot(external) == before
    # an array inside the store's own data folder would vanish with the data set that owns it
    store.create("own", 2, "float64")
    store.put_chunk("own", 0, rng.normal(size=(3, 2)))
    store.commit("own")
    with pytest.raises(Invalid) as info:
        store.register("src", str(store.array_path("own")))
    assert info.value.field == "source" and "data folder" in info.value.message
    with pytest.raises(Invalid):
        store.register("src", "file://" + str(store.array_path("own")))
    assert [m.name for m in store.list()] == ["own"]


def test_bad_dtype_and_name_clash(store, external, rng):
    url = make_zarr(external / "x.zarr", rng.normal(size=(4, 2)), chunks=(2, 2))
    with pytest.raises(Invalid) as info:
        store.register("x", url, dtype="int32")
    assert info.value.field == "dtype"
    store.create("taken", 2, "float32")
    with pytest.raises(Conflict) as info:
        store.register("taken", url)
    assert info.value.field == "name"
    assert store.get("taken").status == "open"
    assert sorted(os.listdir(store.array_path("taken").parent.parent)) == ["meta.json"]


def test_registered_sets_take_no_uploads(store, external, rng):
    values = rng.normal(size=(6, 3))
    url = make_zarr(external / "ro.zarr", values, chunks=(3, 3))
    meta = store.register("ro", url)
    for index, rows in ((0, values[:3]), (2, values[:3]), (5, np.ones((1, 3)))):
        with pytest.raises(Conflict) as info:
            store.put_chunk("ro", index, rows)
        assert info.value.field == "name"
        assert "read-only" in info.value.message
    assert store.get("ro") == meta


def test_changed_source_is_refused_on_open(store, external, rng):
    values = rng.normal(size=(6, 3))
    url = make_zarr(external / "moving.zarr", values, chunks=(3, 3))
    store.register("moving", url)
    zarr.open_array(url, mode="r+").resize((9, 3))  # someone else grows the array
    with pytest.raises(Conflict) as info:
        store.open_array("moving")
    assert info.value.field == "source" and "changed since it was registered" in info.value.message
    shutil.rmtree(url)
    with pytest.raises(Conflict) as info:
        store.open_array("moving")
    assert info.value.field == "source" and "can no longer be opened" in info.value.message
    store.delete("moving")
    assert store.list() == []
