"""The object stores behind the store (issue 57): one contract, run against a folder and against an S3 API over
HTTP on loopback (moto's server): atomic writes, create-once and compare-and-swap between racing threads, keys,
leases, and the S3 store riding out an outage."""

import json
import threading
import time

import pytest

from store.objects.folder import FolderObjects
from store.objects.interface import ObjectExists, ObjectMissing, StoreUnavailable, VersionMismatch
from store.objects.leases import LeaseLost, acquire, holder_of, release, renew
from store.objects.open import open_objects
from store.objects.s3 import S3Objects, parse_url


@pytest.fixture(params=["folder", "s3"])
def objects(request, tmp_path):
    if request.param == "folder":
        return FolderObjects(tmp_path / "objects")
    return open_objects(request.getfixturevalue("s3_url"))  # a fresh prefix per test


def test_put_get_version_keys_delete(objects):
    v1 = objects.put("models/m1/record.json", b"one")
    assert objects.get("models/m1/record.json").data == b"one" and objects.version("models/m1/record.json") == v1
    v2 = objects.put("models/m1/record.json", b"two")
    assert v2 != v1 and objects.get("models/m1/record.json").version == v2
    objects.put("models/m2/record.json", b"x")
    objects.put("datasets/d/meta.json", b"y")
    assert list(objects.keys("models/")) == ["models/m1/record.json", "models/m2/record.json"]
    assert list(objects.keys()) == ["datasets/d/meta.json", "models/m1/record.json", "models/m2/record.json"]
    objects.delete("models/m1/record.json")
    objects.delete("models/m1/record.json")  # nothing there: nothing to do
    with pytest.raises(ObjectMissing, match="models/m1/record.json"):
        objects.get("models/m1/record.json")
    assert objects.version("models/m1/record.json") is None
    with pytest.raises(ValueError, match="key"):
        objects.put("../escape", b"")


def test_delete_many_removes_what_is_there(objects):
    for index in range(5):
        objects.put(f"many/{index}", b"x")
    objects.delete_many(["many/0", "many/2", "many/4", "many/absent"])
    assert list(objects.keys("many/")) == ["many/1", "many/3"]
    objects.delete_many([])
    with pytest.raises(ValueError):
        objects.delete_many(["../escape"])


def test_create_once_among_racing_threads(objects):
    wins, barrier = [], threading.Barrier(8)

    def create(i):
        barrier.wait()
        try:
            objects.create("leases/fit", str(i).encode())
            wins.append(i)
        except ObjectExists:
            pass

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and objects.get("leases/fit").data == str(wins[0]).encode()


def test_compare_and_swap_loses_no_update(objects):
    """Four threads add 1 to a counter ten times each by read, change, replace, retrying on a mismatch: 40."""
    objects.put("counter", b"0")

    def add():
        for _ in range(10):
            while True:
                stored = objects.get("counter")
                try:
                    objects.replace("counter", str(int(stored.data) + 1).encode(), stored.version)
                    break
                except VersionMismatch:
                    continue

    threads = [threading.Thread(target=add) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert objects.get("counter").data == b"40"
    old = objects.version("counter")
    objects.put("counter", b"changed")
    with pytest.raises(VersionMismatch):
        objects.replace("counter", b"stale", old)
    with pytest.raises(VersionMismatch):
        objects.delete("counter", old)
    objects.delete("counter", objects.version("counter"))
    with pytest.raises(VersionMismatch):
        objects.replace("counter", b"gone", old)
    for gone in ("counter", "never/was/here"):  # a versioned delete of no object: the same answer from both stores
        with pytest.raises(VersionMismatch):
            objects.delete(gone, old)


def test_leases(objects):
    clock = [1000.0]
    now = lambda: clock[0]  # noqa: E731 - the holders' shared clock, moved by the test
    a = acquire(objects, "leases/m1", "worker-a", ttl=10, now=now)
    assert a is not None and holder_of(objects, "leases/m1", now) == "worker-a"
    assert acquire(objects, "leases/m1", "worker-b", ttl=10, now=now) is None  # live: refused
    a = renew(objects, a, ttl=10, now=now)
    clock[0] += 11  # a stopped renewing: expired
    assert holder_of(objects, "leases/m1", now) is None
    b = acquire(objects, "leases/m1", "worker-b", ttl=10, now=now)
    assert b is not None and holder_of(objects, "leases/m1", now) == "worker-b"
    with pytest.raises(LeaseLost):
        renew(objects, a, now=now)
    assert release(objects, a) is False  # lost already: the new holder's lease is untouched
    assert holder_of(objects, "leases/m1", now) == "worker-b"
    assert release(objects, b) is True and holder_of(objects, "leases/m1", now) is None
    assert acquire(objects, "leases/m1", "worker-c", ttl=10, now=now) is not None  # released: free at once
    assert json.loads(objects.get("leases/m1").data)["holder"] == "worker-c"


def test_one_lease_among_racing_holders(objects):
    won, barrier = [], threading.Barrier(6)

    def take(i):
        barrier.wait()
        if acquire(objects, "leases/m2", f"worker-{i}", ttl=30) is not None:
            won.append(i)

    threads = [threading.Thread(target=take, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and holder_of(objects, "leases/m2") == f"worker-{won[0]}"


def test_s3_store_rides_out_an_outage(s3_server, s3_url):
    """The S3 server stopped for 2 s: a write made meanwhile is retried and lands once it is back; the objects
    written before are still there."""
    server = s3_server
    objects = S3Objects(s3_url)
    objects.put("before", b"kept")
    server.stop()
    restarter = threading.Timer(2.0, server.start)
    restarter.start()
    try:
        started = time.monotonic()
        objects.put("during", b"landed")
        assert time.monotonic() - started >= 1.0  # it waited for the server
    finally:
        restarter.join()
    assert objects.get("during").data == b"landed" and objects.get("before").data == b"kept"


def test_s3_store_unreachable_says_so(monkeypatch):
    """Nothing listening at the endpoint: StoreUnavailable after the retry time, naming what to check."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # discard port: refused
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    with pytest.raises(StoreUnavailable, match="AWS_ENDPOINT_URL"):
        S3Objects("s3://b/p", retry_seconds=1.0).put("x", b"1")


def test_urls():
    assert parse_url("s3://bucket/a/b/") == ("bucket", "a/b") and parse_url("s3://bucket") == ("bucket", "")
    with pytest.raises(ValueError, match="KPCA_DATA_DIR"):
        parse_url("s3:///x")
