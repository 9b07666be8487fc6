"""Damaged records are quarantined on read (`store.quarantine`, issue 52): every record kind (a data set's
``meta.json``, a model's and a clustering's record, an image job's) x every damage (`tests.damage`) makes
only its own resource unreadable: reading it is a `Damaged` naming the file, the listing shows it as
corrupt (or skips it, `JobRegistry.list`), the other resource of its kind reads as before, another store
of the same folder (a restart) finds the same, and deleting it works."""

from __future__ import annotations

import numpy as np
import pytest

from store import ClusteringRegistry, DatasetStore, ModelRegistry, NotFound
from store.atomic import DIGEST_KEY, atomic_write_json, document_digest, read_json
from store.errors import Damaged
from store.image_jobs import ImageJobStore
from store.jobs.checkpoints import CheckpointStore
from store.jobs.clusterings import ClusteringRecord
from store.jobs.records import ModelRecord
from store.quarantine import DamagedEntry
from tests.damage import DAMAGES, damage

KERNEL = {"type": "gaussian", "sigma": 2.0}


def model(registry, name):
    registry.create(ModelRecord(name=name, dataset="d", solver="kha", kernel=KERNEL, n_components=2))
    CheckpointStore.of(registry).save(name, 1, {"A": np.ones((2, 3))})  # a file besides its record


def clustering(registry, name):
    registry.create(ClusteringRecord(name=name, dataset="d", solver="exact", kernel=KERNEL, n_clusters=2))
    registry.save_labels(name, np.zeros(5))


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("kind", ["model", "clustering"])
def test_a_damaged_job_record_is_quarantined(root, kind, how):
    registry_type, make = {"model": (ModelRegistry, model), "clustering": (ClusteringRegistry, clustering)}[kind]
    registry = registry_type(root)
    make(registry, "hit")
    make(registry, "fine")
    registry.get("hit")  # kept by the process: the damage must still be seen
    damage(root / registry.kind_folder / "hit" / registry.document, how)
    for store in (registry, registry_type(root)):  # this process, and as after a restart
        with pytest.raises(Damaged, match=registry.document) as raised:
            store.get("hit")
        assert (raised.value.code, raised.value.field) == ("corrupt", "name")
        assert [r.name for r in store.list()] == ["fine"]
        entries = store.entries()
        assert isinstance(entries[1], DamagedEntry) and entries[1].name == "hit" and entries[1].status == "corrupt"
        assert store.get("fine").status == "queued" and store.exists("hit")
    registry.delete("hit")
    assert not registry.exists("hit") and [r.name for r in registry.entries()] == ["fine"]
    with pytest.raises(NotFound):
        registry.get("hit")
    make(registry, "hit")  # the name is free again
    assert registry.get("hit").status == "queued"


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_meta_json_is_quarantined(root, rng, how):
    store = DatasetStore(root)
    for name in ("hit", "fine"):
        store.create(name, 2, "float64")
        store.put_chunk(name, 0, rng.normal(size=(4, 2)))
        store.commit(name)
    damage(root / "datasets" / "hit" / "meta.json", how)
    for again in (store, DatasetStore(root)):
        with pytest.raises(Damaged, match="meta.json"):
            again.get("hit")
        with pytest.raises(Damaged, match="meta.json"):
            again.open_array("hit")
        listed = {m.name: m for m in again.list()}
        assert listed["hit"].status == "corrupt" and listed["fine"].status == "ready"
        assert again.exists("hit")
    store.delete("hit")
    assert not store.exists("hit") and [m.name for m in store.list()] == ["fine"]


@pytest.mark.parametrize("how", [d for d in DAMAGES if d != "deleted"])
def test_a_damaged_image_job_record_is_quarantined_and_replaced_by_a_new_run(root, how):
    jobs = ImageJobStore(root)
    jobs.start("hit", "denoise-image")
    jobs.start("fine", "denoise-image")
    damage(root / "image-jobs" / "hit" / "job.json", how)
    with pytest.raises(Damaged, match="job.json") as raised:
        ImageJobStore(root).get("hit")
    assert raised.value.field == "job"
    assert jobs.get("fine").status == "running"
    if how == "folder":
        jobs.delete("hit")
    assert jobs.start("hit", "denoise-image").status == "running"  # a new request takes the name


def test_a_deleted_image_job_record_is_not_found(root):
    """An image job is its record alone: without it there is nothing left to be damaged."""
    jobs = ImageJobStore(root)
    jobs.start("hit", "denoise-image")
    damage(root / "image-jobs" / "hit" / "job.json", "deleted")
    with pytest.raises(NotFound):
        jobs.get("hit")


def test_a_record_without_files_beside_it_is_absent_not_damaged(root):
    """A job folder left with nothing but its lock (a create that died before its record) is no job."""
    registry = ModelRegistry(root)
    registry.create(ModelRecord(name="m", dataset="d", solver="kha", kernel=KERNEL, n_components=2))
    damage(root / "models" / "m" / "model.json", "deleted")
    with pytest.raises(NotFound):
        registry.get("m")
    assert registry.entries() == [] and not registry.exists("m")


def test_every_document_carries_its_digest_and_an_older_one_without_it_is_read(root):
    path = root / "doc.json"
    atomic_write_json(path, {"schema_version": 1, "x": [1.5, 2], "n": np.int64(3)})
    stored = read_json(path)
    assert stored == {"schema_version": 1, "x": [1.5, 2], "n": 3}
    doc = {"schema_version": 1, "x": [1.5, 2], "n": 3}
    assert path.read_text().count(document_digest(doc)) == 1
    path.write_text('{"schema_version": 1, "x": [1.5, 2], "n": 4}')  # as written before digests: unchecked
    assert read_json(path)["n"] == 4
    path.write_text('{"schema_version": 1, "x": [1.5, 2], "n": 4, "%s": "%s"}' % (DIGEST_KEY, document_digest(doc)))
    with pytest.raises(ValueError, match="digest"):
        read_json(path)


@pytest.mark.parametrize("how", DAMAGES)
def test_damaged_labels_of_a_completed_clustering_are_refused_naming_their_file(root, how):
    registry = ClusteringRegistry(root)
    registry.create(ClusteringRecord(name="c", dataset="d", solver="exact", kernel=KERNEL, n_clusters=2))
    digest = registry.save_labels("c", np.arange(40) % 2)
    assert registry.labels("c", 0, 5, digest) == ([0, 1, 0, 1, 0], 40)
    damage(root / "clusterings" / "c" / "labels.npy", how)
    with pytest.raises(Damaged, match="labels.npy") as raised:
        registry.labels("c", 0, 5, digest)
    assert raised.value.field == "name" and "DELETE /v1/clusterings/c" in raised.value.message
    registry.delete("c")
    assert not registry.exists("c")
