"""`workers.archive`: the serving check of an imported model archive (a served model built from the
archive's checkpoint, one row projected) and the import that runs it before the store creates anything."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from store import CheckpointStore, DatasetStore, ModelRegistry
from store.jobs.archive import CHECKPOINT, MEMBERS, RECORD, ModelExport
from store.errors import Invalid
from store.jobs.records import ModelRecord
from tests.store.store_helpers import all_files, build, members, regular, with_manifest_digests, write_archive
from workers.archive import check_served, import_model
from workers.fit import FitJob
from workers.serve import project_rows


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> tuple[Path, np.ndarray]:
    """A data folder with model ``m`` (KHA-SMD, 3 components, 2 passes) completed on data set ``d``
    (120 rows of 5 features in two chunks), fitted in this process; and the rows."""
    root = tmp_path_factory.mktemp("source")
    rows = np.random.default_rng(20240601).normal(size=(120, 5))
    datasets = DatasetStore(root)
    datasets.create("d", 5, "float64")
    datasets.put_chunk("d", 0, rows[:60])
    datasets.put_chunk("d", 1, rows[60:])
    datasets.commit("d")
    ModelRegistry(root).create(ModelRecord.new("m", datasets.get("d"), kernel={"type": "gaussian", "sigma": 3.0},
                                               n_components=3, solver="kha-smd", params={"passes": 2, "seed": 0}))
    assert FitJob(root).run("m") == "completed"
    return root, rows


@pytest.fixture(scope="module")
def archive(fitted, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("archive") / "m.tar"
    write_archive(ModelExport(fitted[0], "m"), path)
    return path


def test_the_served_checkpoint_passes_and_another_record_does_not(fitted):
    root, rows = fitted
    record = ModelRegistry(root).get("m")
    state = CheckpointStore(root).load("m")
    check_served(state, record, rows)  # no error
    with pytest.raises(ValueError, match=f"{CHECKPOINT} serves 3 components, {RECORD} says 2"):
        check_served(state, record.model_copy(update={"n_components": 2}), rows)
    with pytest.raises(ValueError, match=f"{CHECKPOINT} does not serve {RECORD}"):
        check_served(state, record, rows[:100])  # fewer rows than the checkpoint's expansion


def test_an_imported_model_serves_as_the_original(fitted, archive, tmp_path, rng):
    source, _ = fitted
    record = import_model(tmp_path, archive, name="copy", dataset="rows")
    assert (record.name, record.status) == ("copy", "completed")
    X = rng.normal(size=(4, 5))
    np.testing.assert_allclose(project_rows(str(tmp_path), "copy", X), project_rows(str(source), "m", X),
                               rtol=0, atol=1e-12)


def test_another_models_checkpoint_is_refused_before_anything_is_created(archive, tmp_path):
    """The record rewritten to 2 components (digests in the manifest made to match): the checkpoint
    serves 3, so the import is refused on ``body`` naming the checkpoint, and no file is left."""
    content = members(archive)
    record = json.loads(content[RECORD])
    record["n_components"] = 2
    content = with_manifest_digests(dict(content, **{RECORD: json.dumps(record).encode()}))
    root = tmp_path / "root"
    root.mkdir()
    with pytest.raises(Invalid) as caught:
        import_model(root, build(tmp_path / "r.tar", [regular(n, content[n]) for n in MEMBERS]))
    assert caught.value.field == "body" and CHECKPOINT in caught.value.message
    assert all_files(root) <= {".imports"}
    assert not DatasetStore(root).list() and not ModelRegistry(root).list()
