"""The fault-injection matrix of docs/security.md (*Damaged files*, issue 52): every kind of stored file x
every damage of `tests.damage` (emptied, truncated, bit-flipped with its mtime put back, deleted, replaced
by a folder), through a real server. In each cell: the resource reads as damaged (a 409 ``corrupt`` naming
the file, or the kind's own answer, below), everything else answers as before, and ``DELETE`` (or the
repair the answer names) works. Each cell starts from the same files: the resource's folders are copied
aside before the damage and put back after it (`restored`)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.api_checks import assert_error, fitted, upload_rows
from tests.damage import DAMAGES, damage
from tests.service.test_api_denoise_tuned import PNG, noisy_of, png, scene

SERVER_SETTINGS = {"n_workers": 2}
KERNEL = {"type": "gaussian", "sigma": 3.0}


@pytest.fixture(scope="module")
def rows() -> np.ndarray:
    return np.random.default_rng(52).normal(size=(60, 4))


@pytest.fixture(scope="module")
def world(api, data_dir, rows) -> dict:
    """Every kind of resource, and a neighbour of each that must stay untouched; the passes served."""
    for name in ("dset", "rows", "other-rows"):
        upload_rows(api, name, rows, chunks=2)
    upload_rows(api, "staged", rows, chunks=3, commit=False)
    model = {"dataset": "rows", "n_components": 2, "solver": "exact", "kernel": KERNEL}
    served = {name: fitted(api, {**model, "name": name})["checkpoint"]["pass"]
              for name in ("plain", "other")}
    fitted(api, {**model, "name": "on-dset", "dataset": "dset"})
    sharded = fitted(api, {**model, "name": "sharded", "solver": "kha", "placement": {"workers": 2},
                                      "params": {"passes": 2, "seed": 0}})
    served["sharded"] = sharded["checkpoint"]["pass"]
    parts = data_dir / "models" / "sharded" / "checkpoints" / f"pass-{served['sharded']:05d}.parts"
    assert len(list(parts.iterdir())) == 2, "the sharded fit left no parts"
    clustering = {"dataset": "rows", "n_clusters": 2, "solver": "exact", "kernel": KERNEL}
    for name in ("groups", "other-groups"):
        fitted(api, {**clustering, "name": name}, "/v1/clusterings")
    image = png(noisy_of(scene(24, 1), 0.1, 2))
    for job in ("job", "other-job"):
        r = api.post(f"/v1/denoise-image?job={job}&tune=off&patch=5&stride=2", content=image, headers=PNG)
        assert r.status_code == 200, r.text
    return {"served": served, "rows": rows}


def everything_else_answers(api, rows: np.ndarray) -> None:
    """The neighbours of every kind answer as before."""
    for path in ("/v1/datasets", "/v1/models", "/v1/clusterings", "/v1/datasets/other-rows",
                 "/v1/datasets/other-rows/data.npy", "/v1/models/other", "/v1/clusterings/other-groups",
                 "/v1/image-jobs/other-job"):
        assert api.get(path).status_code == 200, path
    assert api.post("/v1/models/other/project", json={"rows": rows[:3].tolist()}).status_code == 200


@dataclass(frozen=True)
class Kind:
    """One kind of stored file: where it is, the folders of its resource (and of what depends on it), how
    a damage shows (``probe(api, damage)``) and how the damaged resource is removed or repaired."""

    path: Callable[[Path, dict], Path]
    folders: tuple[str, ...]
    probe: Callable
    remove: Callable


def corrupt(response, named: str, field: str = "name") -> None:
    message = assert_error(response, 409, "corrupt", field)["message"]
    assert named in message, message


def listed_as_corrupt(api, route: str, key: str, name: str) -> None:
    entries = {entry["name"]: entry for entry in api.get(route).json()[key]}
    assert entries[name]["status"] == "corrupt", entries[name]


def probe_meta(api, how):
    corrupt(api.get("/v1/datasets/dset"), "meta.json")
    listed_as_corrupt(api, "/v1/datasets", "datasets", "dset")
    corrupt(api.get("/v1/datasets/dset/data.npy"), "meta.json")


def probe_rows(named: str):
    def probe(api, how):
        corrupt(api.get("/v1/datasets/dset/data.npy"), named, "dataset")
        r = api.post("/v1/models/on-dset/project", json={"rows": [[0.0] * 4]})
        assert r.status_code == 409 and r.json()["error"]["code"] == "corrupt", r.text
    return probe


def remove_dset(api):
    assert api.delete("/v1/datasets/dset?cascade=true").status_code == 204
    assert_error(api.get("/v1/datasets/dset"), 404, "not_found", "name")
    assert_error(api.get("/v1/models/on-dset"), 404, "not_found", "name")


def probe_staged(api, how):
    if how != "bit-flipped":  # seen without reading the rows
        assert api.get("/v1/datasets/staged").json()["damaged_staged"] == [1]
    message = assert_error(api.post("/v1/datasets/staged/commit", json={}), 422, "invalid", "chunks")["message"]
    assert "staged chunk 1 is damaged" in message and "upload chunk 1 again" in message, message


def repair_staged(api, rows):
    part = np.array_split(rows, 3)[1]
    assert api.put("/v1/datasets/staged/chunks/1", json={"rows": part.tolist()}).status_code == 200
    committed = api.post("/v1/datasets/staged/commit", json={}).json()
    assert (committed["status"], committed["n_rows"]) == ("ready", len(rows))


def probe_record(route: str, key: str, name: str, document: str):
    def probe(api, how):
        corrupt(api.get(f"{route}/{name}"), document)
        listed_as_corrupt(api, route, key, name)
    return probe


def remove(route: str, name: str):
    def remove_it(api, rows):
        assert api.delete(f"{route}/{name}").status_code == 204
        assert api.get(f"{route}/{name}").status_code == 404
    return remove_it


def probe_served(name: str):
    def probe(api, how):
        for route in ("project", "reconstruct"):
            corrupt(api.post(f"/v1/models/{name}/{route}", json={"rows": [[0.0] * 4]}), "checkpoint of pass")
        corrupt(api.get(f"/v1/models/{name}/export"), "checkpoint of pass")
    return probe


def probe_labels(api, how):
    corrupt(api.get("/v1/clusterings/groups"), "labels.npy")
    assert api.get("/v1/clusterings/groups?labels_limit=0").json()["status"] == "completed"


def probe_job(api, how):
    if how == "deleted":  # an image job is its record alone: nothing of it is left
        assert_error(api.get("/v1/image-jobs/job"), 404, "not_found", "job")
    else:
        corrupt(api.get("/v1/image-jobs/job"), "job.json", "job")


def checkpoint(model: str, part: bool = False):
    def path(data_dir: Path, world: dict) -> Path:
        manifest = data_dir / "models" / model / "checkpoints" / f"pass-{world['served'][model]:05d}.npz"
        if not part:
            return manifest
        return sorted(manifest.with_suffix(".parts").iterdir())[0]
    return path


def at(relative: str):
    return lambda data_dir, world: data_dir / relative


KINDS = {
    "dataset meta.json": Kind(at("datasets/dset/meta.json"), ("datasets/dset", "models/on-dset"), probe_meta,
                              lambda api, rows: remove_dset(api)),
    "segment digest document": Kind(at("datasets/dset/segments/0001.json"), ("datasets/dset", "models/on-dset"),
                                    probe_rows("segments/0001.json"), lambda api, rows: remove_dset(api)),
    "segment zarr.json": Kind(at("datasets/dset/segments/0001.zarr/zarr.json"), ("datasets/dset", "models/on-dset"),
                              probe_rows("zarr.json"), lambda api, rows: remove_dset(api)),
    "zarr chunk": Kind(at("datasets/dset/segments/0001.zarr/c/0/0"), ("datasets/dset", "models/on-dset"),
                       probe_rows("segments/0001.zarr/c/0/0"), lambda api, rows: remove_dset(api)),
    "staged chunk": Kind(at("datasets/staged/staging/000001.npy"), ("datasets/staged",), probe_staged,
                         repair_staged),
    "model record": Kind(at("models/plain/model.json"), ("models/plain",),
                         probe_record("/v1/models", "models", "plain", "model.json"), remove("/v1/models", "plain")),
    "checkpoint": Kind(checkpoint("plain"), ("models/plain",), probe_served("plain"), remove("/v1/models", "plain")),
    "sharded checkpoint's manifest": Kind(checkpoint("sharded"), ("models/sharded",), probe_served("sharded"),
                                          remove("/v1/models", "sharded")),
    "sharded checkpoint's part": Kind(checkpoint("sharded", part=True), ("models/sharded",), probe_served("sharded"),
                                      remove("/v1/models", "sharded")),
    "clustering record": Kind(at("clusterings/groups/clustering.json"), ("clusterings/groups",),
                              probe_record("/v1/clusterings", "clusterings", "groups", "clustering.json"),
                              remove("/v1/clusterings", "groups")),
    "clustering labels": Kind(at("clusterings/groups/labels.npy"), ("clusterings/groups",), probe_labels,
                              remove("/v1/clusterings", "groups")),
    "image job record": Kind(at("image-jobs/job/job.json"), ("image-jobs/job",), probe_job,
                             lambda api, rows: api.delete("/v1/image-jobs/job").raise_for_status()),
}


@contextmanager
def restored(data_dir: Path, folders: tuple[str, ...], backup: Path) -> Iterator[None]:
    """The resource's ``folders`` copied to ``backup`` before the block and put back, as they were, after it."""
    for folder in folders:
        shutil.copytree(data_dir / folder, backup / folder, symlinks=True)
    try:
        yield
    finally:
        for folder in folders:
            shutil.rmtree(data_dir / folder, ignore_errors=True)
            shutil.copytree(backup / folder, data_dir / folder, symlinks=True)


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_damaged_file_is_reported_where_it_is_and_nothing_else_is_affected(api, data_dir, world, tmp_path, kind,
                                                                             how):
    spec = KINDS[kind]
    with restored(data_dir, spec.folders, tmp_path):
        damage(spec.path(data_dir, world), how)
        spec.probe(api, how)
        everything_else_answers(api, world["rows"])
        spec.remove(api, world["rows"])
        everything_else_answers(api, world["rows"])
