"""The clustering registry: records beside the models' (one job registry, `store.jobs.registry`), the reference
labels checked at creation naming the field, labels written atomically and read a page at a time."""

from __future__ import annotations

import numpy as np
import pytest
from store_helpers import temp_leftovers

from store import (
    CheckpointStore,
    ClusteringRecord,
    ClusteringRegistry,
    Conflict,
    DatasetInfo,
    Invalid,
    ModelRegistry,
    NotFound,
)
from store.errors import Damaged
from store.jobs.clusterings import ClusteringPassRecord
from store.jobs.records import Convergence, ModelRecord, Progress

DATASET = DatasetInfo(name="blobs", status="ready", n_rows=90, n_features=4, dtype="float64", version=1, checksum="abc")
LABELS = DatasetInfo(name="truth", status="ready", n_rows=90, n_features=1, dtype="float64", version=2)


def new(name="c", labels=LABELS, **changes):
    asked = {"kernel": {"type": "gaussian", "sigma": 2.0}, "n_clusters": 3, "solver": "kha-smd",
             "params": {"passes": 3, "seed": 1}, **changes}
    return ClusteringRecord.new(name, DATASET, labels, **asked)


def test_records_beside_the_models(root):
    clusterings, models = ClusteringRegistry(root), ModelRegistry(root)
    created = clusterings.create(new())
    assert created.schema_version == 3 and created.status == "queued" and created.n_components == 3
    assert (created.dataset, created.dataset_version, created.n_rows) == ("blobs", 1, 90)
    assert (created.labels_dataset, created.labels_dataset_version) == ("truth", 2)
    assert (root / "clusterings" / "c" / "clustering.json").is_file()
    models.create(ModelRecord(name="c", dataset="blobs", kernel={"type": "linear"}, n_components=2, solver="kha"))
    assert [r.name for r in clusterings.list()] == ["c"] and isinstance(clusterings.get("c"), ClusteringRecord)
    with pytest.raises(Conflict):
        clusterings.create(new())
    with pytest.raises(NotFound) as info:
        clusterings.get("absent")
    assert info.value.message == "clustering 'absent' not found"
    figure = Convergence(metric="excess_error", value=0.1)
    updated = clusterings.update("c", status="running", history=[ClusteringPassRecord(
        pass_=1, elapsed_s=0.1, convergence=figure, eigenvalues=[1.0, 0.9, 0.8], variation_of_information=0.0)])
    assert clusterings.get("c") == updated and updated.history[0].labels_change is None
    with pytest.raises(Invalid):
        clusterings.update("c", n_components=4)  # a property, not a field
    assert CheckpointStore.of(clusterings).save("c", 1, {"x": np.ones(2)})["pass"] == 1
    assert (root / "clusterings" / "c" / "checkpoints" / "pass-00001.npz").is_file()
    assert CheckpointStore(root).latest_pass("c") is None  # the model's checkpoints are its own


def test_labels_are_written_atomically_and_paged(root, rng):
    registry = ClusteringRegistry(root)
    registry.create(new())
    with pytest.raises(NotFound) as info:
        registry.labels("c")
    assert info.value.field == "name" and "completes" in info.value.message
    labels = rng.integers(0, 3, size=90)
    registry.save_labels("c", labels)
    assert registry.labels("c") == (labels.tolist(), 90)
    assert registry.labels("c", 80, 25) == (labels[80:].tolist(), 90)
    assert registry.labels("c", 90, 10) == ([], 90)
    with pytest.raises(Invalid) as info:
        registry.labels("c", 91)
    assert info.value.field == "labels_offset"
    assert temp_leftovers(root) == []
    registry.delete("c")
    with pytest.raises(NotFound):
        registry.save_labels("c", labels)
    (root / "clusterings" / "c").mkdir()
    np.save(root / "clusterings" / "c" / "labels.npy", labels)  # left by an earlier clustering of that name
    registry.create(new())
    with pytest.raises(NotFound):
        registry.labels("c")


def test_coordinates_are_kept_checked_and_damage_is_said(root, rng):
    """The rows' two spectral coordinates a clustering's picture draws (issue 58): written atomically, read back
    against their digest; altered, truncated or missing, a `Damaged` naming the file and what to do."""
    registry = ClusteringRegistry(root)
    registry.create(new())
    xy = rng.normal(size=(90, 2))
    digest = registry.save_coordinates("c", xy)
    np.testing.assert_array_equal(registry.coordinates("c", digest), xy.astype(np.float32))
    with pytest.raises(ValueError, match="rows, 2"):
        registry.save_coordinates("c", xy[:, :1])
    path = root / "clusterings" / "c" / "coordinates.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x40  # one bit of the last value
    path.write_bytes(bytes(data))
    with pytest.raises(Damaged, match="coordinates.npy.*does not match its digest.*DELETE /v1/clusterings/c"):
        registry.coordinates("c", digest)
    path.unlink()
    with pytest.raises(Damaged, match="it is missing"):
        registry.coordinates("c", digest)


@pytest.mark.parametrize("labels", [LABELS.model_copy(update={"n_rows": 89}),
                                    LABELS.model_copy(update={"n_features": 2})])
def test_reference_labels_are_one_column_a_row_per_row(labels):
    with pytest.raises(Invalid) as info:
        new(labels=labels)
    assert info.value.field == "labels_dataset"


def test_resume_speaks_of_clusterings():
    progress = Progress(pass_=3, passes=3, t=270, fraction=1.0, elapsed_s=1.0, remaining_s=0.0,
                        eigenvalues=[1.0, 0.9, 0.8], convergence=Convergence(metric="excess_error", value=0.01))
    done = new(labels=None).model_copy(update={"status": "completed", "progress": progress})
    with pytest.raises(Conflict) as info:
        done.resumed(None)
    assert "clustering 'c' completed all 3 passes" in info.value.message
    assert done.resumed(5)["params"]["passes"] == 5
    with pytest.raises(Conflict) as info:
        new(labels=None, solver="exact", params={}).model_copy(update={"status": "completed"}).resumed(2)
    assert "exact clustering is fit in one go" in info.value.message
