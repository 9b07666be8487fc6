"""What says how stored bytes are read is verified too (issue 30): a chunk file changed in place with its
mtime put back, a segment's ``zarr.json`` changed (dtype or anything else), a missing digest document, an
emptied ``meta.json``, and a registered array changed in place or swapped through a symlink are all
refused (`Corrupt`, `Damaged` or `Conflict` on ``source``), never read as correct."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import zarr

from store import DatasetStore
from store.errors import Conflict, Corrupt, Damaged


@pytest.fixture
def store(root: Path) -> DatasetStore:
    return DatasetStore(root)


def committed(store: DatasetStore, rng, name: str = "d") -> np.ndarray:
    data = rng.normal(size=(600, 4))
    store.create(name, 4, "float64")
    for i in range(3):
        store.put_chunk(name, i, data[i * 200:(i + 1) * 200])
    store.commit(name)
    return data


def test_a_chunk_changed_in_place_with_its_mtime_restored_is_caught_after_a_verified_read(store, rng):
    data = committed(store, rng)
    assert np.array_equal(store.open_array("d")[:], data)  # verified, remembered by (inode, size, times)
    path = store.array_path("d") / "c" / "0" / "0"
    info = os.stat(path)
    body = bytearray(path.read_bytes())
    body[len(body) // 2] ^= 0x01
    with open(path, "r+b") as handle:
        handle.write(bytes(body))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert (os.stat(path).st_ino, os.stat(path).st_size, os.stat(path).st_mtime_ns) == \
        (info.st_ino, info.st_size, info.st_mtime_ns)
    with pytest.raises(Corrupt):
        np.asarray(store.open_array("d")[:])
    assert store.get("d").status == "corrupt"


@pytest.mark.parametrize("change", [{"data_type": "int64"}, {"attributes": {"note": "edited"}}],
                         ids=["dtype", "attributes"])
def test_a_changed_zarr_json_is_corrupt_on_open_and_on_verify(store, rng, change):
    committed(store, rng)
    path = store.array_path("d") / "zarr.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    with pytest.raises(Corrupt, match="zarr.json") as caught:
        store.open_array("d")
    assert caught.value.chunks == [0, 1, 2]
    assert store.get("d").corrupt_chunks == [0, 1, 2]
    assert store.verify("d")["corrupt_chunks"] == [0, 1, 2]


def test_a_missing_digest_document_is_corrupt_for_every_reader(store, rng):
    committed(store, rng)
    (store.root / "datasets" / "d" / "segments" / "0001.json").unlink()
    with pytest.raises(Corrupt, match="digest document"):
        store.chunk_ranges("d")
    assert store.get("d").status == "corrupt"
    with pytest.raises(Corrupt):
        store.open_array("d")
    store.delete("d")
    assert not store.exists("d")


def test_an_emptied_meta_json_is_damaged_listed_as_corrupt_and_deletable(store, rng):
    committed(store, rng)
    (store.root / "datasets" / "d" / "meta.json").write_bytes(b"")
    for read in (store.get, store.open_array, store.chunk_ranges):
        with pytest.raises(Damaged) as caught:
            read("d")
        assert (caught.value.code, caught.value.field) == ("corrupt", "name")
    assert [(m.name, m.status) for m in store.list()] == [("d", "corrupt")]
    store.delete("d")
    assert store.list() == []


def registered(store: DatasetStore, folder: Path, values: np.ndarray, name: str = "ext") -> Path:
    location = folder / f"{name}.zarr"
    zarr.create_array(store=str(location), shape=values.shape, dtype=values.dtype, chunks=(10, 3))[...] = values
    store.register(name, str(location))
    return location


def test_a_registered_array_is_read_verified_and_an_in_place_change_is_corrupt(store, tmp_path, rng):
    values = rng.integers(-50, 50, size=(25, 3)).astype(np.int16)  # read as float64: hashed after the cast
    location = registered(store, tmp_path, values)
    assert np.array_equal(store.open_array("ext")[:], values.astype(np.float64))
    zarr.open_array(str(location), mode="r+")[12, 1] = 99
    with pytest.raises(Corrupt) as caught:
        store.open_array("ext")[10:20]
    assert caught.value.chunks == [1]
    assert store.get("ext").corrupt_chunks == [1]


def test_a_registered_array_swapped_through_a_symlink_is_refused(store, tmp_path, rng):
    values = rng.normal(size=(25, 3))
    inside = tmp_path / "inside"
    inside.mkdir()
    location = registered(store, inside, values)
    outside = tmp_path / "outside.zarr"
    zarr.create_array(store=str(outside), shape=values.shape, dtype=values.dtype, chunks=(10, 3))[...] = values
    os.rename(location, inside / "old.zarr")
    os.symlink(outside, location)  # same rows, but from elsewhere: refused all the same
    with pytest.raises(Conflict, match="resolves") as caught:
        store.open_array("ext")
    assert caught.value.field == "source"
