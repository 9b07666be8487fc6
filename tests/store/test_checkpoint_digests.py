"""Checkpoints carry digests (issue 30, item 5): every member is checked on read, a file is checked against
the digest a record names, a sharded manifest's digest covers its parts, damage is `DamagedCheckpoint`
(a 409 ``corrupt``, still a ValueError), `latest_intact` skips damaged passes, and records of version 3
name the pass they completed with when migrated."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from store.objects.folder import FolderObjects
from store import CheckpointStore
from store.errors import DamagedCheckpoint, NotFound
from store.jobs.records import ModelRecord, migrate


@pytest.fixture(params=["folder", "objects"])
def checkpoints(root: Path, request) -> CheckpointStore:
    """The data folder's checkpoints, and the same files kept through the object-store interface over the same
    folder (`CheckpointStore.on_objects` on `FolderObjects`: one file per object, the same layout; issue 57)."""
    if request.param == "objects":
        return CheckpointStore.on_objects(FolderObjects(root))
    return CheckpointStore(root)


def path_of(root: Path, pass_index: int) -> Path:
    return root / "models" / "m" / "checkpoints" / f"pass-{pass_index:05d}.npz"


def flip(path: Path, at: float = 0.5) -> None:
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0x01
    path.write_bytes(bytes(data))


def state(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"A": rng.normal(size=(3, 50)), "t": seed, "name": "kha"}


def test_save_returns_the_digest_that_load_and_verify_check(checkpoints):
    saved = checkpoints.save("m", 1, state(1))
    assert len(saved["sha256"]) == 64
    assert checkpoints.verify("m", 1, saved["sha256"]) == saved["sha256"]
    np.testing.assert_array_equal(checkpoints.load("m", 1, expect=saved["sha256"])["A"], state(1)["A"])
    checkpoints.save("m", 1, state(2))  # another file under the same name
    with pytest.raises(DamagedCheckpoint, match="names"):
        checkpoints.load("m", 1, expect=saved["sha256"])


@pytest.mark.parametrize("damage", ["flipped", "truncated"])
def test_a_damaged_checkpoint_is_a_409_corrupt_that_pickles(checkpoints, root, damage):
    checkpoints.save("m", 1, state(1))
    path = path_of(root, 1)
    if damage == "flipped":
        flip(path, 0.2)  # inside A's bytes
    else:
        path.write_bytes(path.read_bytes()[:200])
    for read in (lambda: checkpoints.load("m", 1), lambda: checkpoints.verify("m", 1),
                 lambda: checkpoints.load_columns("m", 1, 0, 10, ["A"])):
        with pytest.raises(DamagedCheckpoint) as caught:
            read()
        assert (caught.value.code, caught.value.field) == ("corrupt", "name")
        assert "model 'm'" in caught.value.message and "pass 1" in caught.value.message
        assert isinstance(caught.value, ValueError)
    again = pickle.loads(pickle.dumps(caught.value))
    assert (type(again), again.message, again.field) == (DamagedCheckpoint, caught.value.message, "name")


def test_latest_intact_skips_damaged_passes(checkpoints, root):
    for p in (1, 2, 3):
        checkpoints.save("m", p, state(p))
    assert checkpoints.latest_intact("m") == 3
    flip(path_of(root, 3), 0.4)
    path_of(root, 2).write_bytes(b"not a zip")
    assert checkpoints.latest_pass("m") == 3 and checkpoints.latest_intact("m") == 1
    path_of(root, 1).unlink()
    assert checkpoints.latest_intact("m") is None


def test_a_sharded_manifest_digest_covers_its_parts(checkpoints, root):
    full = state(4)
    for first, stop in ((0, 20), (20, 50)):
        checkpoints.save_part("m", 2, first, stop, {"A": full["A"][:, first:stop]})
    saved = checkpoints.save("m", 2, {"t": 4}, parts=[(0, 20), (20, 50)])
    assert checkpoints.verify("m", 2, saved["sha256"]) == saved["sha256"]
    part = root / "models" / "m" / "checkpoints" / "pass-00002.parts" / "000000000020-000000000050.npz"
    other = state(5)["A"][:, 20:50]  # a valid part, but not the one the manifest was written with
    checkpoints.save_part("m", 2, 20, 50, {"A": other})
    for read in (lambda: checkpoints.load("m", 2), lambda: checkpoints.verify("m", 2),
                 lambda: checkpoints.load_columns("m", 2, 10, 30, ["A"])):
        with pytest.raises(DamagedCheckpoint, match="not the one its manifest names"):
            read()
    part.unlink()
    with pytest.raises(DamagedCheckpoint, match="missing"):
        checkpoints.load("m", 2)
    with pytest.raises(NotFound):
        checkpoints.load("m", 7)


def test_a_checkpoint_without_digests_is_still_read(checkpoints, root):
    """Files written before digests were kept (no ``__sha256__``) load unchecked, as before."""
    import zipfile

    checkpoints.save("m", 1, state(1))
    path = path_of(root, 1)
    with zipfile.ZipFile(path) as source:
        kept = {info.filename: source.read(info) for info in source.infolist() if info.filename != "__sha256__.npy"}
    with zipfile.ZipFile(path, "w") as target:
        for name, body in kept.items():
            target.writestr(name, body)
    assert checkpoints.verify("m", 1) is None
    np.testing.assert_array_equal(checkpoints.load("m", 1)["A"], state(1)["A"])


def test_a_version_3_record_names_the_pass_it_completed_with():
    doc = {"schema_version": 3, "name": "m", "dataset": "d", "kernel": {"type": "linear"}, "solver": "kha",
           "n_components": 2, "status": "completed", "progress": {
               "pass": 5, "passes": 5, "t": 10, "fraction": 1.0, "elapsed_s": 1.0, "remaining_s": 0.0,
               "eigenvalues": [1.0, 0.5], "convergence": {"metric": "eigenvalue_change", "value": 0.1}}}
    record = ModelRecord.model_validate(migrate(doc))
    assert record.schema_version == 4 and record.checkpoint.pass_ == 5 and record.checkpoint.sha256 is None
    running = ModelRecord.model_validate(migrate({**doc, "status": "cancelled"}))
    assert running.checkpoint is None
    assert record.resumed(6)["checkpoint"] is None
