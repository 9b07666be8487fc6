"""Records kept by the process that read them (`store.jobs.registry._KEPT`, a `store.kept.KeptBySignature`):
one ``stat`` per read while the file is unchanged, and never a record its file no longer holds."""

from __future__ import annotations

import json
import os

import pydantic
import pytest

from store import ModelRegistry
from store.atomic import DIGEST_KEY
from store.errors import Damaged
from store.jobs.records import ModelRecord
from store.kept import KeptBySignature


def created(root, name: str = "m") -> ModelRegistry:
    registry = ModelRegistry(root)
    registry.create(ModelRecord(name=name, dataset="d", solver="kha", kernel={"type": "gaussian", "sigma": 2.0},
                                n_components=2, params={"passes": 3}))
    return registry


def test_an_unchanged_record_is_read_once(root):
    """The same object while the file is unchanged (a read would build a new one), a new one after a write."""
    registry = created(root)
    first = registry.get("m")
    assert registry.get("m") is first
    assert ModelRegistry(root).get("m") is first  # another registry of the same folder: the same kept record
    updated = registry.update("m", status="running")
    again = registry.get("m")
    assert again is not first and again.status == "running" == updated.status
    assert registry.get("m") is again


def test_a_record_changed_in_place_with_its_mtime_restored_is_read_again(root):
    """An edit that keeps the file (same inode, same size) and puts its mtime back still changes its
    ctime: the next read reads the file again, and finds it altered (it fails its digest); the same edit
    with the digest dropped (a record written before records had digests) is read as edited."""
    registry = created(root)
    assert registry.get("m").params == {"passes": 3}
    path = root / "models" / "m" / "model.json"
    before = os.stat(path)
    text = path.read_text()
    assert '"passes": 3' in text or '"passes":3' in text
    with open(path, "r+") as handle:  # in place: no new file
        handle.write(text.replace('"passes": 3', '"passes": 4').replace('"passes":3', '"passes":4'))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    with pytest.raises(Damaged, match="digest"):
        registry.get("m")
    doc = json.loads(path.read_text())
    assert doc["params"] == {"passes": 4}
    del doc[DIGEST_KEY]
    path.write_text(json.dumps(doc))
    assert registry.get("m").params == {"passes": 4}


def test_records_are_frozen(root):
    """A record given to several readers cannot be changed by one of them."""
    record = created(root).get("m")
    with pytest.raises(pydantic.ValidationError):
        record.status = "failed"
    assert record.model_copy(update={"status": "failed"}).status == "failed" and record.status == "queued"


def test_at_most_size_records_are_kept(root):
    kept = KeptBySignature(size=2)
    registry = created(root, "a")
    created(root, "b")
    created(root, "c")
    for name in ("a", "b", "c"):
        kept.put(name, registry.signature(name), registry.get(name))
    assert kept.get("a", registry.signature("a")) is None  # the oldest went
    assert kept.get("c", registry.signature("c")).name == "c"
    assert kept.get("c", ("other",)) is None  # another signature: not kept
