"""A data folder written before issue 25 (records of schema version 2 with ``params.workers``,
``exact_limit`` and the resolved kernel in ``params_used``; commit 6c1b2c0, written by
tests/fixtures/make_legacy_v2.py) still loads, serves what it served, and resumes, sharded checkpoint
included."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.api_checks import wait_for_fit

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "legacy_v2"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """A copy of the legacy data folder (the module's server, one worker, serves it)."""
    root = tmp_path_factory.mktemp("legacy2") / "data"
    shutil.copytree(FIXTURE / "data", root)
    return root


@pytest.fixture(scope="module")
def expected():
    with np.load(FIXTURE / "expected.npz") as archive:
        return {key: archive[key] for key in archive.files}


def test_the_records_on_disk_are_version_2(data_dir):
    doc = json.loads((data_dir / "models" / "digits-auto" / "model.json").read_text())
    assert doc["schema_version"] == 2 and doc["params"]["workers"] == 1 and doc["exact_limit"] == 3000
    assert isinstance(doc["params_used"]["kernel"]["sigma"], float)  # "auto" resolved by the fit
    doc = json.loads((data_dir / "clusterings" / "digits-clusters" / "clustering.json").read_text())
    assert doc["schema_version"] == 1 and doc["exact_limit"] == 3000


def test_placement_and_the_fitted_kernel_are_read_from_version_2(api):
    auto = api.get("/v1/models/digits-auto").json()
    assert auto["status"] == "completed" and auto["placement"] == {"workers": 1, "device": "auto"}
    assert "workers" not in auto["params"] and "workers" not in auto["params_used"]
    assert auto["kernel"] == {"type": "gaussian", "sigma": "auto"}  # as asked
    assert auto["params_used"]["kernel"]["sigma"] > 0  # as fitted
    assert api.get("/v1/models/digits-sharded").json()["placement"] == {"workers": 2, "device": "auto"}
    clusters = api.get("/v1/clusterings/digits-clusters", params={"labels_limit": 0}).json()
    assert clusters["status"] == "completed" and clusters["params_used"]["kernel"]["sigma"] > 0


def test_what_they_served_is_served(api, expected):
    probe = expected["probe"].tolist()
    Z = api.post("/v1/models/digits-auto/project", json={"rows": probe}).json()["components"]
    np.testing.assert_allclose(Z, expected["digits-auto"], rtol=0, atol=1e-12 * np.abs(expected["digits-auto"]).max())
    labels = api.post("/v1/clusterings/digits-clusters/predict", json={"rows": probe}).json()["labels"]
    np.testing.assert_array_equal(labels, expected["digits-clusters"])


@pytest.mark.parametrize("name", ["digits-cancelled", "digits-sharded"])
def test_a_cancelled_fit_resumes_to_where_an_uninterrupted_fit_ends(api, data_dir, expected, name):
    """The sharded one resumes from its checkpoint in parts on the one worker this server has."""
    passes = int(expected["resume_passes"])
    response = api.post(f"/v1/models/{name}/resume", json={"passes": passes})
    assert response.status_code == 202, response.text
    record = wait_for_fit(api, name)
    assert record["status"] == "completed", record["error"]
    assert [h["pass"] for h in record["history"]] == list(range(1, passes + 1))
    Z = api.post(f"/v1/models/{name}/project", json={"rows": expected["probe"].tolist()}).json()["components"]
    np.testing.assert_allclose(Z, expected["reference"], rtol=0, atol=1e-10 * np.abs(expected["reference"]).max())
    doc = json.loads((data_dir / "models" / name / "model.json").read_text())
    assert doc["schema_version"] == 4 and doc["placement"]["exact_limit"] == 3000
    assert doc["checkpoint"]["pass"] == doc["progress"]["pass"] and doc["checkpoint"]["sha256"]  # names what it serves
    assert "workers" not in doc["params"] and doc["fit_kernel"] == {"type": "gaussian", "sigma": 3.0}
