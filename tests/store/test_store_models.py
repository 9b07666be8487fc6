"""Conformance suite for model registries; `TestLocalModelRegistry` runs it on the file backend."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from store_helpers import temp_leftovers

from store import CheckpointStore, Conflict, Invalid, ModelRegistry, NotFound
from store.atomic import DIGEST_KEY
from store.jobs.records import BestCheckpoint, Convergence, FitError, ModelRecord, PassRecord, Progress

MANAGED = {"name", "schema_version", "created_at", "updated_at"}


def record(name: str = "digits-rbf", **fields) -> ModelRecord:
    """A queued record as a caller builds it (no managed fields set)."""
    base = {"dataset": "digits", "solver": "kha-smd", "kernel": {"type": "gaussian", "sigma": 3.0},
            "n_components": 16, "params": {"passes": 20, "seed": 3}}
    return ModelRecord(name=name, **{**base, **fields})


def progress(done: int, passes: int = 20) -> Progress:
    return Progress(pass_=done, passes=passes, t=100 * done, fraction=done / passes, elapsed_s=0.5 * done,
                    remaining_s=0.5 * (passes - done), eigenvalues=[3.0, 1.5], gains=None,
                    convergence=Convergence(metric="excess_error", value=1.0 / (done + 1)))


class ModelRegistryConformance:
    """Behaviour every model registry must show. Subclasses provide the ``registry`` fixture."""

    def test_create_get_list(self, registry):
        asked = record("digits-rbf")
        created = registry.create(asked)
        assert isinstance(created, ModelRecord)
        assert created.name == "digits-rbf" and created.schema_version == 4
        assert created.created_at == created.updated_at and created.created_at.endswith("Z")
        assert created.model_dump(exclude=MANAGED) == asked.model_dump(exclude=MANAGED)
        assert created.status == "queued" and created.history == [] and created.progress is None
        assert registry.get("digits-rbf") == created
        registry.create(record("alpha"))
        assert [r.name for r in registry.list()] == ["alpha", "digits-rbf"]
        assert all(isinstance(r, ModelRecord) for r in registry.list())
        assert asked.created_at is None and asked.updated_at is None  # the caller's record is not modified

    def test_empty_registry(self, registry):
        assert registry.list() == []
        with pytest.raises(NotFound) as info:
            registry.get("m")
        assert info.value.message == "model 'm' not found"

    def test_create_clash(self, registry):
        registry.create(record("m"))
        with pytest.raises(Conflict) as info:
            registry.create(record("m", status="running", solver="exact", params={}))
        assert info.value.field == "name"
        stored = registry.get("m")
        assert stored.status == "queued" and stored.solver == "kha-smd"

    def test_concurrent_creates_one_wins(self, registry):
        results = []
        start = threading.Barrier(8)

        def create(i):
            start.wait()
            try:
                registry.create(record("m", n_components=i + 1))
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
        assert registry.get("m").n_components == winners[0] + 1

    def test_create_after_checkpoints_made_the_folder(self, registry, root):
        checkpoints = CheckpointStore(root)
        checkpoints.save("m", 1, {"t": 1})  # stale state of an earlier model of that name
        assert registry.list() == []
        created = registry.create(record("m"))
        assert registry.get("m") == created
        assert checkpoints.latest_pass("m") is None  # leftovers do not leak into the new model
        with pytest.raises(Conflict):
            registry.create(record("m"))

    def test_non_json_record_refused(self, registry):
        with pytest.raises(ValueError):
            registry.create(record("m", params={"eta0": float("nan")}))
        with pytest.raises(ValueError):  # the kernel is parsed when the record is made (kernel.sigma)
            registry.create(record("n", kernel={"type": "gaussian", "sigma": object()}))
        assert registry.list() == []
        registry.create(record("m"))
        with pytest.raises(ValueError):
            registry.update("m", params_used={"eta0": float("inf")})
        assert registry.get("m").params_used is None

    def test_update_merges_fields(self, registry):
        created = registry.create(record("m"))
        updated = registry.update("m", status="running", progress=progress(1))
        assert updated.status == "running" and updated.progress.pass_ == 1 and updated.progress.passes == 20
        assert updated.dataset == "digits" and updated.params == {"passes": 20, "seed": 3}
        assert updated.created_at == created.created_at and updated.updated_at >= created.updated_at
        assert registry.get("m") == updated
        # parts may be given as their documents (aliases such as "pass") too
        again = registry.update("m", progress=progress(2).model_dump(by_alias=True),
                                history=[{"pass": 1, "elapsed_s": 0.5, "eigenvalues": [3.0],
                                          "convergence": {"metric": "excess_error", "value": 0.1}}])
        assert again.progress == progress(2) and again.history[0].pass_ == 1 and again.status == "running"
        with pytest.raises(NotFound):
            registry.update("missing", status="running")

    def test_update_refuses_values_that_do_not_fit(self, registry):
        registry.create(record("m"))
        for fields in ({"status": "sleeping"}, {"n_components": 0}, {"progress": {"pass": 1, "passes": 20}}):
            with pytest.raises(ValueError):
                registry.update("m", **fields)
        stored = registry.get("m")
        assert stored.status == "queued" and stored.n_components == 16 and stored.progress is None

    @pytest.mark.parametrize("field", ["name", "schema_version", "created_at", "updated_at"])
    def test_update_refuses_managed_fields(self, registry, field):
        created = registry.create(record("m"))
        with pytest.raises(Invalid) as info:
            registry.update("m", **{field: "x"})
        assert info.value.field == field
        assert registry.get("m") == created

    @pytest.mark.parametrize("field", ["who", "worker0", "pass", "progress_"])
    def test_update_refuses_unknown_fields(self, registry, field):
        created = registry.create(record("m"))
        with pytest.raises(Invalid) as info:
            registry.update("m", **{field: 1})
        assert info.value.field == field
        with pytest.raises(Invalid):  # refused as a whole, even next to a good field
            registry.update("m", status="running", **{field: 1})
        assert registry.get("m") == created

    def test_concurrent_updates_lose_nothing(self, registry):
        # each thread sets its own field repeatedly; a read-modify-write without the lock
        # would drop other threads' fields
        registry.create(record("m", status="running"))
        setters = {
            "params_used": lambda step: {"passes": 20, "eta0": float(step)},
            "best_checkpoint": lambda step: BestCheckpoint(pass_=step, value=0.5 / (step + 1)),
            "error": lambda step: FitError(code="test", message=f"step {step}"),
            "stopped_early": lambda step: step % 2 == 1,
            "dataset_checksum": lambda step: f"sha256:{step:064x}",
            "progress": progress,
            "history": lambda step: [PassRecord(pass_=p, elapsed_s=0.1 * p, eigenvalues=[1.0],
                                                convergence=Convergence(metric="eigenvalue_change"))
                                     for p in range(1, step + 1)],
            "dataset_version": lambda step: step + 1,
        }
        start = threading.Barrier(len(setters))

        def bump(field):
            start.wait()
            for step in range(10):
                registry.update("m", **{field: setters[field](step)})

        threads = [threading.Thread(target=bump, args=(field,)) for field in setters]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        stored = registry.get("m")
        last = ModelRecord.model_validate({**stored.document(), **{f: setters[f](9) for f in setters}})
        for field in setters:
            assert getattr(stored, field) == getattr(last, field), field
        assert stored.status == "running" and stored.dataset == "digits"

    def test_cancel_flags(self, registry):
        registry.create(record("m"))
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
        registry.create(record("m"))
        registry.create(record("keep"))
        checkpoints = CheckpointStore(root)
        checkpoints.save("m", 1, {"t": 1})
        checkpoints.save("keep", 1, {"t": 1})
        registry.request_cancel("m")
        registry.delete("m")
        with pytest.raises(NotFound):
            registry.get("m")
        assert checkpoints.list("m") == []
        assert not (root / "models" / "m").exists()
        assert [r.name for r in registry.list()] == ["keep"]
        assert checkpoints.latest_pass("keep") == 1
        with pytest.raises(NotFound):
            registry.delete("m")
        assert temp_leftovers(root) == []
        new = registry.create(record("m"))  # the name is free again
        assert registry.cancel_requested("m") is False and new.status == "queued"

    @pytest.mark.parametrize("bad", ["../x", "a/b", "", "..", ".lock"])
    def test_bad_names(self, registry, bad):
        for call in (lambda: registry.create(record(bad)), lambda: registry.get(bad),
                     lambda: registry.update(bad, status="running"),
                     lambda: registry.delete(bad), lambda: registry.request_cancel(bad),
                     lambda: registry.cancel_requested(bad), lambda: registry.clear_cancel(bad)):
            with pytest.raises(Invalid) as info:
                call()
            assert info.value.field == "name"

    def test_documents_on_disk_are_versioned_and_temp_free(self, registry, root):
        registry.create(record("m"))
        registry.update("m", status="running", progress=progress(3))
        registry.request_cancel("m")
        folder = root / "models" / "m"
        doc = json.loads((folder / "model.json").read_text())
        assert doc["schema_version"] == 4
        assert doc["progress"]["pass"] == 3 and "pass_" not in doc["progress"]  # stored by alias
        assert json.loads((folder / "cancel").read_text())["schema_version"] == 1
        assert temp_leftovers(root) == []

    def test_version_1_document_is_migrated_on_read_and_rewritten_by_update(self, registry, root):
        v1 = {"schema_version": 1, "name": "old", "dataset": "digits", "dataset_version": 1,
              "kernel": {"type": "gaussian", "sigma": 3.0}, "n_components": 4, "solver": "kha",
              # version 1 listed every parameter of every solver, None where not given
              "params": {"block_size": 8, "eta0": None, "init": "random", "init_size": None,
                         "kernel_precision": "float64", "mu": 0.5, "passes": 4, "seed": 3, "tol": None,
                         "xi": None},
              "exact_limit": 3000, "checkpoint_keep": 3, "status": "failed", "progress": None, "history": [],
              "error": "the fit diverged at pass 2; try a smaller eta0",
              "created_at": "2026-11-26T09:49:54.331Z", "updated_at": "2026-11-26T09:50:00.368Z"}
        folder = root / "models" / "old"
        folder.mkdir(parents=True)
        (folder / "model.json").write_text(json.dumps(v1))
        old = registry.get("old")
        assert old.schema_version == 4 and old.placement.exact_limit == 3000 and old.placement.workers is None
        # only given values that the kha solver declares (it has no mu or xi)
        assert old.params == {"block_size": 8, "init": "random", "kernel_precision": "float64", "passes": 4,
                              "seed": 3}
        assert old.error == FitError(code="internal", message=v1["error"])
        assert old.status == "failed" and old.created_at == v1["created_at"] and old.passes == 4
        assert [r.name for r in registry.list()] == ["old"] and registry.list()[0] == old
        assert json.loads((folder / "model.json").read_text())["schema_version"] == 1  # reading writes nothing
        updated = registry.update("old", status="queued", error=None)
        doc = json.loads((folder / "model.json").read_text())
        assert doc["schema_version"] == 4 and doc["params"] == old.params and doc["status"] == "queued"
        assert doc["created_at"] == v1["created_at"] and registry.get("old") == updated
        (folder / "model.json").write_text(json.dumps(v1))  # migrated fields an update leaves are rewritten
        registry.update("old", status="cancelled")
        doc = json.loads((folder / "model.json").read_text())
        assert doc["schema_version"] == 4 and doc["error"] == {"code": "internal", "message": v1["error"]}
        assert doc["params"] == old.params

    def test_progress_and_history_keep_the_workers_of_a_sharded_pass(self, registry, root):
        registry.create(record("m"))
        sharded = progress(2).model_copy(update={"workers": 3})
        history = [PassRecord(pass_=1, elapsed_s=0.1, eigenvalues=[1.0], workers=3,
                              convergence=Convergence(metric="excess_error", value=0.5))]
        registry.update("m", status="running", progress=sharded, history=history)
        doc = json.loads((root / "models" / "m" / "model.json").read_text())
        assert doc["progress"]["workers"] == 3 and doc["history"][0]["workers"] == 3
        stored = registry.get("m")
        assert stored.progress.workers == 3 and stored.history[0].workers == 3
        # a record written before sharded fits has no workers (nor a digest): it loads, as one worker (None)
        for part in (doc["progress"], doc["history"][0]):
            del part["workers"]
        del doc[DIGEST_KEY]
        (root / "models" / "m" / "model.json").write_text(json.dumps(doc))
        old = registry.get("m")
        assert old.progress.workers is None and old.history[0].workers is None
        assert old.progress.pass_ == 2 and old.history[0].pass_ == 1

    def test_leftovers_ignored_by_list(self, registry, root):
        registry.create(record("m"))
        (root / "models" / "m" / ".model.json.tmp-0badc0ffee00").write_text("{half")
        (root / "models" / ".gone.deleted-0badc0ffee00").mkdir()
        (root / "models" / "orphan").mkdir()
        assert [r.name for r in registry.list()] == ["m"]
        assert registry.get("m").status == "queued"


class TestLocalModelRegistry(ModelRegistryConformance):
    @pytest.fixture
    def registry(self, root: Path) -> ModelRegistry:
        return ModelRegistry(root)


def test_fit_lease_is_exclusive_and_released_when_its_holder_dies(root):
    import subprocess
    import sys

    from tests.waiting import wait_until

    registry = ModelRegistry(root)
    registry.create(record("leased"))
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
    wait_until(lambda: not registry.fit_alive("leased"), what="the killed holder's lease to be free")
    for call in (registry.fit_alive, lambda name: registry.fit_lease(name).__enter__()):
        with pytest.raises(NotFound):
            call("missing")


def test_delete_one_checkpoint(root):
    import numpy as np

    checkpoints = CheckpointStore(root)
    for p in (1, 2, 3):
        checkpoints.save("m", p, {"A": np.arange(3.0)})
    checkpoints.delete("m", 2)
    checkpoints.delete("m", 2)
    assert [c["pass"] for c in checkpoints.list("m")] == [1, 3]


@pytest.mark.parametrize("kernel", [{"type": "gaussian", "sigma": 3}, {"type": "gaussian", "sigma": 3.0},
                                    {"type": "gaussian", "sigma": "auto"}, {"type": "rbf", "gamma": 0.5},
                                    {"type": "polynomial", "degree": 2, "offset": 1}, {"type": "linear"}])
def test_a_kernel_read_back_is_the_spec_from_dict_builds_and_is_checked_once(root, kernel):
    """Record reads keep the kernels they checked (`store.jobs.records._known_spec`): what is read is
    exactly what `KernelSpec.from_dict` builds (values of equal value and other type, 3 and 3.0, stay
    apart), and a second read of the same kernel shares the first one's spec."""
    from kpca.kernels import KernelSpec

    registry = ModelRegistry(root)
    registry.create(record("a", kernel=kernel))
    registry.create(record("b", kernel=kernel))
    first, second = registry.get("a").kernel, registry.get("b").kernel
    built = KernelSpec.from_dict(kernel)
    assert first == built and json.dumps(first.to_dict()) == json.dumps(built.to_dict())
    assert second is first


@pytest.mark.parametrize("kernel", [{"type": "gaussian", "sigma": -1.0}, {"type": "gaussian", "width": 2.0},
                                    {"type": "nope"}])
def test_a_refused_kernel_is_refused_on_every_read(kernel):
    from pydantic import ValidationError

    for _ in range(2):
        with pytest.raises(ValidationError, match="kernel"):
            record("a", kernel=kernel)
