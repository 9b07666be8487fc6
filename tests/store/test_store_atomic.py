from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest
from store_helpers import temp_leftovers

from store.atomic import (
    SCHEMA_VERSION,
    atomic_write_bytes,
    atomic_write_json,
    file_lock,
    read_json,
    remove_tree,
    write_via_temp,
)


def test_write_bytes_replaces_and_leaves_no_temp(root):
    target = root / "f.bin"
    atomic_write_bytes(target, b"one")
    atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"two"
    assert temp_leftovers(root) == []


def test_exclusive_write_refuses_existing_file(root):
    target = root / "f.bin"
    atomic_write_bytes(target, b"first", exclusive=True)
    with pytest.raises(FileExistsError):
        atomic_write_bytes(target, b"second", exclusive=True)
    assert target.read_bytes() == b"first"
    assert temp_leftovers(root) == []


def test_failed_write_keeps_old_content_and_removes_temp(root):
    target = root / "f.bin"
    atomic_write_bytes(target, b"good")

    def crash(handle):
        handle.write(b"half-writ")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        write_via_temp(target, crash)
    assert target.read_bytes() == b"good"
    assert temp_leftovers(root) == []


def test_json_round_trip_with_numpy_values(root):
    target = root / "doc.json"
    atomic_write_json(target, {"schema_version": SCHEMA_VERSION, "k": np.int64(3),
                               "v": np.arange(3, dtype=np.float32), "s": "é"})
    doc = read_json(target)
    assert doc == {"schema_version": 1, "k": 3, "v": [0.0, 1.0, 2.0], "s": "é"}
    assert json.loads(target.read_text(encoding="utf-8"))["schema_version"] == 1


@pytest.mark.parametrize("bad", [{"x": 1}, [1, 2], {"schema_version": 1, "x": float("nan")},
                                 {"schema_version": 1, "x": float("inf")}])
def test_json_refuses_unversioned_or_non_finite_documents(root, bad):
    with pytest.raises(ValueError):
        atomic_write_json(root / "doc.json", bad)
    assert not (root / "doc.json").exists()
    assert temp_leftovers(root) == []


def test_read_json_refuses_newer_schema(root):
    (root / "doc.json").write_text('{"schema_version": 2}')
    with pytest.raises(ValueError, match="schema_version"):
        read_json(root / "doc.json")


def test_exclusive_lock_excludes_and_shared_locks_coexist(root):
    lock = root / ".lock"
    inside = []
    holder_ready, release = threading.Event(), threading.Event()

    def hold_exclusive():
        with file_lock(lock, shared=False):
            holder_ready.set()
            release.wait(60)
            inside.append("holder-out")

    def wait_shared():
        with file_lock(lock, shared=True):
            inside.append("waiter-in")

    holder = threading.Thread(target=hold_exclusive)
    holder.start()
    assert holder_ready.wait(60)
    waiter = threading.Thread(target=wait_shared)
    waiter.start()
    time.sleep(0.2)  # time to enter, were it not blocked (a loaded machine may not use it: the check is then weaker)
    assert inside == []  # the shared waiter is blocked by the exclusive holder
    release.set()
    holder.join(60)
    waiter.join(60)
    assert inside == ["holder-out", "waiter-in"]

    with file_lock(lock, shared=True):
        entered = threading.Event()

        def second_shared():
            with file_lock(lock, shared=True):
                entered.set()

        other = threading.Thread(target=second_shared)
        other.start()
        assert entered.wait(60)  # two shared holders at once (blocked, it would wait for ever)
        other.join(60)


def test_lock_on_deleted_folder_raises_file_not_found(root):
    folder = root / "gone"
    folder.mkdir()
    remove_tree(folder)
    with pytest.raises(FileNotFoundError):
        with file_lock(folder / ".lock"):
            pass


def test_remove_tree_leaves_nothing(root):
    folder = root / "tree"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "f").write_bytes(b"x")
    assert remove_tree(folder) is True
    assert list(root.iterdir()) == []
    assert remove_tree(folder) is False
