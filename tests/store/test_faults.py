"""Fault injection on the store: a full disk and SIGKILL during a chunk write, a commit and a checkpoint save.

Nothing of ours is mocked. A full disk is the kernel's: the operation runs in a child process whose
``RLIMIT_FSIZE`` is smaller than the file it writes, so the write fails with EFBIG (SIGXFSZ ignored),
as it would with ENOSPC. A crash is a real SIGKILL of a child that loops over the operation, at a
random moment. The parent then reads the data folder with a fresh store.

Defends against: a half-written chunk, segment or checkpoint left visible (or its temporary file
left behind) after a failed write; a failed write that changes committed data or metadata; an error
that is not an OSError naming the cause; a kill that leaves a data set unlistable or unreadable, a
checkpoint unloadable, or loses an acknowledged write.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from store import CheckpointStore, DatasetStore
from tests.store_checks import snapshot

FORK = multiprocessing.get_context("fork")  # the child starts with the store imported: no start-up cost
FILE_LIMIT = 4096  # bytes: larger than every metadata file written here, smaller than the data files
KILL_ROUNDS = 5


def _limited_child(root: Path, operation, limit: int, sender) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        operation(root)
        outcome = {"type": None}
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        outcome = {"type": type(exc).__name__, "errno": getattr(exc, "errno", None), "message": str(exc)}
    sender.send(outcome)


def run_limited(root: Path, operation, limit: int = FILE_LIMIT) -> dict:
    """Run ``operation(root)`` in a forked child whose files may not exceed ``limit`` bytes; the
    exception it raised, as ``{"type", "errno", "message"}``, or ``{"type": None}``."""
    receiver, sender = FORK.Pipe(duplex=False)
    child = FORK.Process(target=_limited_child, args=(root, operation, limit, sender))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0, child.exitcode
    return receiver.recv()


def state_of(root: Path) -> tuple[dict, set]:
    """Every file's (size, mtime), and every path (files and folders), below ``root``."""
    found = snapshot(root, with_root=False)
    files = {path: info for path, info in found.items() if (root / path).is_file()}
    return files, set(found)


def assert_disk_full(outcome: dict) -> None:
    assert outcome["type"] is not None, "the write should have failed"
    # EFBIG (the file size limit) or ENOSPC from the kernel; numpy reports a short write as an
    # OSError without errno ("1600 requested and 496 written")
    assert outcome["type"] in ("OSError", "IOError"), outcome
    assert outcome["errno"] in (27, 28) or "written" in outcome["message"], outcome


def random_rows(rng, n_rows: int, n_features: int = 4) -> np.ndarray:
    return rng.standard_normal((n_rows, n_features))


@pytest.fixture
def stores(root, rng):
    """A data set "a" with two committed versions, an open set "b" with chunk 0 staged, and
    checkpoints of passes 1 and 2 of model "m". Written without a limit; the zarr chunks (600 rows,
    19 kB) are larger than `FILE_LIMIT`, the metadata files smaller."""
    datasets = DatasetStore(root)
    datasets.create("a", 4, "float64")
    datasets.put_chunk("a", 0, random_rows(rng, 600))
    datasets.commit("a")
    datasets.put_chunk("a", 1, random_rows(rng, 600))
    datasets.commit("a")
    datasets.create("b", 4, "float64")
    datasets.put_chunk("b", 0, random_rows(rng, 600))
    checkpoints = CheckpointStore(root)
    for pass_index in (1, 2):
        checkpoints.save("m", pass_index, {"A": np.full((2, 40), float(pass_index)), "t": pass_index})
    return datasets, checkpoints


def test_disk_full_during_a_chunk_write_leaves_the_store_as_before(root, stores):
    datasets, _ = stores
    before = state_of(root), datasets.get("b")
    outcome = run_limited(root, lambda r: DatasetStore(r).put_chunk("b", 1, np.ones((400, 4))))
    assert_disk_full(outcome)
    assert (state_of(root), datasets.get("b")) == before


def test_disk_full_during_a_commit_leaves_the_store_as_before(root, stores, rng):
    datasets, _ = stores
    for index in (2, 3):  # staged without a limit; the commit's zarr chunks exceed it
        datasets.put_chunk("a", index, random_rows(rng, 600))
    before = state_of(root), datasets.get("a")
    outcome = run_limited(root, lambda r: DatasetStore(r).commit("a"))
    assert_disk_full(outcome)
    assert (state_of(root), datasets.get("a")) == before
    assert datasets.commit("a").version == 3  # the commit succeeds once there is room


def test_disk_full_during_the_first_commit_leaves_the_store_as_before(root, stores, rng):
    datasets, _ = stores
    datasets.put_chunk("b", 1, random_rows(rng, 600))
    (files, paths), meta = state_of(root), datasets.get("b")
    assert_disk_full(run_limited(root, lambda r: DatasetStore(r).commit("b")))
    files_after, paths_after = state_of(root)
    assert files_after == files and datasets.get("b") == meta
    # the one trace: the segments folder the first commit created, left empty (harmless)
    assert paths_after - paths <= {"datasets/b/segments"} and paths <= paths_after
    assert not any((root / "datasets/b/segments").glob("*")) if paths_after != paths else True


