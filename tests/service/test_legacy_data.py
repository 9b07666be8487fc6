"""A data folder written before the typed model record (schema version 1, commit c103d21) still loads,
serves identical projections, and resumes (tests/fixtures/make_legacy_v1.py wrote it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.api_checks import wait_for_fit

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "legacy_v1"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """A copy of the legacy data folder (the module's server serves it)."""
    root = tmp_path_factory.mktemp("legacy") / "data"
    shutil.copytree(FIXTURE / "data", root)
    return root


@pytest.fixture(scope="module")
def expected():
    with np.load(FIXTURE / "expected.npz") as archive:
        return {key: archive[key] for key in archive.files}


def test_the_legacy_records_are_version_1_on_disk(data_dir):
    for name in ("digits-smd", "digits-exact", "digits-cancelled"):
        doc = json.loads((data_dir / "models" / name / "model.json").read_text())
        assert doc["schema_version"] == 1 and doc["params"]["eta0"] is None  # v1: every parameter, None if left out


def test_data_set_and_models_load(api):
    dataset = api.get("/v1/datasets/digits").json()
    assert (dataset["status"], dataset["version"], dataset["n_rows"]) == ("ready", 2, 400)
    models = {m["name"]: m for m in api.get("/v1/models", params={"full": "true"}).json()["models"]}
    assert {name: m["status"] for name, m in models.items()} == {
        "digits-cancelled": "cancelled", "digits-exact": "completed", "digits-smd": "completed"}
    smd = models["digits-smd"]
    assert "schema_version" not in smd and smd["params"] == {"passes": 5, "seed": 0, "xi": 0.99,
                                                            "init": "random", "kernel_precision": "float64"}
    assert models["digits-exact"]["params"] == {"kernel_precision": "float64"}  # the KHA-only keys are gone
    assert [h["pass"] for h in smd["history"]] == [1, 2, 3, 4, 5]
    assert smd["progress"]["convergence"]["metric"] == "excess_error"
    assert api.get("/v1/models/digits-cancelled/checkpoints").json()["checkpoints"][-1]["pass"] == 2


@pytest.mark.parametrize("name", ["digits-smd", "digits-exact"])
def test_projections_are_those_served_before(api, expected, name):
    Z = api.post(f"/v1/models/{name}/project", json={"rows": expected["probe"].tolist()}).json()["components"]
    np.testing.assert_allclose(Z, expected[name], rtol=0, atol=1e-12 * np.abs(expected[name]).max())


def test_denoising_is_that_served_before(api, expected):
    rows = api.post("/v1/models/digits-smd/denoise", json={"rows": expected["probe"].tolist(),
                                                           "method": "fixed-point"}).json()["rows"]
    # Fixed-point iterations carry the rounding of the kernel's jitted exp, which numba compiles for the
    # host's CPU: another host's answer differs in the seventh digit, another model's in the first.
    np.testing.assert_allclose(rows, expected["digits-smd-denoised"], atol=1e-6)


def test_the_cancelled_model_resumes_to_where_an_uninterrupted_fit_ends(api, data_dir, expected):
    passes = int(expected["resume_passes"])
    response = api.post("/v1/models/digits-cancelled/resume", json={"passes": passes})
    assert response.status_code == 202, response.text
    record = wait_for_fit(api, "digits-cancelled")
    assert record["status"] == "completed", record["error"]
    assert [h["pass"] for h in record["history"]] == list(range(1, passes + 1))
    Z = api.post("/v1/models/digits-cancelled/project", json={"rows": expected["probe"].tolist()}).json()
    np.testing.assert_allclose(Z["components"], expected["reference"], rtol=0,
                               atol=1e-10 * np.abs(expected["reference"]).max())
    doc = json.loads((data_dir / "models" / "digits-cancelled" / "model.json").read_text())
    assert doc["schema_version"] == 4 and doc["params"]["passes"] == passes  # rewritten in version 4
