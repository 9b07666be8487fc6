"""One contract for the job registries (issue 57): the folder registry (`store.jobs.registry.JobRegistry`, flock
and rename) and the object-store registry (`store.jobs.object_registry.ObjectJobRegistry`: create-once,
compare-and-swap, expiring leases) over a folder and over an S3 API on loopback (moto's server) answer the same:
records created once among racing creators, updates from racing threads none lost, damaged records quarantined,
cancel flags, deletes, and one runner per job."""

from __future__ import annotations

import threading

import pytest

from store.errors import Conflict, Damaged, Invalid, NotFound
from store.jobs.models import ModelRegistry
from store.jobs.object_registry import ObjectJobRegistry
from store.jobs.records import ModelRecord
from store.objects.folder import FolderObjects
from store.objects.open import open_objects
from store.quarantine import DamagedEntry


class Clock:
    """Epoch seconds that a test moves on by hand (the leases' expiry)."""

    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["folder", "objects-folder", "objects-s3"])
def registry(request, tmp_path, clock):
    if request.param == "folder":
        return ModelRegistry(tmp_path / "data")
    if request.param == "objects-folder":
        return ObjectJobRegistry(FolderObjects(tmp_path / "objects"), ModelRegistry, lease_ttl=30, clock=clock)
    return ObjectJobRegistry(open_objects(request.getfixturevalue("s3_url")), ModelRegistry, lease_ttl=30,
                             clock=clock)


def record(name: str = "m1") -> ModelRecord:
    return ModelRecord(name=name, dataset="d", dataset_version=1, kernel={"type": "gaussian", "sigma": 1.0},
                       n_components=2, solver="kha", params={"passes": 3})


def damage(registry, name: str, data: bytes) -> None:
    """Overwrite the stored record of ``name`` with ``data`` (as a disk or a hand would)."""
    if isinstance(registry, ObjectJobRegistry):
        registry.objects.put(f"models/{name}/model.json", data)
    else:
        (registry.folders.path(name) / "model.json").write_bytes(data)


def test_create_get_list_update_delete(registry):
    made = registry.create(record("m1"))
    assert made.created_at and made.updated_at and made.status == "queued"
    registry.create(record("m2"))
    with pytest.raises(Conflict, match="already exists"):
        registry.create(record("m1"))
    with pytest.raises(Invalid):
        registry.create(record("../x"))
    assert registry.get("m1") == made and registry.exists("m1") and not registry.exists("m3")
    with pytest.raises(NotFound):
        registry.get("m3")
    assert [r.name for r in registry.list()] == ["m1", "m2"]
    assert [r.name for r in registry.list(after="m1")] == ["m2"] and len(registry.list(limit=1)) == 1
    updated = registry.update("m1", status="running")
    assert updated.status == "running" and registry.get("m1").status == "running"
    with pytest.raises(Invalid, match="managed"):
        registry.update("m1", name="other")
    with pytest.raises(Invalid, match="not a field"):
        registry.update("m1", colour="red")
    with pytest.raises(NotFound):
        registry.update("m3", status="running")
    registry.delete("m1")
    assert not registry.exists("m1") and [r.name for r in registry.list()] == ["m2"]
    with pytest.raises(NotFound):
        registry.delete("m1")
    assert registry.create(record("m1")).status == "queued"  # the name is free again


def test_one_of_racing_creators_wins(registry):
    wins, refused, barrier = [], [], threading.Barrier(6)

    def create(i):
        barrier.wait()
        try:
            registry.create(record("raced").model_copy(update={"n_components": i + 1}))
            wins.append(i)
        except Conflict:
            refused.append(i)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and len(refused) == 5 and registry.get("raced").n_components == wins[0] + 1


def test_racing_updates_lose_nothing(registry):
    """Four threads update four different fields of one record twenty times each: every field ends at its
    thread's last value (an update from a stale read would put back another thread's older value)."""
    registry.create(record("counted"))
    fields = {"checkpoint_keep": lambda k: k + 1, "n_features": lambda k: k + 1,
              "warnings": lambda k: [f"w{k}"], "params_used": lambda k: {"k": k}}

    def update(field: str):
        for k in range(20):
            registry.update("counted", **{field: fields[field](k)})

    threads = [threading.Thread(target=update, args=(field,)) for field in fields]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = registry.get("counted")
    assert {field: getattr(final, field) for field in fields} == {field: make(19) for field, make in fields.items()}


def test_a_damaged_record_is_quarantined_and_can_be_deleted(registry):
    registry.create(record("good"))
    registry.create(record("bad"))
    damage(registry, "bad", b'{"schema_version": 4, "name": "bad"')  # truncated
    with pytest.raises(Damaged, match="cannot be read") as damaged:
        registry.get("bad")
    assert damaged.value.field == "name"
    assert [r.name for r in registry.list()] == ["good"]
    entries = registry.entries()
    assert [e.name for e in entries] == ["bad", "good"] and isinstance(entries[0], DamagedEntry)
    assert registry.exists("bad")
    registry.delete("bad")
    assert not registry.exists("bad") and [e.name for e in registry.entries()] == ["good"]


def test_a_record_missing_beside_its_job_is_damaged(registry):
    registry.create(record("lost"))
    registry.request_cancel("lost")  # an object of the job besides its record
    if isinstance(registry, ObjectJobRegistry):
        registry.objects.delete("models/lost/model.json")
    else:
        (registry.folders.path("lost") / "model.json").unlink()
    with pytest.raises(Damaged, match="missing"):
        registry.get("lost")
    registry.delete("lost")
    with pytest.raises(NotFound):
        registry.get("lost")