def test_disk_full_during_a_checkpoint_save_leaves_the_store_as_before(root, stores):
    _, checkpoints = stores
    before = state_of(root)
    outcome = run_limited(
        root, lambda r: CheckpointStore(r).save("m", 3, {"A": np.full((2, 400), 3.0), "t": 3}))
    assert_disk_full(outcome)
    assert state_of(root) == before
    assert checkpoints.latest_pass("m") == 2
    assert checkpoints.load("m")["t"] == 2


# ----------------------------------------------------------------------------------------- SIGKILL
def chunk_writes(root: Path, model: str, ack) -> None:
    store = DatasetStore(root)
    for n in range(100000):
        store.create(f"s{n}", 4, "float64")
        store.put_chunk(f"s{n}", 0, np.full((2000, 4), float(n)))
        ack(n)


def commits(root: Path, model: str, ack) -> None:
    store = DatasetStore(root)
    for n in range(100000):
        store.create(f"s{n}", 4, "float64")
        for index in range(3):
            store.put_chunk(f"s{n}", index, np.full((1000, 4), float(n)))
        store.commit(f"s{n}")
        ack(n)


def checkpoint_saves(root: Path, model: str, ack) -> None:
    store = CheckpointStore(root)
    for n in range(1, 100000):
        store.save(model, n, {"A": np.full((8, 20000), float(n)), "t": n})
        ack(n)


LOOPS = {"chunk writes": chunk_writes, "commits": commits, "checkpoint saves": checkpoint_saves}


def _loop_child(loop, root: Path, model: str, sender) -> None:
    loop(root, model, sender.send)


def kill_at_random(runs: list[tuple], rng) -> list[int]:
    """Run each ``(loop, root, model)`` (a function of `LOOPS`, which acknowledges each operation once
    it returned) in its own forked child, all at once; SIGKILL each at a random moment (0.05 to 0.6 s
    after its first acknowledgement); the last acknowledged n of each."""
    children = []
    for loop, root, model in runs:
        receiver, sender = FORK.Pipe(duplex=False)
        child = FORK.Process(target=_loop_child, args=(loop, root, model, sender))
        child.start()
        sender.close()
        children.append((child, receiver))
    last = []
    for child, receiver in children:
        acks = [receiver.recv()]  # one operation done: the loop runs
        time.sleep(float(rng.uniform(0.05, 0.6)))
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        while True:
            try:
                acks.append(receiver.recv())
            except EOFError:
                break
        last.append(max(acks))
    return last


@pytest.mark.parametrize("operation", ["chunk writes", "commits"])
def test_sigkill_during_data_set_writes_leaves_every_set_readable(root, rng, operation):
    folders = [root / f"round{i}" for i in range(KILL_ROUNDS)]
    for folder in folders:
        folder.mkdir()
    for folder, last in zip(folders, kill_at_random([(LOOPS[operation], f, "m") for f in folders], rng)):
        store = DatasetStore(folder)
        listed = {meta.name: meta for meta in store.list()}
        for n in range(last + 1):  # every acknowledged operation is there, whole
            meta = listed.pop(f"s{n}")
            if operation == "commits":
                assert meta.status == "ready" and meta.n_rows == 3000, meta
                assert np.all(np.asarray(store.open_array(f"s{n}")[:]) == float(n))
            else:
                assert meta.status == "open" and meta.staged, meta
        # at most the operation in flight: its set exists (or not) and is consistent
        assert set(listed) <= {f"s{last + 1}"}, sorted(listed)
        for name, meta in listed.items():
            in_flight = float(last + 1)  # the same content again: idempotent if it was stored
            store.put_chunk(name, 0, np.full((2000 if operation == "chunk writes" else 1000, 4), in_flight))
            if meta.status == "ready":
                assert np.asarray(store.open_array(name)[:]).shape == (3000, 4)
            else:
                assert store.commit(name).status == "ready"


def test_sigkill_during_checkpoint_saves_leaves_the_latest_loadable(root, rng):
    store = CheckpointStore(root)
    models = [f"m{i}" for i in range(KILL_ROUNDS)]  # one model per child, all in one data folder
    runs = [(checkpoint_saves, root, model) for model in models]
    for model, last in zip(models, kill_at_random(runs, rng)):
        latest = store.latest_pass(model)
        assert latest in (last, last + 1), (latest, last)  # at most the save in flight is lost
        state = store.load(model)
        assert state["t"] == latest and np.all(state["A"] == float(latest))
        # a temporary file the kill left behind does not block the next save
        store.save(model, latest + 1, {"A": np.zeros((8, 10)), "t": latest + 1})
        assert store.load(model)["t"] == latest + 1
