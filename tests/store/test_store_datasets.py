"""Conformance suite for data set stores; `TestLocalDatasetStore` runs it on the file backend."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from store_helpers import all_files, temp_leftovers

from store import Conflict, DatasetStore, Invalid, NotFound
from store.npy import npy_shape
from store.datasets.zarr_rows import AlignedRowWriter, create_row_array, zarr_chunk_rows


def sha256_of(*chunks: np.ndarray) -> str:
    """Documented version checksum: sha256 over the hex sha256 digests of the chunks, in index order."""
    hex_digests = "".join(hashlib.sha256(np.ascontiguousarray(c).tobytes()).hexdigest() for c in chunks)
    return "sha256:" + hashlib.sha256(hex_digests.encode("ascii")).hexdigest()


class DatasetStoreConformance:
    """Behaviour every data set store must show. Subclasses provide the ``store`` fixture, and the three
    looks at its layout below where it is not the folder's."""

    def staged_version(self, store, name: str, index: int) -> tuple:
        """What changes when staged chunk ``index`` is written again (its inode and mtime)."""
        info = os.stat(store.array_path(name).parent.parent / "staging" / f"{index:06d}.npy")
        return info.st_ino, info.st_mtime_ns

    def zarr_json(self, store, name: str) -> dict:
        """The ``zarr.json`` of the set's first segment."""
        return json.loads((store.array_path(name) / "zarr.json").read_text())

    def staging_left(self, store, name: str) -> bool:
        """Whether anything of the set's staging is left."""
        return (store.array_path(name).parent.parent / "staging").exists()

    # ------------------------------------------------------------ create/get
    def test_create_get_list_delete(self, store):
        meta = store.create("digits", 64, "float32")
        assert meta.name == "digits"
        assert meta.status == "open"
        assert meta.n_features == 64 and meta.dtype == "float32"
        assert meta.n_rows == 0 and meta.chunks == [] and meta.checksum is None
        assert meta.schema_version == 1
        assert meta.created_at.endswith("Z") and meta.committed_at is None
        assert store.get("digits") == meta
        store.create("alpha", 3, "float64")
        assert [m.name for m in store.list()] == ["alpha", "digits"]
        json.dumps([m.model_dump() for m in store.list()])  # plain JSON-able values
        store.delete("digits")
        with pytest.raises(NotFound) as info:
            store.get("digits")
        assert info.value.message == "dataset 'digits' not found"
        assert [m.name for m in store.list()] == ["alpha"]
        with pytest.raises(NotFound):
            store.delete("digits")
        assert store.create("digits", 2, "float64").n_features == 2  # name free again

    def test_list_of_empty_store(self, store):
        assert store.list() == []

    def test_create_name_clash(self, store):
        store.create("d", 4, "float32")
        with pytest.raises(Conflict) as info:
            store.create("d", 4, "float32")
        assert info.value.field == "name"
        assert store.get("d").n_features == 4

    @pytest.mark.parametrize("n_features", [0, -1, 100_001, True, 3.0, "3", None])
    def test_create_rejects_bad_n_features(self, store, n_features):
        with pytest.raises(Invalid) as info:
            store.create("d", n_features, "float32")
        assert info.value.field == "n_features"
        assert store.list() == []

    @pytest.mark.parametrize("dtype", ["int32", "float16", "", None, "float"])
    def test_create_rejects_bad_dtype(self, store, dtype):
        with pytest.raises(Invalid) as info:
            store.create("d", 3, dtype)
        assert info.value.field == "dtype"

    def test_feature_limits_inclusive(self, store):
        assert store.create("one", 1, "float64").n_features == 1
        assert store.create("wide", 100_000, "float32").n_features == 100_000

    @pytest.mark.parametrize("bad", ["../x", "a/b", "", "..", ".x", "a" * 65, "x\n"])
    def test_bad_names_rejected_everywhere(self, store, bad):
        calls = [
            lambda: store.create(bad, 3, "float32"),
            lambda: store.get(bad),
            lambda: store.delete(bad),
            lambda: store.put_chunk(bad, 0, np.zeros((1, 3))),
            lambda: store.commit(bad),
            lambda: store.open_array(bad),
            lambda: store.exists(bad),
        ]
        for call in calls:
            with pytest.raises(Invalid) as info:
                call()
            assert info.value.field == "name"

    # ------------------------------------------------------------ put_chunk
    def test_put_chunk_casts_float_int_bool_to_float32(self, store):
        store.create("d", 3, "float32")
        floats = np.array([[0.1, -2.5, 1e10]], dtype=np.float64)
        ints = np.array([[1, -7, 2**24 + 1], [0, 3, 5]], dtype=np.int64)
        bools = np.array([[True, False, True]])
        uint8 = np.array([[255, 0, 1]], dtype=np.uint8)
        for index, rows in enumerate((floats, ints, bools, uint8)):
            meta = store.put_chunk("d", index, rows)
        assert meta.chunks == [0, 1, 2, 3] and meta.n_rows == 5
        committed = store.commit("d")
        expected = np.concatenate([r.astype(np.float32) for r in (floats, ints, bools, uint8)])
        data = store.open_array("d")[:]
        assert data.dtype == np.float32
        assert data.tobytes() == expected.tobytes()
        assert data[1, 2] == np.float32(2**24)  # documented: ints exact up to 2**24 in float32
        assert data[0, 0] == np.float32(0.1)
        assert committed.checksum == sha256_of(*(r.astype(np.float32) for r in (floats, ints, bools, uint8)))

    def test_cast_rule_for_integers_beyond_float_precision(self, store):
        # documented: astype rounds to nearest; 64-bit integers of any size are accepted
        store.create("big", 3, "float64")
        store.put_chunk("big", 0, np.array([[2**64 - 1, 2**53 + 1, 2**53 + 2]], dtype=np.uint64))
        store.put_chunk("big", 1, np.array([[-(2**63), 2**63 - 1, -(2**53) - 1]], dtype=np.int64))
        store.commit("big")
        np.testing.assert_array_equal(
            store.open_array("big")[:],
            [[2.0**64, 2.0**53, 2.0**53 + 2], [-(2.0**63), 2.0**63, -(2.0**53)]],
        )
        store.create("small", 2, "float32")
        store.put_chunk("small", 0, np.array([[2**64 - 1, 2**24 + 1]], dtype=np.uint64))
        store.put_chunk("small", 1, np.array([[3.4028235e38, 0.1]]))  # float32's largest value: kept
        store.commit("small")
        np.testing.assert_array_equal(
            store.open_array("small")[:], np.array([[2.0**64, 2.0**24], [3.4028235e38, 0.1]], dtype=np.float32)
        )

    def test_single_row_may_be_one_dimensional(self, store):
        store.create("d", 4, "float64")
        meta = store.put_chunk("d", 0, np.arange(4.0))
        assert meta.n_rows == 1
        store.commit("d")
        np.testing.assert_array_equal(store.open_array("d")[:], [[0.0, 1.0, 2.0, 3.0]])

    def test_put_chunk_accepts_nested_lists(self, store):
        store.create("d", 2, "float64")
        store.put_chunk("d", 0, [[1, 2], [3.5, 4]])
        store.commit("d")
        np.testing.assert_array_equal(store.open_array("d")[:], [[1.0, 2.0], [3.5, 4.0]])

    @pytest.mark.parametrize(
        "rows, message",
        [
            (np.zeros((2, 4)), "expected 3 columns, got 4"),
            (np.zeros(4), "expected 3 columns, got 4"),
            (np.zeros((0, 3)), "empty chunk"),
            (np.zeros((2, 3, 1)), "2-D"),
            (np.array(1.0), "2-D"),
            (np.array([[1, 2, "x"]], dtype=object), "unsupported dtype object"),
            (np.zeros((1, 3), dtype=np.complex128), "unsupported dtype complex128"),
            (np.array([["a", "b", "c"]]), "unsupported dtype"),
            ([[1, 2, 3], [4, 5]], "rectangular"),
        ],
    )
    def test_put_chunk_rejections(self, store, rows, message):
        store.create("d", 3, "float32")
        with pytest.raises(Invalid) as info:
            store.put_chunk("d", 0, rows)
        assert info.value.field == "rows"
        assert message in info.value.message
        assert store.get("d").chunks == []

    @pytest.mark.parametrize("bad_value", [np.nan, np.inf, -np.inf])
    def test_non_finite_row_is_named(self, store, rng, bad_value):
        store.create("d", 5, "float32")
        rows = rng.normal(size=(40, 5))
        rows[17, 3] = bad_value
        rows[30, 0] = np.nan
        with pytest.raises(Invalid) as info:
            store.put_chunk("d", 0, rows)
        assert info.value.field == "rows"
        assert info.value.message == "row 17 contains NaN or inf"
        assert store.get("d").chunks == []

    def test_value_overflowing_float32_is_refused(self, store):
        store.create("d", 2, "float32")
        with pytest.raises(Invalid) as info:
            store.put_chunk("d", 0, np.array([[1.0, 2.0], [1e300, 0.0]]))
        assert info.value.field == "rows"
        assert info.value.message.startswith("row 1 ")

    @pytest.mark.parametrize("index", [-1, 1_000_001, True, "3", 2.0, None])
    def test_bad_index(self, store, index):
        store.create("d", 3, "float32")
        with pytest.raises(Invalid) as info:
            store.put_chunk("d", index, np.zeros((1, 3)))
        assert info.value.field == "index"

    def test_extreme_indices_accepted(self, store):
        store.create("d", 1, "float32")
        assert store.put_chunk("d", 1_000_000, np.ones((1, 1))).chunks == [1_000_000]
        assert store.put_chunk("d", np.int64(0), np.ones((2, 1))).chunks == [0, 1_000_000]
        with pytest.raises(Invalid) as info:
            store.commit("d")
        assert "999999 missing" in info.value.message  # long lists are abbreviated

    def test_put_chunk_unknown_set(self, store):
        with pytest.raises(NotFound):
            store.put_chunk("nope", 0, np.zeros((1, 3)))

    def test_open_set_reports_chunks_and_rows_from_staging(self, store, rng):
        store.create("d", 3, "float64")
        store.put_chunk("d", 2, rng.normal(size=(7, 3)))
        meta = store.put_chunk("d", 0, rng.normal(size=(5, 3)))
        assert meta.chunks == [0, 2] and meta.n_rows == 12
        assert store.get("d").status == "open"

    def test_reput_same_content_is_noop(self, store, rng):
        store.create("d", 3, "float32")
        rows = rng.normal(size=(6, 3))
        store.put_chunk("d", 0, rows)
        before = self.staged_version(store, "d", 0)
        # same values given as float64 and as float32: identical after the cast
        meta = store.put_chunk("d", 0, rows)
        meta = store.put_chunk("d", 0, rows.astype(np.float32))
        assert self.staged_version(store, "d", 0) == before
        assert meta.chunks == [0] and meta.n_rows == 6

    def test_reput_different_content_conflicts(self, store, rng):
        store.create("d", 3, "float32")
        rows = rng.normal(size=(6, 3))
        store.put_chunk("d", 0, rows)
        changed = rows.copy()
        changed[5, 2] += 1.0
        for other in (changed, rows[:5], np.concatenate([rows, rows[:1]])):
            with pytest.raises(Conflict) as info:
                store.put_chunk("d", 0, other)
            assert info.value.field == "index"
        store.commit("d")
        np.testing.assert_array_equal(store.open_array("d")[:], rows.astype(np.float32))

    # --------------------------------------------------------------- commit
    def test_commit_without_chunks(self, store):
        store.create("d", 3, "float32")
        with pytest.raises(Invalid) as info:
            store.commit("d")
        assert (info.value.field, info.value.message) == ("chunks", "no chunks uploaded")

    def test_commit_names_missing_indices(self, store):
        store.create("d", 2, "float32")
        for index in (0, 2, 4, 6):
            store.put_chunk("d", index, np.full((1, 2), index))
        with pytest.raises(Invalid) as info:
            store.commit("d")
        assert info.value.field == "chunks"
        assert info.value.message == "missing chunk indices [1, 3, 5]; upload them and commit again"
        assert store.get("d").status == "open"
        for index in (1, 3, 5):
            store.put_chunk("d", index, np.full((1, 2), index))
        meta = store.commit("d")
        assert meta.status == "ready" and meta.n_rows == 7
        np.testing.assert_array_equal(store.open_array("d")[:, 0], np.arange(7))

    def test_commit_writes_exact_concatenation(self, store, rng):
        store.create("d", 6, "float64")
        blocks = [rng.normal(size=(m, 6)) for m in (3, 11, 1, 8)]
        for index, block in enumerate(blocks):
            store.put_chunk("d", index, block)
        meta = store.commit("d")
        expected = np.concatenate(blocks)
        assert meta.status == "ready"
        assert meta.n_rows == 23 and meta.chunks == [0, 1, 2, 3]
        assert meta.checksum == sha256_of(*blocks)
        assert meta.committed_at.endswith("Z")
        array = store.open_array("d")
        assert array.shape == (23, 6) and array.dtype == np.float64
        assert array.chunks == (meta.zarr_chunk_rows, 6)
        assert array[:].tobytes() == expected.tobytes()
        assert array[4:9].tobytes() == expected[4:9].tobytes()
        assert isinstance(array[4:9], np.ndarray)
        assert self.zarr_json(store, "d")["zarr_format"] == 3
        assert not self.staging_left(store, "d")
        assert store.get("d") == meta

    def test_commit_idempotent_and_checksum_stable(self, store, rng):
        rows = rng.normal(size=(30, 4)).astype(np.float32)
        store.create("a", 4, "float32")
        store.put_chunk("a", 0, rows)
        first = store.commit("a")
        assert store.commit("a") == first  # idempotent
        assert first.checksum == sha256_of(rows)
        store.create("b", 4, "float32")  # same rows and chunks in another set: same checksum
        store.put_chunk("b", 0, rows)
        assert store.commit("b").checksum == first.checksum
        store.create("c", 4, "float32")  # same rows cut into other chunks: documented to differ
        store.put_chunk("c", 0, rows[:10])
        store.put_chunk("c", 1, rows[10:])
        assert store.commit("c").checksum == sha256_of(rows[:10], rows[10:]) != first.checksum

    def test_put_after_commit_changes_no_committed_chunk(self, store):
        store.create("d", 2, "float32")
        store.put_chunk("d", 0, np.ones((2, 2)))
        committed = store.commit("d")
        assert store.put_chunk("d", 0, np.ones((2, 2))) == committed  # same bytes: no-op
        with pytest.raises(Conflict) as info:
            store.put_chunk("d", 0, np.full((2, 2), 2.0))
        assert info.value.field == "index"
        assert info.value.message == (
            "chunk 0 of data set 'd' is part of committed version 1 and cannot change; "
            "append new rows with chunk index >= 1"
        )
        meta = store.put_chunk("d", 1, np.full((3, 2), 2.0))  # a new index: staged for version 2
        assert (meta.status, meta.version, meta.n_rows) == ("ready", 1, 2)
        assert meta.chunks == [0] and meta.staged == [1]
        np.testing.assert_array_equal(store.open_array("d")[:], np.ones((2, 2)))

    def test_open_array_requires_ready(self, store):
        store.create("d", 2, "float32")
        store.put_chunk("d", 0, np.ones((2, 2)))
        with pytest.raises(Conflict) as info:
            store.open_array("d")
        assert info.value.field == "dataset"
        with pytest.raises(NotFound):
            store.open_array("missing")

    def test_open_array_is_read_only(self, store):
        store.create("d", 2, "float32")
        store.put_chunk("d", 0, np.ones((2, 2)))
        store.commit("d")
        array = store.open_array("d")
        with pytest.raises(ValueError, match="read-only"):
            array[0:1] = 5.0
        np.testing.assert_array_equal(store.open_array("d")[:], np.ones((2, 2)))

    def test_multi_chunk_zarr_layout_is_exact(self, store, rng):
        n_features = 4096  # 32 KiB rows in float64: 32 rows per 1 MiB zarr chunk
        store.create("wide", n_features, "float64")
        blocks = [rng.normal(size=(m, n_features)) for m in (25, 40, 17)]
        for index, block in enumerate(blocks):
            store.put_chunk("wide", index, block)
        meta = store.commit("wide")
        assert meta.zarr_chunk_rows == 32
        array = store.open_array("wide")
        assert array.chunks == (32, n_features)
        expected = np.concatenate(blocks)
        assert array[:].tobytes() == expected.tobytes()
        assert array[31:33].tobytes() == expected[31:33].tobytes()
        assert meta.checksum == sha256_of(*blocks)

    def test_negative_zero_survives_commit(self, store):
        store.create("d", 3, "float64")
        store.put_chunk("d", 0, np.full((4, 3), -0.0))
        meta = store.commit("d")
        data = store.open_array("d")[:]
        assert np.signbit(data).all()
        assert meta.checksum == sha256_of(np.full((4, 3), -0.0))

    def test_concurrent_puts_then_commit(self, store, rng):
        store.create("d", 16, "float32")
        blocks = [rng.normal(size=(50 + i, 16)) for i in range(8)]
        errors = []
        start = threading.Barrier(8)

        def upload(index):
            try:
                start.wait()
                store.put_chunk("d", index, blocks[index])
                store.put_chunk("d", index, blocks[index])  # retried upload: no-op
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=upload, args=(i,)) for i in reversed(range(8))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert errors == []
        meta = store.commit("d")
        expected = np.concatenate(blocks).astype(np.float32)
        assert meta.chunks == list(range(8)) and meta.n_rows == expected.shape[0]
        assert store.open_array("d")[:].tobytes() == expected.tobytes()

    def test_concurrent_same_index_different_content_one_wins(self, store, rng):
        store.create("d", 3, "float64")
        candidates = [rng.normal(size=(4, 3)) for _ in range(6)]
        outcomes = []
        start = threading.Barrier(6)

        def upload(rows):
            start.wait()
            try:
                store.put_chunk("d", 0, rows)
                outcomes.append(("ok", rows))
            except Conflict:
                outcomes.append(("conflict", rows))

        threads = [threading.Thread(target=upload, args=(rows,)) for rows in candidates]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        winners = [rows for kind, rows in outcomes if kind == "ok"]
        assert len(outcomes) == 6 and len(winners) == 1
        store.commit("d")
        assert store.open_array("d")[:].tobytes() == winners[0].tobytes()

    def test_commit_streams_chunk_by_chunk(self, store, rng):
        # 16 staged chunks of 1 MiB each; peak traced memory must stay far below the 16 MiB set
        store.create("big", 256, "float64")
        for index in range(16):
            store.put_chunk("big", index, rng.normal(size=(512, 256)))
        tracemalloc.start()
        try:
            store.commit("big")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 6 * 2**20
        assert store.get("big").n_rows == 16 * 512

    # ------------------------------------------------------------- atomicity
    def test_no_temporary_files_left(self, store, root, rng):
        store.create("d", 3, "float32")
        store.put_chunk("d", 0, rng.normal(size=(5, 3)))
        store.put_chunk("d", 1, rng.normal(size=(5, 3)))
        store.commit("d")
        store.create("gone", 3, "float32")
        store.delete("gone")
        assert temp_leftovers(root) == []
        assert sorted(os.listdir(root / "datasets")) == ["d"]

    def test_leftovers_of_crashes_are_ignored(self, store, root, rng):
        store.create("d", 3, "float64")
        rows = rng.normal(size=(5, 3))
        store.put_chunk("d", 0, rows)
        folder = root / "datasets" / "d"
        # a chunk upload and a commit that died halfway, a create that died before meta.json
        (folder / "staging" / ".000001.npy.tmp-0badc0ffee00").write_bytes(b"\x93NUMPY garbage")
        (folder / "segments").mkdir()
        (folder / "segments" / ".0001.zarr.tmp-0badc0ffee00").mkdir()
        (folder / "segments" / "0001.zarr").mkdir()  # renamed into place, then the commit died
        (root / "datasets" / "halfmade").mkdir()
        (root / "datasets" / ".old.deleted-123").mkdir()
        assert store.get("d").chunks == [0]
        assert [m.name for m in store.list()] == ["d"]
        meta = store.commit("d")
        assert meta.chunks == [0] and meta.n_rows == 5
        assert store.open_array("d")[:].tobytes() == rows.tobytes()
        assert not (folder / "segments" / ".0001.zarr.tmp-0badc0ffee00").exists()
        with pytest.raises(NotFound):
            store.get("halfmade")
        assert store.create("halfmade", 2, "float32").status == "open"

    def test_meta_document_on_disk(self, store, root):
        store.create("d", 3, "float32")
        meta = json.loads((root / "datasets" / "d" / "meta.json").read_text())
        assert meta["schema_version"] == 1
        assert {"name", "n_features", "dtype", "status", "n_rows", "checksum", "zarr_chunk_rows",
                "created_at", "committed_at"} <= set(meta)

    def test_nothing_written_outside_root(self, store, root, tmp_path):
        before = all_files(tmp_path)
        for bad in ("../escape", "a/b", "..", "/tmp/x"):
            with pytest.raises(Invalid):
                store.create(bad, 3, "float32")
        assert all_files(tmp_path) == before


