"""Conformance suite for model registries; `TestLocalModelRegistry` runs it on the file backend."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
from store_helpers import temp_leftovers

from store import CheckpointStore, Conflict, Invalid, ModelRegistry, NotFound

RECORD = {"dataset": "digits", "solver": "kha-smd", "kernel": {"type": "gaussian", "sigma": 3.0},
          "n_components": 16, "status": "queued", "history": []}


class ModelRegistryConformance:
    """Behaviour every model registry must show. Subclasses provide the ``registry`` fixture."""

    def test_create_get_list(self, registry):
        created = registry.create("digits-rbf", RECORD)
        assert created["name"] == "digits-rbf" and created["schema_version"] == 1
        assert created["created_at"] == created["updated_at"] and created["created_at"].endswith("Z")
        assert {k: created[k] for k in RECORD} == RECORD
        assert registry.get("digits-rbf") == created
        registry.create("alpha", {"status": "queued"})
        assert [r["name"] for r in registry.list()] == ["alpha", "digits-rbf"]
        assert "name" not in RECORD  # the caller's dict is not modified

    def test_empty_registry(self, registry):
        assert registry.list() == []
        with pytest.raises(NotFound) as info:
            registry.get("m")
        assert info.value.message == "model 'm' not found"

    def test_create_clash(self, registry):
        registry.create("m", RECORD)
        with pytest.raises(Conflict) as info:
            registry.create("m", {"status": "other"})
        assert info.value.field == "name"
        assert registry.get("m")["status"] == "queued"

    def test_concurrent_creates_one_wins(self, registry):
        results = []
        start = threading.Barrier(8)

        def create(i):
            start.wait()
            try:
                registry.create("m", {"who": i})
                results.append(("ok", i))
            except Conflict:
                results.append(("conflict", i))

        threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        winners = [i for kind, i in results if kind == "ok"]
        assert len(results) == 8 and len(winners) == 1
        assert registry.get("m")["who"] == winners[0]

    def test_create_after_checkpoints_made_the_folder(self, registry, root):
        checkpoints = CheckpointStore(root)
        checkpoints.save("m", 1, {"t": 1})  # stale state of an earlier model of that name
        assert registry.list() == []
        created = registry.create("m", RECORD)
        assert registry.get("m") == created
        assert checkpoints.latest_pass("m") is None  # leftovers do not leak into the new model
        with pytest.raises(Conflict):
            registry.create("m", RECORD)

    def test_record_name_must_match(self, registry):
        with pytest.raises(Invalid) as info:
            registry.create("m", {"name": "other"})
        assert info.value.field == "name"
        assert registry.create("m", {"name": "m"})["name"] == "m"

    def test_non_json_record_refused(self, registry):
        with pytest.raises(ValueError):
            registry.create("m", {"loss": float("nan")})
        with pytest.raises(TypeError):
            registry.create("n", {"thing": object()})
        assert registry.list() == []

    def test_numpy_values_stored_as_json(self, registry):
        registry.create("m", {"eigenvalues": np.array([3.0, 1.5], dtype=np.float32), "t": np.int64(7)})
        record = registry.get("m")
        assert record["eigenvalues"] == [3.0, 1.5] and record["t"] == 7

    def test_update_merges_fields(self, registry):
        created = registry.create("m", RECORD)
        updated = registry.update("m", status="running", progress={"pass": 1, "passes": 20})
        assert updated["status"] == "running" and updated["progress"]["pass"] == 1
        assert updated["dataset"] == "digits" and updated["created_at"] == created["created_at"]
        assert updated["updated_at"] >= created["updated_at"]
        assert registry.get("m") == updated
        with pytest.raises(NotFound):
            registry.update("missing", status="running")

    @pytest.mark.parametrize("field", ["name", "schema_version", "created_at", "updated_at"])
    def test_update_refuses_managed_fields(self, registry, field):
        registry.create("m", RECORD)
        with pytest.raises(Invalid) as info:
            registry.update("m", **{field: "x"})
        assert info.value.field == field

    def test_write_replaces_record_keeping_created_at(self, registry):
        created = registry.create("m", RECORD)
        written = registry.write("m", {"status": "completed"})
        assert written["status"] == "completed" and "dataset" not in written
        assert written["created_at"] == created["created_at"] and written["schema_version"] == 1
        assert registry.get("m") == written
        with pytest.raises(NotFound):
            registry.write("missing", {"status": "x"})

    def test_concurrent_updates_lose_nothing(self, registry):
        # each thread sets its own field repeatedly; a read-modify-write without the lock
        # would drop other threads' fields
        registry.create("m", {"status": "running"})
        start = threading.Barrier(8)

        def bump(worker):
            start.wait()
            for step in range(10):
                registry.update("m", **{f"worker{worker}": step})

        threads = [threading.Thread(target=bump, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        record = registry.get("m")
        assert [record.get(f"worker{i}") for i in range(8)] == [9] * 8
        assert record["status"] == "running"

    def test_cancel_flags(self, registry):
        registry.create("m", RECORD)
        assert registry.cancel_requested("m") is False
        registry.request_cancel("m")
        registry.request_cancel("m")  # idempotent
        assert registry.cancel_requested("m") is True
        registry.clear_cancel("m")
        registry.clear_cancel("m")
        assert registry.cancel_requested("m") is False
        for call in (registry.request_cancel, registry.cancel_requested, registry.clear_cancel):
            with pytest.raises(NotFound):
                call("missing")

    def test_delete_removes_record_flag_and_checkpoints(self, registry, root):
        registry.create("m", RECORD)
        registry.create("keep", RECORD)
        checkpoints = CheckpointStore(root)
        checkpoints.save("m", 1, {"t": 1})
        checkpoints.save("keep", 1, {"t": 1})
        registry.request_cancel("m")
        registry.delete("m")
        with pytest.raises(NotFound):
            registry.get("m")
        assert checkpoints.list("m") == []
        assert not (root / "models" / "m").exists()
        assert [r["name"] for r in registry.list()] == ["keep"]
        assert checkpoints.latest_pass("keep") == 1
        with pytest.raises(NotFound):
            registry.delete("m")
        assert temp_leftovers(root) == []
        new = registry.create("m", {"status": "queued"})  # the name is free again
        assert registry.cancel_requested("m") is False and new["status"] == "queued"

    @pytest.mark.parametrize("bad", ["../x", "a/b", "", "..", ".lock"])
    def test_bad_names(self, registry, bad):
        for call in (lambda: registry.create(bad, {}), lambda: registry.get(bad),
                     lambda: registry.update(bad, status="x"), lambda: registry.write(bad, {}),
                     lambda: registry.delete(bad), lambda: registry.request_cancel(bad),
                     lambda: registry.cancel_requested(bad), lambda: registry.clear_cancel(bad)):
            with pytest.raises(Invalid) as info:
                call()
            assert info.value.field == "name"

    def test_documents_on_disk_are_versioned_and_temp_free(self, registry, root):
        registry.create("m", RECORD)
        registry.update("m", status="running")
        registry.request_cancel("m")
        folder = root / "models" / "m"
        assert json.loads((folder / "model.json").read_text())["schema_version"] == 1
        assert json.loads((folder / "cancel").read_text())["schema_version"] == 1
        assert temp_leftovers(root) == []

    def test_leftovers_ignored_by_list(self, registry, root):
        registry.create("m", RECORD)
        (root / "models" / "m" / ".model.json.tmp-0badc0ffee00").write_text("{half")
        (root / "models" / ".gone.deleted-0badc0ffee00").mkdir()
        (root / "models" / "orphan").mkdir()
        assert [r["name"] for r in registry.list()] == ["m"]
        assert registry.get("m")["status"] == "queued"


class TestLocalModelRegistry(ModelRegistryConformance):
    @pytest.fixture
    def registry(self, root: Path) -> ModelRegistry:
        return ModelRegistry(root)


def test_fit_lease_is_exclusive_and_released_when_its_holder_dies(root):
    import subprocess
    import sys
    import time

    from store import ModelRegistry

    registry = ModelRegistry(root)
    registry.create("leased", {"status": "queued"})
    assert not registry.fit_alive("leased")
    with registry.fit_lease("leased") as first:
        assert first and registry.fit_alive("leased")
        with registry.fit_lease("leased") as second:
            assert not second
    assert not registry.fit_alive("leased")
    # a process that holds the lease and is killed leaves it free
    code = ("import sys, time; from store import ModelRegistry; r = ModelRegistry(sys.argv[1]); "
            "cm = r.fit_lease('leased'); assert cm.__enter__(); print('held', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        assert registry.fit_alive("leased")
    finally:
        proc.kill()
        proc.wait()
    time.sleep(0.05)
    assert not registry.fit_alive("leased")


def test_delete_one_checkpoint(root):
    import numpy as np

    from store import CheckpointStore

    checkpoints = CheckpointStore(root)
    for p in (1, 2, 3):
        checkpoints.save("m", p, {"A": np.arange(3.0)})
    checkpoints.delete("m", 2)
    checkpoints.delete("m", 2)
    assert [c["pass"] for c in checkpoints.list("m")] == [1, 3]
