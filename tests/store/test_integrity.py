"""Stored chunks carry digests verified on read; damaged chunks mark the set corrupt until repaired;
damaged staged files affect only their own set and name their chunk."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from store import DatasetStore
from store.errors import Corrupt, Invalid
from store.datasets.integrity import rewrite_chunk


@pytest.fixture
def store(root: Path) -> DatasetStore:
    return DatasetStore(root)


def committed(store: DatasetStore, rng, name: str = "d", chunks: int = 2, rows: int = 40) -> np.ndarray:
    """A ready float32 set of ``chunks`` upload chunks of ``rows`` rows, 4 features; its rows."""
    data = rng.normal(size=(chunks * rows, 4)).astype(np.float32)
    store.create(name, 4, "float32")
    for i in range(chunks):
        store.put_chunk(name, i, data[i * rows:(i + 1) * rows])
    store.commit(name)
    return data


def chunk_file(store: DatasetStore, name: str, chunk: int = 0) -> Path:
    return store.array_path(name) / "c" / str(chunk) / "0"


def silently_change(store: DatasetStore, name: str, chunk: int = 0) -> None:
    """A damaged chunk that still decodes: other values, validly encoded (what a lucky bit flip does)."""
    path = store.array_path(name)
    array = zarr.open_array(str(path), mode="r")
    step = array.chunks[0]
    rows = np.asarray(array[chunk * step:(chunk + 1) * step]).copy()
    rows[0, 0] = -1.15e7
    rewrite_chunk(path, array, chunk, rows)


def flip_bytes(path: Path) -> None:
    """Flip bytes in the middle of a stored (compressed) chunk file, in place."""
    data = bytearray(path.read_bytes())
    for i in range(len(data) // 2, min(len(data), len(data) // 2 + 8)):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_value_changed_on_disk_is_refused_on_read_naming_set_version_and_chunk(store, rng):
    data = committed(store, rng)
    assert np.array_equal(store.open_array("d")[:], data)  # verified once and cached
    silently_change(store, "d")
    with pytest.raises(Corrupt) as caught:
        store.open_array("d")[0:3]
    error = caught.value
    assert (error.code, error.dataset, error.version, error.field) == ("corrupt", "d", 1, "dataset")
    assert error.chunks == [0, 1]  # both upload chunks share the one stored zarr chunk
    assert "version 1" in error.message and "[0, 1]" in error.message
    meta = store.get("d")
    assert (meta.status, meta.corrupt_chunks) == ("corrupt", [0, 1])
    with pytest.raises(Corrupt):  # marked: refused at open, before any read
        store.open_array("d")
    with pytest.raises(Corrupt):
        store.ready("d")


def truncate(path: Path) -> None:
    """Cut a stored chunk file in half: zstd cannot decode it."""
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_flipped_bytes_in_a_stored_chunk_are_refused(store, rng):
    committed(store, rng)
    flip_bytes(chunk_file(store, "d"))
    with pytest.raises(Corrupt):
        np.asarray(store.open_array("d")[:])


def test_an_undecodable_chunk_is_corrupt_not_a_codec_error(store, rng):
    committed(store, rng)
    truncate(chunk_file(store, "d"))
    with pytest.raises(Corrupt) as caught:
        np.asarray(store.open_array("d")[:])
    assert "cannot decode" in caught.value.message


def test_verify_reports_the_damaged_chunks_and_repair_by_upload_and_commit(store, rng):
    data = committed(store, rng)
    assert store.verify("d") == {"ok": True, "version": 1, "chunks_checked": 2, "corrupt_chunks": []}
    silently_change(store, "d")
    report = store.verify("d")
    assert (report["ok"], report["corrupt_chunks"]) == (False, [0])  # only chunk 0's rows changed
    assert store.get("d").status == "corrupt"
    with pytest.raises(Corrupt):
        store.open_array("d")
    store.put_chunk("d", 0, data[:40])  # the original rows, uploaded again
    after = store.commit("d")
    assert (after.status, after.corrupt_chunks, after.version) == ("ready", [], 1)
    assert store.verify("d")["ok"]
    assert np.array_equal(store.open_array("d")[:], data)


def test_repair_needs_every_chunk_sharing_an_undecodable_stored_chunk(store, rng):
    data = committed(store, rng)
    truncate(chunk_file(store, "d"))
    report = store.verify("d")
    assert report["corrupt_chunks"] == [0, 1]
    store.put_chunk("d", 0, data[:40])
    with pytest.raises(Invalid) as caught:
        store.commit("d")
    assert caught.value.field == "chunks" and "chunk 1" in caught.value.message
    store.put_chunk("d", 1, data[40:])
    assert store.commit("d").status == "ready"
    assert np.array_equal(store.open_array("d")[:], data)


def test_other_rows_under_a_corrupt_index_are_still_refused(store, rng):
    data = committed(store, rng)
    silently_change(store, "d")
    store.verify("d")
    with pytest.raises(Exception) as caught:
        store.put_chunk("d", 0, data[:40] + 1)
    assert getattr(caught.value, "field", None) == "index"


def test_a_damaged_staged_header_flags_only_its_set_and_commit_names_the_chunk(store, rng):
    committed(store, rng, name="fine")
    store.create("d", 4, "float32")
    store.put_chunk("d", 0, np.ones((5, 4)))
    store.put_chunk("d", 1, np.ones((5, 4)))
    staged = store.folder / "d" / "staging" / "000001.npy"
    staged.write_bytes(b"\x93NUMPY garbage" + staged.read_bytes()[14:])
    listed = {m.name: m for m in store.list()}
    assert listed["fine"].status == "ready"
    assert (listed["d"].status, listed["d"].damaged_staged) == ("corrupt", [1])
    with pytest.raises(Invalid) as caught:
        store.commit("d")
    assert caught.value.field == "chunks" and "staged chunk 1" in caught.value.message
    store.put_chunk("d", 1, np.ones((5, 4)))  # uploading it again replaces the damaged file
    assert store.commit("d").n_rows == 10


def test_a_truncated_staged_file_is_named_at_commit(store, rng):
    store.create("d", 4, "float32")
    store.put_chunk("d", 0, np.ones((50, 4)))
    staged = store.folder / "d" / "staging" / "000000.npy"
    staged.write_bytes(staged.read_bytes()[:-37])
    assert store.get("d").damaged_staged == [0]
    with pytest.raises(Invalid) as caught:
        store.commit("d")
    assert caught.value.field == "chunks" and "staged chunk 0" in caught.value.message
    assert "truncated" in caught.value.message


def test_corrupt_pickles_with_its_fields():
    import pickle

    error = pickle.loads(pickle.dumps(Corrupt("d", 2, [3, 1])))
    assert (error.dataset, error.version, error.chunks, error.code) == ("d", 2, [1, 3], "corrupt")
