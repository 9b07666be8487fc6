"""Defaults that hold on any data, through HTTP: sigma "auto", the warm start, both convergence figures,
and degenerate data ending with a clear message (never NaN components)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.spatial.distance

from kpca.estimator import KernelHebbianPCA
from tests.api_checks import upload_rows, wait_for_fit


@pytest.fixture(scope="module")
def digits_set(api, digits):
    upload_rows(api, "digits", digits[:400])
    return digits[:400]


def test_sigma_auto_is_resolved_once_reported_and_served(api, digits_set, digits):
    body = {"name": "auto", "dataset": "digits", "kernel": {"type": "gaussian"}, "n_components": 4,
            "params": {"passes": 3}}
    created = api.post("/v1/models", json=body).json()
    assert created["kernel"] == {"type": "gaussian", "sigma": "auto"}  # as asked
    record = wait_for_fit(api, "auto")
    assert record["status"] == "completed", record["error"]
    distances = scipy.spatial.distance.pdist(digits_set)
    sigma = record["params_used"]["kernel"]["sigma"]
    assert sigma == pytest.approx(np.median(distances[distances > 0]), rel=1e-12)  # 400 rows: all are sampled
    # the warm start is the default; on 400 rows it is exact kernel PCA, and the passes keep it
    assert record["params_used"]["init"] == "subset" and record["params_used"]["init_size"] == 400
    assert record["solver"] == "ritz" and "eta0" not in record["params_used"]  # the default takes no gain
    exact = KernelHebbianPCA(4, sigma=sigma, solver="exact").fit(digits_set)
    Z = np.asarray(api.post("/v1/models/auto/project", json={"rows": digits[1000:1010].tolist()}).json()["components"])
    Z_exact = exact.transform(digits[1000:1010])
    np.testing.assert_allclose(np.abs(Z), np.abs(Z_exact), atol=1e-8)  # up to the components' signs


def test_each_pass_reports_both_figures(api, digits_set):
    body = {"name": "figures", "dataset": "digits", "kernel": {"type": "gaussian", "sigma": 3.0},
            "n_components": 4, "solver": "kha-smd", "params": {"passes": 3, "init": "random"}}
    api.post("/v1/models", json=body)
    record = wait_for_fit(api, "figures")
    assert record["status"] == "completed", record["error"]
    for entry in record["history"]:
        convergence = entry["convergence"]
        assert convergence["metric"] == "excess_error" and convergence["iterate"] > 0
        assert 0 <= convergence["value"] <= convergence["iterate"]  # the served components are the better ones
    assert record["progress"]["convergence"] == record["history"][-1]["convergence"]


@pytest.mark.parametrize("solver, params", [("kha-smd", {"init": "random"}), ("kha-et", {}), ("exact", {})])
def test_rows_all_equal_end_with_a_clear_message(api, solver, params):
    name = f"equal-{solver}"
    upload_rows(api, name, np.ones((50, 3)))
    body = {"name": name, "dataset": name, "kernel": {"type": "linear"}, "n_components": 2, "solver": solver,
            "params": params}
    assert api.post("/v1/models", json=body).status_code == 202
    record = wait_for_fit(api, name)
    assert record["status"] == "failed" and record["error"]["code"] == "degenerate", record["error"]
    assert "no variance" in record["error"]["message"]


@pytest.mark.parametrize("solver", ["kha-smd", "exact"])
def test_components_past_the_rank_are_served_as_such(api, rng, solver):
    """Issue 28: r above the data's rank completes; the components past it have eigenvalue 0, project
    every row to 0, and the record's warnings name them; the others are the exact ones."""
    X = rng.normal(size=(120, 3))
    upload_rows(api, f"flat-{solver}", X)  # a linear kernel on 3 features: rank 3
    body = {"name": f"flat-5-{solver}", "dataset": f"flat-{solver}", "kernel": {"type": "linear"},
            "n_components": 5, "solver": solver}
    api.post("/v1/models", json=body)
    record = wait_for_fit(api, body["name"])
    assert record["status"] == "completed", record["error"]
    assert record["warnings"] and "components 4 to 5 (2 of the 5) carry no variance" in record["warnings"][0]
    lam = np.asarray(record["progress"]["eigenvalues"])
    exact = np.linalg.eigvalsh(np.cov(X.T, bias=True) * X.shape[0])[::-1]
    np.testing.assert_allclose(lam[:3], exact, rtol=1e-6)
    assert np.all(lam[3:] == 0)
    Z = np.asarray(api.post(f"/v1/models/{body['name']}/project", json={"rows": X[:7].tolist()}).json()["components"])
    assert np.all(Z[:, 3:] == 0) and np.all(np.abs(Z[:, :3]).max(axis=0) > 0)
    body = {"name": "flat-5", "dataset": f"flat-{solver}", "kernel": {"type": "linear"}, "n_components": 5}
    # exactly r directions: E_min = 0, so the figure is the relative error, and the fit completes
    api.post("/v1/models", json={**body, "name": f"flat-3-{solver}", "n_components": 3})
    record = wait_for_fit(api, f"flat-3-{solver}")
    assert record["status"] == "completed", record["error"]
    assert record["progress"]["convergence"]["metric"] == "relative_error"
    assert record["progress"]["convergence"]["value"] < 1e-8
