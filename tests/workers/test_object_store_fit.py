"""Fits, serving, archives and clusterings with the data location an S3 URL (issue 57), run in this process over
moto's server on loopback (`bench._s3_server`), against the same on a folder: the same projections to rounding,
an export of one imported into the other, labels read back, and the stop flags of serving requests. The cluster
processes, a killed worker and a store outage: tests/workers/test_object_store_cluster.py."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from bench._s3_server import BUCKET
from store.jobs.archive import ModelExport, import_archive
from store.jobs.records import ModelRecord
from store.objects.open import is_url, local_folder, location, prepared
from store.places import checkpoints_at, clusterings_at, datasets_at, models_at
from store.stop_flags import StopFlags
from tests.store.store_helpers import write_archive
from workers.archive import check_served
from workers.fit import FitJob
from workers.serve import project_rows

ROWS = np.random.default_rng(57).normal(size=(240, 6))


@pytest.fixture(scope="module")
def s3_url():
    from bench._s3_server import s3_server

    with s3_server() as server, pytest.MonkeyPatch.context() as patch:
        for name, value in server.environment().items():
            patch.setenv(name, value)
        yield f"s3://{BUCKET}/{uuid.uuid4().hex}"


def fitted(where: str) -> str:
    """Data set ``d`` (ROWS in chunks of 100, 100, 40) and model ``m`` (KHA-SMD, 3 components, 4 passes from a
    random start) fitted at ``where`` in this process."""
    datasets = datasets_at(where)
    datasets.create("d", 6, "float64")
    for index, start in enumerate((0, 100, 200)):
        datasets.put_chunk("d", index, ROWS[start: start + 100])
    datasets.commit("d")
    models_at(where).create(ModelRecord.new("m", datasets.get("d"), kernel={"type": "gaussian", "sigma": 2.0},
                                            n_components=3, solver="kha-smd",
                                            params={"passes": 4, "seed": 1, "init": "random", "block_size": 40}))
    assert FitJob(where).run("m") == "completed", models_at(where).get("m").error
    return where


def test_a_fit_on_s3_equals_the_fit_on_a_folder_and_its_archive_travels(s3_url, tmp_path):
    folder = fitted(str(tmp_path / "data"))
    s3 = fitted(s3_url)
    probe = np.random.default_rng(3).normal(size=(20, 6))
    want, got = project_rows(folder, "m", probe), project_rows(s3, "m", probe)
    assert np.array_equal(want, got)  # the same rows, the same arithmetic: the store changes nothing
    assert np.array_equal(checkpoints_at(s3).load("m")["A"], checkpoints_at(folder).load("m")["A"])
    record = models_at(s3).get("m")
    assert [p.pass_ for p in record.history] == [1, 2, 3, 4] and record.checkpoint is not None

    # S3 -> a folder, and the folder's archive -> S3 under another name
    path = tmp_path / "m.tar"
    write_archive(ModelExport(s3, "m"), path)
    copy = import_archive(str(tmp_path / "other"), path, name="copy", check_served=check_served)
    assert copy.status == "completed"
    assert np.array_equal(project_rows(str(tmp_path / "other"), "copy", probe), want)
    back = tmp_path / "back.tar"
    write_archive(ModelExport(folder, "m"), back)
    imported = import_archive(s3, back, name="back", dataset="d", check_served=check_served)
    assert imported.dataset == "d"  # the same rows: the data set is reused
    assert np.array_equal(project_rows(s3, "back", probe), want)
    assert not any(local_folder(s3).joinpath(".imports").iterdir())  # the import's scratch is removed


def test_clustering_labels_and_coordinates_on_s3(s3_url):
    registry = clusterings_at(s3_url)
    from store.jobs.clusterings import ClusteringRecord

    datasets = datasets_at(s3_url)
    if not datasets.exists("c"):
        datasets.create("c", 2, "float64")
        datasets.put_chunk("c", 0, np.random.default_rng(0).normal(size=(30, 2)))
        datasets.commit("c")
    registry.create(ClusteringRecord.new("k", datasets.get("c"), kernel={"type": "gaussian", "sigma": 1.0},
                                         n_clusters=3, solver="spectral", params={}))
    labels = np.arange(30) % 3
    digest = registry.save_labels("k", labels)
    assert registry.labels("k", 5, 4, sha256=digest) == ([2, 0, 1, 2], 30)
    assert registry.labels_array("k", digest).dtype == np.int64
    coordinates = registry.save_coordinates("k", np.ones((30, 2)))
    assert registry.coordinates("k", coordinates).shape == (30, 2)
    registry.objects.put("clusterings/k/labels.npy", b"\x93NUMPY damaged")
    from store.errors import Damaged

    with pytest.raises(Damaged, match="labels"):
        registry.labels("k", sha256=digest)
    registry.delete("k")


def test_stop_flags_on_s3(s3_url):
    flags = StopFlags(s3_url)
    token = flags.new_token()
    assert not flags.raised(token)
    flags.raise_flag(token)
    assert flags.raised(token) and flags.checker(token)()
    flags.clear(token)
    assert not flags.raised(token)


def test_a_location_is_a_path_or_an_s3_url(tmp_path):
    assert is_url("s3://b/p") and not is_url(tmp_path)
    assert location("s3://b/p/") == "s3://b/p" and location(tmp_path / "x" / "..") == str(tmp_path)
    assert prepared(tmp_path / "new") == str(tmp_path / "new") and (tmp_path / "new").is_dir()
    with pytest.raises(ValueError, match="s3://bucket"):
        prepared("s3:///nobucket")
    assert local_folder("s3://b/p") == local_folder("s3://b/p") != local_folder("s3://b/q")


def test_a_status_poll_on_an_object_store_never_reads_on_the_event_loop(s3_url):
    """`service.record_views.RecordViews.kept` runs on the event loop: on a folder it is a ``stat``, on an object
    store a request, so it answers None there and the route reads in the thread pool (`RecordViews.json`)."""
    from service.record_views import RecordViews

    where = s3_url + "/views"
    datasets = datasets_at(where)
    datasets.create("v", 2, "float64")
    datasets.put_chunk("v", 0, np.ones((5, 2)))
    registry, views, name = models_at(where, recent_s=1.0), RecordViews(), "polled"
    registry.create(ModelRecord.new(name, datasets.commit("v"), kernel={"type": "gaussian", "sigma": 1.0},
                                    n_components=1, solver="kha", params={"passes": 1}))
    assert views.kept(registry, name) is None
    assert views.json(registry, name, lambda record: record.name.encode()) == name.encode()
