"""The typed ``meta.json`` (`DatasetRecord`) keeps the on-disk layout of the dicts it replaced (plus the
digest every stored document now carries, `store.atomic.DIGEST_KEY`, which older code ignores): documents
written by older code load and are written back key for key; a damaged document lists the set as corrupt
and the set can still be deleted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import zarr

from store import DatasetInfo, DatasetRecord, DatasetStore, NotFound
from store.atomic import DIGEST_KEY, read_json
from store.errors import Damaged
from store.datasets.records import SegmentDigests
from store.folders import ResourceFolders
from store.datasets.repair import mark

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LEGACY_SETS = [FIXTURES / "legacy_v1" / "data" / "datasets" / "digits",
               FIXTURES / "legacy_v2" / "data" / "datasets" / "digits"]
META_KEYS = {"schema_version", "name", "n_features", "dtype", "status", "version", "n_rows", "checksum",
             "zarr_chunk_rows", "created_at", "committed_at", "source", "source_dtype", "segments", "versions"}
SEGMENT_KEYS = {"segment", "location", "external", "first_chunk", "n_chunks", "first_row", "n_rows",
                "chunk_rows", "digests"}
VERSION_KEYS = {"version", "segments", "n_rows", "n_chunks", "checksum", "committed_at"}


def on_disk(root: Path, name: str) -> dict:
    return json.loads((root / "datasets" / name / "meta.json").read_text())


def assert_layout(doc: dict) -> None:
    assert set(doc) in (META_KEYS | {DIGEST_KEY}, META_KEYS | {"corrupt", DIGEST_KEY})
    assert all(set(s) == SEGMENT_KEYS for s in doc["segments"])
    assert all(set(v) == VERSION_KEYS for v in doc["versions"])


@pytest.mark.parametrize("folder", LEGACY_SETS, ids=["legacy_v1", "legacy_v2"])
def test_documents_written_by_older_code_load_and_are_written_back_unchanged(folder):
    doc = read_json(folder / "meta.json")
    record = DatasetRecord.model_validate(doc)
    assert record.document() == doc
    assert record.status == "ready" and record.committed_chunks == record.versions[-1].n_chunks
    for segment in record.segments:
        digests = read_json(folder / segment.digests)
        assert segment.read_digests(folder).document() == digests


def test_what_the_store_writes_has_the_old_keys(root, rng):
    store = DatasetStore(root)
    store.create("d", 3, "float32")
    assert_layout(on_disk(root, "d"))
    assert (on_disk(root, "d")["status"], on_disk(root, "d")["versions"]) == ("open", [])
    for index in range(2):
        store.put_chunk("d", index, rng.normal(size=(5, 3)))
        store.commit("d")
    doc = on_disk(root, "d")
    assert_layout(doc)
    assert "corrupt" not in doc
    assert [v["segments"] for v in doc["versions"]] == [[1], [1, 2]]
    assert [(s["first_chunk"], s["first_row"], s["n_rows"]) for s in doc["segments"]] == [(0, 0, 5), (1, 5, 5)]
    assert doc["n_rows"] == 10 and doc["version"] == 2 and doc["versions"][-1]["checksum"] == doc["checksum"]
    digests = read_json(root / "datasets" / "d" / "segments" / "0002.json")
    assert set(digests) == {"schema_version", "segment", "first_chunk", "chunk_sha256", "chunk_rows",
                            "zarr_chunk_sha256", "zarr_json_sha256"}

    folders = ResourceFolders(root, "datasets", "dataset")
    mark(folders, "d", add=[1])
    assert on_disk(root, "d")["corrupt"] == [1] and store.get("d").status == "corrupt"
    mark(folders, "d", clear=[1])
    assert "corrupt" not in on_disk(root, "d") and store.get("d").status == "ready"


def test_a_registered_set_records_its_source(root, tmp_path):
    url = str(tmp_path / "array.zarr")
    zarr.create_array(store=url, shape=(6, 2), chunks=(4, 2), dtype="int16")[:] = np.arange(12).reshape(6, 2)
    DatasetStore(root).register("ext", url)
    doc = on_disk(root, "ext")
    assert_layout(doc)
    assert (doc["source"], doc["source_dtype"], doc["dtype"]) == (
        {"zarr": url, "resolved": os.path.realpath(url)}, "int16", "float64")
    assert [(s["external"], s["location"], s["n_chunks"]) for s in doc["segments"]] == [(True, url, 2)]
    assert "zarr_chunk_sha256" not in read_json(root / "datasets" / "ext" / doc["segments"][0]["digests"])


def test_the_public_view_is_typed(root, rng):
    store = DatasetStore(root)
    store.create("d", 2, "float64")
    store.put_chunk("d", 0, rng.normal(size=(3, 2)))
    first = store.commit("d")
    store.put_chunk("d", 1, rng.normal(size=(4, 2)))
    staged = store.get("d")
    assert isinstance(staged, DatasetInfo) and store.ready("d") == staged and store.list() == [staged]
    assert (staged.version, staged.n_rows, staged.chunks, staged.staged) == (1, 3, [0], [1])
    assert staged.versions == first.versions and staged.versions[0].n_chunks == 1
    assert not hasattr(staged.versions[0], "segments")  # the public view keeps the segments to itself


@pytest.mark.parametrize("damage", ["unparseable", "missing key", "wrong type", "newer schema"])
def test_a_damaged_meta_json_is_listed_as_corrupt_and_can_be_deleted(root, damage):
    store = DatasetStore(root)
    store.create("bad", 3, "float32")
    store.create("fine", 3, "float32")
    path = root / "datasets" / "bad" / "meta.json"
    doc = json.loads(path.read_text())
    if damage == "unparseable":
        path.write_text(path.read_text()[:-20])
    else:
        doc.update({"missing key": {}, "wrong type": {"n_features": "three"},
                    "newer schema": {"schema_version": 2}}[damage])
        if damage == "missing key":
            del doc["status"]
        path.write_text(json.dumps(doc))
    listed = {m.name: m for m in store.list()}
    assert listed["fine"].status == "open"
    assert (listed["bad"].status, listed["bad"].n_features, listed["bad"].dtype) == ("corrupt", 0, "unknown")
    assert listed["bad"].error.startswith("its metadata cannot be read (")
    assert listed["bad"].error.endswith("; delete the data set")
    with pytest.raises(Damaged, match="meta.json") as refused:  # a 409 corrupt, not a 500
        store.get("bad")
    assert (refused.value.code, refused.value.field) == ("corrupt", "name")
    assert store.exists("bad")
    store.delete("bad")
    assert not store.exists("bad") and [m.name for m in store.list()] == ["fine"]
    with pytest.raises(NotFound):
        store.delete("bad")


def test_a_damaged_digest_document_is_refused_naming_its_file(root, rng):
    store = DatasetStore(root)
    store.create("d", 2, "float64")
    store.put_chunk("d", 0, rng.normal(size=(3, 2)))
    store.commit("d")
    path = root / "datasets" / "d" / "segments" / "0001.json"
    doc = json.loads(path.read_text())
    del doc["chunk_sha256"]
    path.write_text(json.dumps(doc))
    record = DatasetRecord.read(ResourceFolders(root, "datasets", "dataset"), "d")
    with pytest.raises(ValueError, match="0001.json"):
        record.segments[0].read_digests(root / "datasets" / "d")
    assert SegmentDigests(segment=1, first_chunk=0, chunk_sha256=["a"], chunk_rows=[3]).document() == {
        "schema_version": 1, "segment": 1, "first_chunk": 0, "chunk_sha256": ["a"], "chunk_rows": [3]}


def test_n_features_reads_only_the_meta_json(root, rng):
    """`DatasetStore.n_features` (the upload's check before it reads a body) answers as `get` does, and
    its errors are `get`'s: NotFound, and Damaged for an unreadable meta.json."""
    store = DatasetStore(root)
    store.create("d", 3, "float32")
    store.put_chunk("d", 0, rng.normal(size=(4, 3)))
    assert store.n_features("d") == store.get("d").n_features == 3
    with pytest.raises(NotFound):
        store.n_features("none")
    path = root / "datasets" / "d" / "meta.json"
    path.write_text(path.read_text()[:-20])
    with pytest.raises(Damaged, match="meta.json"):
        store.n_features("d")


def test_get_reads_the_meta_json_again_only_when_it_changed_while_listing(root, rng, monkeypatch):
    """`DatasetStore.get` lists the staged chunks between two looks at meta.json: the same file (a
    ``stat``) is read once; one written meanwhile (a commit) is read again, and its new version makes
    the listing be taken again."""
    from store.datasets import dataset_store, records

    store = DatasetStore(root)
    store.create("d", 3, "float32")
    store.put_chunk("d", 0, rng.normal(size=(4, 3)))
    reads = []
    real_read = records.DatasetRecord.read.__func__
    monkeypatch.setattr(records.DatasetRecord, "read", classmethod(
        lambda cls, folders, name: reads.append(name) or real_read(cls, folders, name)))
    assert store.get("d").staged == [0] and reads == ["d"]

    listings = []
    real_staged = dataset_store.staged_rows

    def commit_during_first_listing(folder):
        listed = real_staged(folder)
        if not listings:
            monkeypatch.setattr(dataset_store, "staged_rows", real_staged)
            store.commit("d")
        listings.append(listed)
        return listed

    reads.clear()
    monkeypatch.setattr(dataset_store, "staged_rows", commit_during_first_listing)
    described = store.get("d")
    assert (described.status, described.version, described.staged, described.n_rows) == ("ready", 1, [], 4)
    assert len(listings) == 1  # the second listing ran the real staged_rows, after the commit
