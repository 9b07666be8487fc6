"""Versions of a data set: appends to a committed set become version 2, 3, ... without touching version 1."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
from store_helpers import temp_leftovers

from store import Conflict, DatasetStore, Invalid, NotFound
from tests.store_checks import snapshot, version_checksum


class VersionsConformance:
    """Append-as-new-version behaviour every data set store must show."""

    def upload(self, store, name, first_index, blocks):
        for offset, block in enumerate(blocks):
            store.put_chunk(name, first_index + offset, block)

    def test_append_makes_version_2_and_keeps_version_1(self, store, rng):
        store.create("d", 5, "float64")
        v1_blocks = [rng.normal(size=(m, 5)) for m in (4, 6)]
        self.upload(store, "d", 0, v1_blocks)
        v1 = store.commit("d")
        assert (v1.version, v1.n_rows, v1.chunks, v1.staged) == (1, 10, [0, 1], [])
        v1_rows = store.open_array("d")[:]

        new_blocks = [rng.normal(size=(m, 5)) for m in (3, 1, 7)]
        staged = None
        for offset, block in enumerate(new_blocks):
            staged = store.put_chunk("d", 2 + offset, block)
        # staged appends are reported, the committed version is unchanged
        assert (staged.status, staged.version, staged.n_rows) == ("ready", 1, 10)
        assert staged.chunks == [0, 1] and staged.staged == [2, 3, 4]
        assert staged.checksum == v1.checksum

        v2 = store.commit("d")
        assert (v2.status, v2.version, v2.n_rows) == ("ready", 2, 21)
        assert v2.chunks == [0, 1, 2, 3, 4] and v2.staged == []
        assert v2.checksum == version_checksum(*v1_blocks, *new_blocks) != v1.checksum
        assert v1.checksum == version_checksum(*v1_blocks)
        assert [v.model_dump() for v in v2.versions] == [
            {"version": 1, "n_rows": 10, "n_chunks": 2, "checksum": v1.checksum,
             "committed_at": v1.committed_at},
            {"version": 2, "n_rows": 21, "n_chunks": 5, "checksum": v2.checksum,
             "committed_at": v2.committed_at},
        ]
        assert v2.committed_at >= v1.committed_at
        assert store.get("d") == v2

        latest = store.open_array("d")
        assert latest.shape == (21, 5) and latest.dtype == np.float64
        assert latest[:].tobytes() == np.concatenate(v1_blocks + new_blocks).tobytes()
        assert store.open_array("d", version=2)[:].tobytes() == latest[:].tobytes()
        old = store.open_array("d", version=1)
        assert old.shape == (10, 5)
        assert old[:].tobytes() == v1_rows.tobytes() == np.concatenate(v1_blocks).tobytes()

    def test_committed_chunk_reput_same_bytes_is_noop_different_is_409(self, store, rng):
        store.create("d", 3, "float32")
        blocks = [rng.normal(size=(5, 3)) for _ in range(3)]
        self.upload(store, "d", 0, blocks[:2])
        store.commit("d")
        store.put_chunk("d", 2, blocks[2])
        v2 = store.commit("d")
        # float64 and float32 forms cast to the same bytes: both are no-ops, on either version's chunks
        for index in (0, 2):
            assert store.put_chunk("d", index, blocks[index]) == v2
            assert store.put_chunk("d", index, blocks[index].astype(np.float32)) == v2
        changed = blocks[0].copy()
        changed[4, 1] = np.nextafter(np.float32(changed[4, 1]), np.float32(np.inf))
        for index, rows, version in ((0, changed, 1), (2, blocks[0], 2), (1, blocks[1][:4], 1)):
            with pytest.raises(Conflict) as info:
                store.put_chunk("d", index, rows)
            assert info.value.field == "index"
            assert info.value.message == (
                f"chunk {index} of data set 'd' is part of committed version {version} and cannot "
                "change; append new rows with chunk index >= 3"
            )
        assert store.get("d") == v2
        expected = np.concatenate(blocks).astype(np.float32)
        assert store.open_array("d")[:].tobytes() == expected.tobytes()

    def test_commit_with_gap_after_a_version_names_indices(self, store):
        store.create("d", 2, "float64")
        self.upload(store, "d", 0, [np.zeros((1, 2)), np.ones((1, 2))])
        v1 = store.commit("d")
        for index in (4, 6):
            store.put_chunk("d", index, np.full((2, 2), index))
        with pytest.raises(Invalid) as info:
            store.commit("d")
        assert info.value.field == "chunks"
        assert info.value.message == (
            "missing chunk indices [2, 3, 5]; version 1 holds chunks 0..1, so appended chunks are "
            "numbered from 2 without gaps; upload them and commit again"
        )
        meta = store.get("d")
        assert (meta.version, meta.staged, meta.checksum) == (1, [4, 6], v1.checksum)
        for index in (2, 3, 5):
            store.put_chunk("d", index, np.full((1, 2), index))
        v2 = store.commit("d")
        assert (v2.version, v2.n_rows) == (2, 2 + 3 + 2 * 2)
        np.testing.assert_array_equal(store.open_array("d")[:, 0], [0, 1, 2, 3, 4, 4, 5, 6, 6])

    def test_commit_with_nothing_staged_is_a_noop(self, store, root):
        store.create("d", 2, "float32")
        store.put_chunk("d", 0, np.ones((3, 2)))
        v1 = store.commit("d")
        before = snapshot(root / "datasets" / "d" / "segments", with_root=False)
        assert store.commit("d") == v1
        assert store.commit("d") == v1
        assert snapshot(root / "datasets" / "d" / "segments", with_root=False) == before

    def test_open_array_spans_segments(self, store, rng):
        n_features = 4096  # float64: 32 rows per 1 MiB zarr chunk, so segment 1 ends in a partial chunk
        store.create("wide", n_features, "float64")
        parts = [rng.normal(size=(m, n_features)) for m in (40, 25, 30)]
        for version, part in enumerate(parts, start=1):
            store.put_chunk("wide", version - 1, part)
            assert store.commit("wide").version == version
        expected = np.concatenate(parts)
        rows = store.open_array("wide")
        assert rows.shape == (95, n_features) and rows.dtype == np.float64
        assert rows.chunks == (32, n_features) and store.get("wide").zarr_chunk_rows == 32
        for key in (slice(None), slice(35, 45), slice(39, 41), slice(40, 41), slice(0, 95), slice(30, 70),
                    slice(60, 66), slice(90, 200), slice(-10, None), slice(50, 50), slice(3, 90, 7),
                    slice(None, None, -9)):
            got = rows[key]
            assert isinstance(got, np.ndarray)
            assert got.tobytes() == expected[key].tobytes(), key
        for index in (0, 39, 40, 64, 65, 94, -1, -95):
            np.testing.assert_array_equal(rows[index], expected[index])
        assert rows[38:42, :].tobytes() == expected[38:42].tobytes()
        np.testing.assert_array_equal(rows[38:67, 5:7], expected[38:67, 5:7])
        np.testing.assert_array_equal(np.asarray(rows), expected)
        with pytest.raises(IndexError):
            rows[95]
        # a reader that walks the source in steps of its row chunk sees every row once
        step = rows.chunks[0]
        walked = np.concatenate([rows[a:a + step] for a in range(0, rows.shape[0], step)])
        assert walked.tobytes() == expected.tobytes()
        two = store.open_array("wide", version=2)
        assert two.shape == (65, n_features)
        assert two[30:65].tobytes() == expected[30:65].tobytes()
        with pytest.raises(ValueError, match="read-only"):
            rows[0:1] = 0.0
        assert store.open_array("wide")[0:1].tobytes() == expected[0:1].tobytes()

    def test_open_array_version_errors(self, store):
        store.create("d", 2, "float32")
        store.put_chunk("d", 0, np.ones((2, 2)))
        with pytest.raises(Conflict) as info:
            store.open_array("d", version=1)
        assert info.value.field == "dataset"
        store.commit("d")
        for version in (0, 2, -1):
            with pytest.raises(NotFound) as info:
                store.open_array("d", version=version)
            assert info.value.field == "version"
            assert info.value.message == f"data set 'd' has no version {version}; its only version is 1"
        for version in ("1", 1.0, True):
            with pytest.raises(Invalid) as info:
                store.open_array("d", version=version)
            assert info.value.field == "version"
        assert store.open_array("d", version=np.int64(1)).shape == (2, 2)

    def test_append_does_not_read_committed_rows(self, store, root, rng):
        # remove version 1's zarr chunk objects: an append that re-read them would fail or change the checksum
        store.create("d", 3, "float32")
        first = rng.normal(size=(10, 3)).astype(np.float32)
        store.put_chunk("d", 0, first)
        store.commit("d")
        shutil.rmtree(root / "datasets" / "d" / "segments" / "0001.zarr" / "c")
        added = rng.normal(size=(4, 3)).astype(np.float32)
        store.put_chunk("d", 1, added)
        v2 = store.commit("d")
        assert v2.checksum == version_checksum(first, added)
        assert store.open_array("d")[10:14].tobytes() == added.tobytes()

    def test_append_leaves_segment_1_untouched(self, store, root, rng):
        store.create("d", 3, "float64")
        store.put_chunk("d", 0, rng.normal(size=(8, 3)))
        store.commit("d")
        segments = root / "datasets" / "d" / "segments"
        before = snapshot(segments / "0001.zarr", with_root=False)
        store.put_chunk("d", 1, rng.normal(size=(8, 3)))
        store.commit("d")
        assert snapshot(segments / "0001.zarr", with_root=False) == before
        assert sorted(p.name for p in segments.iterdir()) == ["0001.json", "0001.zarr", "0002.json", "0002.zarr"]
        for doc_path in (segments / "0001.json", segments / "0002.json", root / "datasets" / "d" / "meta.json"):
            assert json.loads(doc_path.read_text())["schema_version"] == 1
        assert temp_leftovers(root) == []

    def test_concurrent_appends_then_commit(self, store, rng):
        store.create("d", 8, "float32")
        store.put_chunk("d", 0, rng.normal(size=(5, 8)))
        store.commit("d")
        blocks = {i: rng.normal(size=(3 + i, 8)) for i in range(1, 9)}
        errors = []
        start = threading.Barrier(len(blocks))

        def upload(index):
            try:
                start.wait()
                store.put_chunk("d", index, blocks[index])
                store.put_chunk("d", index, blocks[index])
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=upload, args=(i,)) for i in blocks]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert errors == []
        assert store.get("d").staged == list(range(1, 9))
        v2 = store.commit("d")
        assert v2.n_rows == 5 + sum(b.shape[0] for b in blocks.values())
        tail = np.concatenate([blocks[i] for i in range(1, 9)]).astype(np.float32)
        assert store.open_array("d")[5:].tobytes() == tail.tobytes()

    def test_leftovers_of_a_crashed_append_are_ignored(self, store, root, rng):
        store.create("d", 2, "float64")
        rows = rng.normal(size=(4, 2))
        store.put_chunk("d", 0, rows)
        staged_copy = root / "chunk0.npy"
        shutil.copy(root / "datasets" / "d" / "staging" / "000000.npy", staged_copy)
        v1 = store.commit("d")
        folder = root / "datasets" / "d"
        # the commit died after its commit point (staging still there) and another one before it
        (folder / "staging").mkdir()
        shutil.copy(staged_copy, folder / "staging" / "000000.npy")
        (folder / "segments" / "0002.zarr").mkdir()
        (folder / "segments" / ".0002.zarr.tmp-0badc0ffee00").mkdir()
        assert store.get("d") == v1  # the committed chunk 0 is not reported as staged
        added = rng.normal(size=(3, 2))
        store.put_chunk("d", 1, added)
        v2 = store.commit("d")
        assert (v2.version, v2.staged, v2.chunks) == (2, [], [0, 1])
        assert store.open_array("d")[:].tobytes() == np.concatenate([rows, added]).tobytes()
        assert not (folder / "staging").exists()
        assert temp_leftovers(root) == []


class TestLocalVersions(VersionsConformance):
    @pytest.fixture
    def store(self, root: Path) -> DatasetStore:
        return DatasetStore(root)


def test_open_set_reports_every_new_key(root):
    store = DatasetStore(root)
    meta = store.create("d", 3, "float32")
    assert set(meta.model_dump()) == {
        "name", "status", "n_features", "dtype", "n_rows", "chunks", "checksum", "zarr_chunk_rows",
        "created_at", "committed_at", "schema_version", "version", "versions", "staged", "source",
        "source_dtype", "corrupt_chunks", "damaged_staged", "error",
    }
    assert (meta.version, meta.versions, meta.staged, meta.source, meta.error) == (0, [], [], None, None)
    meta = store.put_chunk("d", 1, np.ones((2, 3)))
    assert (meta.chunks, meta.staged, meta.n_rows) == ([1], [1], 2)
    assert os.path.exists(root / "datasets" / "d" / "staging" / "000001.npy")
