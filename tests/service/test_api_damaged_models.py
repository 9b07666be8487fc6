"""Damaged checkpoints and hostile archives through a real server (issue 30, items 3, 4c, 5 and 10): a
completed model whose checkpoint is deleted, flipped or truncated is a 409 ``corrupt`` on serving and
export (never an older pass, never a 500, never an archive with the damage inside), a resume goes back to
the last intact checkpoint, a checkpoint.npz that would inflate past its limit is refused before it
inflates, and an imported record keeps no ``error`` text."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.api_checks import assert_error, peak_rss_bytes, reset_peak_rss, upload_rows, wait_for_fit
from tests.store.store_helpers import zip_bomb

ROWS, FEATURES = 120, 5
TAR = {"Content-Type": "application/x-tar"}


@pytest.fixture(scope="module")
def train() -> np.ndarray:
    return np.random.default_rng(3131).normal(size=(ROWS, FEATURES))


@pytest.fixture(scope="module")
def dataset(api, train) -> str:
    upload_rows(api, "rows", train, chunks=2)
    return "rows"


def fit(api, name: str, dataset: str, solver: str = "kha", **params) -> dict:
    body = {"name": name, "dataset": dataset, "n_components": 3, "solver": solver,
            "kernel": {"type": "gaussian", "sigma": 3.0}}
    if params:
        body["params"] = params
    r = api.post("/v1/models", json=body)
    assert r.status_code == 202, r.text
    record = wait_for_fit(api, name)
    assert record["status"] == "completed", record
    return record


def checkpoint(data_dir: Path, model: str, pass_index: int) -> Path:
    return data_dir / "models" / model / "checkpoints" / f"pass-{pass_index:05d}.npz"


def flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 8):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def project(api, model: str, rows: np.ndarray):
    return api.post(f"/v1/models/{model}/project", json={"rows": rows.tolist()})


@pytest.mark.parametrize("damage", ["deleted", "flipped", "truncated"])
def test_a_damaged_final_checkpoint_is_corrupt_and_a_resume_goes_back_to_the_last_intact_one(
        api, data_dir, dataset, train, damage):
    name = f"kha-{damage}"
    record = fit(api, name, dataset, passes=3, seed=1, init="random")  # the paper's passes: a checkpoint each
    assert record["progress"]["pass"] == 3
    before = project(api, name, train[:4])
    assert before.status_code == 200  # built and cached by the worker
    final = checkpoint(data_dir, name, 3)
    assert checkpoint(data_dir, name, 2).exists()
    if damage == "deleted":
        final.unlink()
    elif damage == "flipped":
        flip(final)
    else:
        final.write_bytes(final.read_bytes()[: final.stat().st_size // 2])

    # not pass 2 served as if it were pass 3, and not a 500
    message = assert_error(project(api, name, train[:4]), 409, "corrupt", "name")["message"]
    assert api.get(f"/v1/models/{name}").json()["checkpoint"]["pass"] == 3  # what the record names
    assert name in message and "pass 3" in message
    for route in ("reconstruct", "denoise"):
        assert_error(api.post(f"/v1/models/{name}/{route}", json={"rows": train[:2].tolist()}), 409, "corrupt",
                     "name")
    assert_error(api.get(f"/v1/models/{name}/export"), 409, "corrupt", "name")

    r = api.post(f"/v1/models/{name}/resume", json={"passes": 4})
    assert r.status_code == 202, r.text
    resumed = wait_for_fit(api, name)
    assert resumed["status"] == "completed", resumed
    assert resumed["checkpoint"]["pass"] == 4 and [h["pass"] for h in resumed["history"]] == [1, 2, 3, 4]
    assert project(api, name, train[:4]).status_code == 200
    assert api.get(f"/v1/models/{name}/export").status_code == 200


def members(archive: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
        return {info.name: tar.extractfile(info).read() for info in tar}


def pack(parts: dict[str, bytes]) -> bytes:
    """A model archive of ``parts`` with its manifest's sizes and digests recomputed (as an attacker would)."""
    manifest = json.loads(parts["manifest.json"])
    for entry in manifest["members"]:
        body = parts[entry["name"]]
        entry["size"], entry["sha256"] = len(body), hashlib.sha256(body).hexdigest()
    parts = {**parts, "manifest.json": json.dumps(manifest).encode()}
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:", format=tarfile.PAX_FORMAT) as tar:
        for member in ("model.json", "checkpoint.npz", "rows.npy", "manifest.json"):
            info = tarfile.TarInfo(member)
            info.size = len(parts[member])
            tar.addfile(info, io.BytesIO(parts[member]))
    return out.getvalue()