def test_cancel_flags(registry):
    registry.create(record("c"))
    assert not registry.cancel_requested("c")
    registry.request_cancel("c")
    assert registry.cancel_requested("c")
    registry.clear_cancel("c")
    registry.clear_cancel("c")
    assert not registry.cancel_requested("c")
    for call in (registry.request_cancel, registry.cancel_requested, registry.clear_cancel):
        with pytest.raises(NotFound):
            call("absent")
    registry.request_cancel("c")
    registry.delete("c")
    registry.create(record("c"))  # an earlier job's flag is not the new job's
    assert not registry.cancel_requested("c")


def test_a_cancel_from_another_process_is_seen_once_the_look_interval_passed(registry):
    """A fit asks before every block; on an object store a "no" is repeated for CANCEL_LOOK_S without a request
    (a HEAD per block was most of a fit's requests), so another process's cancel is seen within that time."""
    from store.jobs.object_registry import CANCEL_LOOK_S

    registry.create(record("x"))
    if isinstance(registry, ObjectJobRegistry):
        other = ObjectJobRegistry(registry.objects, ModelRegistry, lease_ttl=30, clock=registry.clock)
    else:
        other = ModelRegistry(registry.root)
    assert not registry.cancel_requested("x")
    other.request_cancel("x")
    if isinstance(registry, ObjectJobRegistry):
        registry.clock.now += CANCEL_LOOK_S  # the interval passed: the next question asks the store
    assert registry.cancel_requested("x")


def test_one_runner_at_a_time(registry):
    registry.create(record("run"))
    with registry.fit_lease("run") as first:
        assert first and registry.fit_alive("run")
        with registry.fit_lease("run") as second:  # the folder registry's flock is per open file: a second
            assert not second  # taker in the same process is refused as another process would be
    assert not registry.fit_alive("run")
    with registry.fit_lease("run") as again:
        assert again
    with pytest.raises(NotFound):
        with registry.fit_lease("absent"):
            pass


def test_a_lease_not_renewed_is_free_after_its_ttl(tmp_path, clock):
    """A runner that stopped renewing (its worker killed) frees the job lease_ttl after its last renewal."""
    objects = FolderObjects(tmp_path / "objects")
    dead = ObjectJobRegistry(objects, ModelRegistry, lease_ttl=30, clock=clock)
    alive = ObjectJobRegistry(objects, ModelRegistry, lease_ttl=30, clock=clock)
    dead.create(record("orphan"))
    from store.objects import leases

    assert leases.acquire(objects, "models/orphan/fit-lease", dead.holder, 30, now=clock) is not None
    with alive.fit_lease("orphan") as taken:
        assert not taken and alive.fit_alive("orphan")
    clock.now += 31
    assert not alive.fit_alive("orphan")
    with alive.fit_lease("orphan") as taken:
        assert taken


def test_a_runner_whose_lease_was_taken_over_stops_writing(tmp_path):
    """A runner that lost its lease (another took the job after it stopped renewing) must not write over the new
    runner's record: its registry's update and cancel check raise NotFound, which a fit's worker reads as "stop,
    write nothing"; another process's registry is not affected."""
    import time

    from store.objects import leases

    objects = FolderObjects(tmp_path / "objects")
    runner = ObjectJobRegistry(objects, ModelRegistry, lease_ttl=0.6)  # renewed every 0.2 s, on the real clock
    other = ObjectJobRegistry(objects, ModelRegistry, lease_ttl=0.6)
    runner.create(record("taken"))
    with runner.fit_lease("taken") as ours:
        assert ours
        runner.update("taken", status="running")
        objects.put("models/taken/fit-lease", leases._document("someone-else", time.time() + 60))  # taken over
        deadline = time.monotonic() + 10
        while "taken" not in runner._lost and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(NotFound, match="taken over"):
            runner.update("taken", status="completed")
        with pytest.raises(NotFound, match="taken over"):
            runner.cancel_requested("taken")
        assert other.update("taken", checkpoint_keep=3).status == "running"  # the new runner's writes go on
        assert not other.cancel_requested("taken")
    assert runner.get("taken").status == "running"  # nothing written by the runner that lost it


def test_recent_records_are_answered_again_for_recent_s_and_own_writes_at_once(registry):
    """An API process's registry (``recent_s``, service/app.py) answers a status poll from the record it read less
    than recent_s ago: another process's update shows once that has passed, its own writes at once."""
    if not isinstance(registry, ObjectJobRegistry):
        pytest.skip("the folder registry reads a record per call (a stat and a kept parse)")
    api = ObjectJobRegistry(registry.objects, ModelRegistry, lease_ttl=30, clock=registry.clock, recent_s=0.5)
    api.create(record("p"))
    assert api.get("p").status == "queued"
    registry.update("p", status="running")  # a worker's write
    assert api.get("p").status == "queued" and api.signature("p") != registry.signature("p")
    registry.clock.now += 0.5
    assert api.get("p").status == "running" and api.signature("p") == registry.signature("p")
    api.update("p", status="cancelled")  # its own write
    assert api.get("p").status == "cancelled"
    api.delete("p")
    with pytest.raises(NotFound):
        api.get("p")
