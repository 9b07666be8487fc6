"""A full disk while each kind of stored file is written (the write half of the matrix of docs/security.md,
issue 52): the write runs in a child whose files may not grow past a few bytes (`RLIMIT_FSIZE`, the
kernel's EFBIG, which the service answers as it answers ENOSPC: a 507), and afterwards every file is as
before, no temporary file is left, and the readers see the state before the write, never a half-written
file. The data set writes (a chunk, a commit) and a checkpoint's are in tests/store/test_faults.py; these
are the others."""

from __future__ import annotations

import numpy as np
import pytest

from store import ClusteringRegistry, DatasetStore, ModelRegistry, NotFound
from store.image_jobs import ImageJobStore
from store.jobs.checkpoints import CheckpointStore
from store.jobs.clusterings import ClusteringRecord
from store.jobs.records import ModelRecord
from tests.store.store_helpers import temp_leftovers
from tests.store.test_faults import assert_disk_full, run_limited, state_of

TINY = 64  # bytes: smaller than every file written here
KERNEL = {"type": "gaussian", "sigma": 2.0}


def model(name: str) -> ModelRecord:
    return ModelRecord(name=name, dataset="d", solver="kha", kernel=KERNEL, n_components=2)


@pytest.fixture
def world(root):
    """A model with a checkpoint, a clustering with its labels, an image job: written without a limit."""
    registry = ModelRegistry(root)
    registry.create(model("m"))
    CheckpointStore(root).save("m", 1, {"A": np.ones((2, 8))})
    clusterings = ClusteringRegistry(root)
    clusterings.create(ClusteringRecord(name="c", dataset="d", solver="exact", kernel=KERNEL, n_clusters=2))
    ImageJobStore(root).start("j", "denoise-image")
    return root


def readers(root) -> dict:
    """What a reader of every resource sees."""
    def labels():
        try:
            return ClusteringRegistry(root).labels("c")
        except NotFound:
            return None

    return {"datasets": [d.name for d in DatasetStore(root).list()],
            "models": [r.document() for r in ModelRegistry(root).list()],
            "checkpoints": [c["pass"] for c in CheckpointStore(root).list("m")],
            "labels": labels(), "job": ImageJobStore(root).get("j").model_dump()}


WRITES = {
    "data set meta.json (create)": lambda r: DatasetStore(r).create("new", 3, "float32"),
    "model record (create)": lambda r: ModelRegistry(r).create(model("new")),
    "model record (update)": lambda r: ModelRegistry(r).update("m", status="running"),
    "sharded checkpoint part": lambda r: CheckpointStore(r).save_part("m", 2, 0, 4, {"A": np.ones((2, 4))}),
    "clustering labels": lambda r: ClusteringRegistry(r).save_labels("c", np.zeros(100)),
    "image job record (start)": lambda r: ImageJobStore(r).start("new", "denoise-image"),
    "image job record (update)": lambda r: ImageJobStore(r).update("j", phase="tuning", done=1, total=9),
}


def files_of(root) -> dict:
    """Every file's (size, mtime) but the empty locks a claim makes in a new folder (hidden, and a folder
    without its record is no resource)."""
    return {path: info for path, info in state_of(root)[0].items() if not path.rsplit("/", 1)[-1] == ".lock"}


@pytest.mark.parametrize("write", list(WRITES))
def test_a_full_disk_during_each_kind_of_write_leaves_everything_as_before(world, write):
    files = files_of(world)
    before = readers(world)
    assert_disk_full(run_limited(world, WRITES[write], limit=TINY))
    assert files_of(world) == files
    assert readers(world) == before
    assert not temp_leftovers(world)