def test_a_checkpoint_that_would_inflate_past_its_limit_is_refused_before_it_inflates(api, dataset):
    fit(api, "exported", dataset, solver="exact")
    parts = members(api.get("/v1/models/exported/export").content)
    bomb = zip_bomb(parts["checkpoint.npz"], 2 << 30)
    assert len(bomb) < 16 << 20
    body = pack({**parts, "checkpoint.npz": bomb})
    before = reset_peak_rss()  # this process runs the server
    r = api.post("/v1/models/import?name=bombed&dataset=bombed-rows", content=body, headers=TAR)
    message = assert_error(r, 422, "invalid", "body")["message"]
    assert "bomb.npy" in message and "at most" in message, message
    assert peak_rss_bytes() - before < 1 << 30  # under 1 GiB more, not 2 GiB
    assert api.get("/v1/models/bombed").status_code == 404
    assert api.get("/v1/datasets/bombed-rows").status_code == 404


def test_a_member_whose_header_does_not_match_its_bytes_is_refused(api, dataset):
    fit(api, "exported-2", dataset, solver="exact")
    parts = members(api.get("/v1/models/exported-2/export").content)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(parts["checkpoint.npz"])) as source, \
            zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            body = source.read(info)
            if info.filename == "A.npy":  # claim more rows than the bytes hold
                header = body[:128].replace(b"(3, ", b"(9, ")
                body = header + body[128:]
            target.writestr(info, body)
    r = api.post("/v1/models/import?name=lying&dataset=lying-rows",
                 content=pack({**parts, "checkpoint.npz": out.getvalue()}), headers=TAR)
    message = assert_error(r, 422, "invalid", "body")["message"]
    assert "A.npy" in message and "declares" in message, message


def test_an_imported_record_keeps_no_error_text(api, dataset, train):
    fit(api, "exported-3", dataset, solver="exact")
    parts = members(api.get("/v1/models/exported-3/export").content)
    record = json.loads(parts["model.json"])
    record["error"] = {"code": "internal", "message": "<script>alert(1)</script> call 555-0100 for help"}
    r = api.post("/v1/models/import?name=clean&dataset=rows",
                 content=pack({**parts, "model.json": json.dumps(record).encode()}), headers=TAR)
    assert r.status_code == 201, r.text
    assert r.json()["error"] is None and api.get("/v1/models/clean").json()["error"] is None
    assert api.get("/v1/models/clean").json()["checkpoint"]["sha256"]
    np.testing.assert_allclose(project(api, "clean", train[:3]).json()["components"],
                               project(api, "exported-3", train[:3]).json()["components"])


@pytest.mark.parametrize("body", [{}, {"passes": 3}], ids=["plain", "same-passes"])
def test_the_advice_of_a_damaged_checkpoint_works_as_given(api, data_dir, dataset, train, body):
    """Issue 52, item 5: the 409 of a completed model's damaged checkpoint says to resume it; a plain
    resume (and one to the same passes) was refused as "completed all passes". It now goes back to the
    last intact checkpoint and runs the passes after it again, to the same total."""
    name = f"advised-{len(body)}"
    fit(api, name, dataset, passes=3, seed=1, init="random")
    flip(checkpoint(data_dir, name, 3))
    message = assert_error(project(api, name, train[:4]), 409, "corrupt", "name")["message"]
    assert f"POST /v1/models/{name}/resume" in message, message
    r = api.post(f"/v1/models/{name}/resume", json=body)
    assert r.status_code == 202, r.text
    resumed = wait_for_fit(api, name)
    assert resumed["status"] == "completed", resumed
    assert resumed["checkpoint"]["pass"] == 3 and [h["pass"] for h in resumed["history"]] == [1, 2, 3]
    assert project(api, name, train[:4]).status_code == 200


def test_a_damaged_checkpoint_of_a_fit_made_in_one_go_is_made_again_by_the_advised_resume(api, data_dir, dataset,
                                                                                        train):
    fit(api, "once", dataset, solver="exact")
    served = api.get("/v1/models/once").json()["checkpoint"]["pass"]
    before = project(api, "once", train[:4]).json()["components"]
    checkpoint(data_dir, "once", served).write_bytes(b"")
    message = assert_error(project(api, "once", train[:4]), 409, "corrupt", "name")["message"]
    assert "POST /v1/models/once/resume" in message, message
    r = api.post("/v1/models/once/resume", json={})
    assert r.status_code == 202, r.text
    assert wait_for_fit(api, "once")["status"] == "completed"
    np.testing.assert_allclose(np.abs(project(api, "once", train[:4]).json()["components"]), np.abs(before),
                               rtol=1e-6, atol=1e-9)
    # the plain advice still holds for an intact completed fit made in one go: nothing to resume
    assert_error(api.post("/v1/models/once/resume", json={}), 409, "conflict", "name")
