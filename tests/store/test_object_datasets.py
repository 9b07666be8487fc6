"""Data sets on the object-store interface (issue 57): the data set conformance suite
(`test_store_datasets.DatasetStoreConformance`) on `ObjectDatasetStore` over a folder and over an S3 API on
loopback (moto's server), the tests of the folder's layout replaced by the same checks on the object layout, and
what only an object store does: racing commits, an upload racing a commit, verified chunks read once per process,
damage found and named, a store that stops answering."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from test_store_datasets import DatasetStoreConformance

from store.datasets.object_datasets import ObjectDatasetStore
from store.datasets.object_rows import CHUNK_CACHE, CachedRows, ChunkCache
from store.errors import Conflict, Corrupt, Invalid, NotFound
from store.objects.folder import FolderObjects
from store.objects.open import open_objects


class ObjectLayout:
    """The conformance tests that look at the folder layout, on the object layout instead."""

    def staged_version(self, store, name: str, index: int) -> tuple:
        chunk = [k for k in store.objects.keys(f"datasets/{name}/chunks/") if k.split("/")[3].startswith(f"{index:06d}.")]
        return (store.objects.version(f"datasets/{name}/staging/{index:06d}.claim"),
                *(store.objects.version(k) for k in chunk))

    def zarr_json(self, store, name: str) -> dict:
        import json

        key = next(k for k in store.objects.keys(f"datasets/{name}/chunks/") if k.endswith("/zarr.json"))
        return json.loads(store.objects.get(key).data)

    def staging_left(self, store, name: str) -> bool:
        return any(True for _ in store.objects.keys(f"datasets/{name}/staging/"))

    def test_no_temporary_files_left(self, store, rng):
        store.create("d", 3, "float32")
        store.put_chunk("d", 0, rng.normal(size=(5, 3)))
        store.put_chunk("d", 1, rng.normal(size=(5, 3)))
        store.commit("d")
        store.create("gone", 3, "float32")
        store.delete("gone")
        keys = list(store.objects.keys("datasets/"))
        assert not [k for k in keys if "/staging/" in k]
        assert not [k for k in keys if k.startswith("datasets/gone/")]
        assert [s.name for s in store.list()] == ["d"]

    def test_leftovers_of_crashes_are_ignored(self, store, rng):
        store.create("d", 3, "float64")
        rows = rng.normal(size=(5, 3))
        store.put_chunk("d", 0, rows)
        objects = store.objects
        # an upload of chunk 1 that died before its claim: an array no claim names; a claim left by a commit
        # that died after its record (an index below the committed count)
        objects.put(f"datasets/d/chunks/000001.{'de' * 32}.zarr/zarr.json", b"{}")
        assert store.get("d").chunks == [0]
        meta = store.commit("d")
        assert meta.chunks == [0] and meta.n_rows == 5
        objects.put("datasets/d/staging/000000.claim", b"{}")
        assert store.get("d").staged == [] and store.commit("d").version == 1
        assert store.open_array("d")[:].tobytes() == rows.tobytes()
        assert not [k for k in objects.keys("datasets/d/") if "/staging/" in k]
        store.delete("d")
        assert not list(objects.keys("datasets/d/"))

    def test_meta_document_on_disk(self, store):
        import json

        store.create("d", 3, "float32")
        meta = json.loads(store.objects.get("datasets/d/meta.json").data)
        assert meta["schema_version"] == 1
        assert {"name", "n_features", "dtype", "status", "n_rows", "checksum", "zarr_chunk_rows",
                "created_at", "committed_at"} <= set(meta)

    def test_nothing_written_outside_root(self, store):
        before = list(store.objects.keys())
        for bad in ("../escape", "a/b", "..", "/tmp/x"):
            with pytest.raises(Invalid):
                store.create(bad, 3, "float32")
        assert list(store.objects.keys()) == before

    # ------------------------------------------------------------- what only the object store does
    def test_racing_commits_one_version(self, store, rng):
        store.create("d", 4, "float64")
        chunks = [rng.normal(size=(7, 4)) for _ in range(3)]
        for index, rows in enumerate(chunks):
            store.put_chunk("d", index, rows)
        answers, barrier = [], threading.Barrier(4)

        def commit():
            barrier.wait()
            answers.append(store.commit("d"))

        threads = [threading.Thread(target=commit) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [a.version for a in answers] == [1] * 4
        assert {a.checksum for a in answers} == {answers[0].checksum}
        assert store.open_array("d")[:].tobytes() == np.concatenate(chunks).tobytes()
        assert len(store.get("d").versions) == 1 and not list(store.objects.keys("datasets/d/staging/"))

    def test_reupload_after_commit_with_other_rows_is_refused(self, store, rng):
        store.create("d", 2, "float32")
        store.put_chunk("d", 0, np.ones((3, 2)))
        store.commit("d")
        with pytest.raises(Conflict) as caught:
            store.put_chunk("d", 0, np.zeros((3, 2)))
        assert caught.value.field == "index"
        store.put_chunk("d", 0, np.ones((3, 2)))  # the same rows: a no-op
        assert store.get("d").staged == []

    def test_chunks_verified_once_then_served_from_the_cache(self, store, rng):
        store.create("d", 8, "float32")
        rows = rng.normal(size=(300, 8)).astype(np.float32)
        store.put_chunk("d", 0, rows)
        store.commit("d")
        CHUNK_CACHE.clear()
        source = store.open_array("d")
        assert isinstance(source, CachedRows)
        misses = CHUNK_CACHE.misses
        assert source[:].tobytes() == rows.tobytes()
        first = CHUNK_CACHE.misses - misses
        assert first >= 1
        hits = CHUNK_CACHE.hits
        assert source[10:250].tobytes() == rows[10:250].tobytes()
        assert CHUNK_CACHE.misses - misses == first and CHUNK_CACHE.hits > hits
        out = source[0:5]
        out[:] = 0  # a copy: the cache is not written through it
        assert store.open_array("d")[0:5].tobytes() == rows[0:5].tobytes()

    def test_damaged_chunk_is_named_and_marked(self, store, rng):
        store.create("d", 4, "float64")
        store.put_chunk("d", 0, rng.normal(size=(6, 4)))
        store.put_chunk("d", 1, rng.normal(size=(6, 4)))
        store.commit("d")
        import zarr

        meta = store.get("d")
        location = sorted(k for k in store.objects.keys("datasets/d/chunks/") if k.endswith("zarr.json"))[0]
        folder = location[len("datasets/d/"):-len("/zarr.json")]
        writable = zarr.open_array(store.objects.zarr_store("datasets/d/" + folder, read_only=False), mode="r+")
        writable[2, 1] = 99.0  # chunk 0's stored rows altered behind the store's back (a valid chunk, other rows)
        CHUNK_CACHE.clear()
        from store.datasets import object_segments

        object_segments._OPENED.clear()
        with pytest.raises(Corrupt) as caught:
            store.open_array("d")[:]
        assert caught.value.chunks == [0]  # the upload chunk whose rows are the damaged zarr chunk's
        assert store.get("d").corrupt_chunks == [0] and store.get("d").status == "corrupt"
        assert store.verify("d") == {"ok": False, "version": meta.version, "chunks_checked": 2,
                                     "corrupt_chunks": [0]}

    def test_a_staged_chunk_whose_rows_are_gone_is_named_and_replaced_by_the_next_upload(self, store, rng):
        store.create("d", 2, "float64")
        store.put_chunk("d", 0, np.ones((3, 2)))
        staged = [k for k in store.objects.keys("datasets/d/chunks/") if k.endswith(".json")]
        store.objects.delete_many(staged)  # its rows lost in the store before the commit
        with pytest.raises(Invalid) as caught:
            store.commit("d")
        assert caught.value.field == "chunks" and "chunk 0" in str(caught.value) and "upload chunk 0 again" in \
            str(caught.value)
        store.put_chunk("d", 0, np.zeros((4, 2)))  # other rows: the claim named rows that are gone
        assert store.commit("d").n_rows == 4
        assert store.open_array("d")[:].tobytes() == np.zeros((4, 2)).tobytes()

    def test_register_is_refused_with_what_to_do(self, store):
        with pytest.raises(Invalid) as caught:
            store.register("r", "/tmp/anything.zarr")
        assert caught.value.field == "source" and "upload" in str(caught.value)

    def test_delete_marker_blocks_a_create_until_stale(self, store):
        import json
        import time

        store.objects.put("datasets/x/deleting", json.dumps({"started": time.time()}).encode())
        with pytest.raises(Conflict, match="being deleted"):
            store.create("x", 2, "float32")
        store.objects.put("datasets/x/deleting", json.dumps({"started": time.time() - 3600}).encode())
        assert store.create("x", 2, "float32").status == "open"
        with pytest.raises(NotFound):
            store.delete("never")


class TestObjectDatasetStoreOnFolder(ObjectLayout, DatasetStoreConformance):
    @pytest.fixture
    def store(self, root):
        return ObjectDatasetStore(FolderObjects(root))


class TestObjectDatasetStoreOnS3(ObjectLayout, DatasetStoreConformance):
    @pytest.fixture
    def store(self, s3_url):
        return ObjectDatasetStore(open_objects(s3_url))

    def test_commit_streams_chunk_by_chunk(self, store, rng):
        """moto keeps its objects in this process, where tracemalloc counts them (the 16 MiB staged and the 16
        MiB committed): the memory bound is checked on the folder (the same commit code); here, that the
        16-chunk commit is whole."""
        store.create("big", 256, "float64")
        blocks = [rng.normal(size=(512, 256)) for _ in range(16)]
        for index, block in enumerate(blocks):
            store.put_chunk("big", index, block)
        assert store.commit("big").n_rows == 16 * 512
        assert store.open_array("big")[4000:4100].tobytes() == np.concatenate(blocks)[4000:4100].tobytes()

    def test_store_that_stops_answering_is_not_damage(self, store, s3_server, rng, monkeypatch):
        from store.objects.interface import StoreUnavailable
        from store.objects.s3 import S3Objects

        store.create("d", 4, "float64")
        store.put_chunk("d", 0, rng.normal(size=(6, 4)))
        store.commit("d")
        impatient = ObjectDatasetStore(S3Objects(store.objects.url, retry_seconds=0.5))
        source = impatient.open_array("d")
        CHUNK_CACHE.clear()
        s3_server.stop()
        try:
            with pytest.raises(StoreUnavailable):
                source[:]
        finally:
            s3_server.start()
        assert store.get("d").corrupt_chunks == []
        assert source[:].shape == (6, 4)


def test_chunk_cache_keeps_within_its_budget():
    cache = ChunkCache(3000)
    for number in range(5):
        cache.put(("s", number), np.zeros(100, dtype=np.float64))  # 800 bytes each
    assert cache.held <= 3000 and cache.get(("s", 0)) is None and cache.get(("s", 4)) is not None
    cache.put(("big", 0), np.zeros(1000))  # larger than the budget: not kept
    assert cache.get(("big", 0)) is None
    with pytest.raises(ValueError):
        cache.get(("s", 4))[0] = 1.0  # kept arrays are read-only


def test_recent_descriptions_are_answered_again_for_recent_s_and_own_writes_at_once(tmp_path):
    """The API's data set store (``recent_s``) answers from its last description for recent_s: another process's
    upload shows once that has passed, its own at once."""
    now = [0.0]
    objects = FolderObjects(tmp_path)
    api, worker = ObjectDatasetStore(objects, recent_s=0.5, clock=lambda: now[0]), ObjectDatasetStore(objects)
    api.create("d", 2, "float32")
    assert api.put_chunk("d", 0, np.ones((3, 2))).staged == [0]
    worker.put_chunk("d", 1, np.ones((3, 2)))
    assert api.get("d").staged == [0]
    now[0] += 0.5
    assert api.get("d").staged == [0, 1]
    assert api.commit("d").status == "ready" and api.get("d").status == "ready"
    api.delete("d")
    with pytest.raises(NotFound):
        api.get("d")