class TestLocalDatasetStore(DatasetStoreConformance):
    @pytest.fixture
    def store(self, root: Path) -> DatasetStore:
        return DatasetStore(root)

    @pytest.mark.parametrize("bad", ["../x", "a/b", "", ".x"])
    def test_array_path_rejects_bad_names(self, store, bad):
        with pytest.raises(Invalid):
            store.array_path(bad)


# ------------------------------------------------------------------ helpers of the file backend
@pytest.mark.parametrize(
    "n_rows, n_features, itemsize, expected",
    [(1000, 64, 4, 1000), (10**6, 64, 4, 4096), (10**6, 784, 4, 256), (10**6, 784, 8, 128),
     (5, 100_000, 8, 1), (1, 3, 4, 1), (10**6, 1, 8, 131072)],
)
def test_zarr_chunk_rows(n_rows, n_features, itemsize, expected):
    rows = zarr_chunk_rows(n_rows, n_features, itemsize)
    assert rows == expected
    assert rows == 1 or rows * n_features * itemsize <= 2**20


@pytest.mark.parametrize("block_sizes", [[3, 3, 3, 1], [10], [1] * 10, [9, 1], [2, 7, 1], [4, 4, 2]])
def test_aligned_writer_any_block_sizes(tmp_path, rng, block_sizes):
    rows = rng.normal(size=(sum(block_sizes), 2)).astype(np.float32)
    array = create_row_array(tmp_path / "a.zarr", rows.shape[0], 2, "float32", chunk_rows=4)
    writer = AlignedRowWriter(array)
    start = 0
    for size in block_sizes:
        writer.append(rows[start:start + size])
        start += size
    assert writer.close() == rows.shape[0]
    assert array[:].tobytes() == rows.tobytes()
    chunk_files = sorted(p.name for p in (tmp_path / "a.zarr" / "c").iterdir())
    assert chunk_files == ["0", "1", "2"]  # ceil(10 / 4) chunks, each stored


def test_npy_shape_reads_header_only(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.zeros((1234, 7), dtype=np.float32))
    assert npy_shape(path) == (1234, 7)
    with open(path, "r+b") as handle:  # truncate the data: the header alone must suffice
        handle.truncate(200)
    assert npy_shape(path) == (1234, 7)
