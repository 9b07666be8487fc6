"""A solver declared in a test module (tests/service/toy_solver.py) is fit and served through the service,
with no other module touched: the plugin setting makes the service and every dask worker import it."""

from __future__ import annotations

import numpy as np
import pytest

from kpca.estimator import KernelHebbianPCA
from tests.api_checks import assert_error, wait_for_fit

SERVER_SETTINGS = {"solver_plugins": ["tests.service.toy_solver"]}


@pytest.fixture(scope="module")
def digits_set(api, digits):
    api.post("/v1/datasets", json={"name": "digits", "n_features": 64, "dtype": "float64"})
    api.put("/v1/datasets/digits/chunks/0", json={"rows": digits[:300].tolist()})
    assert api.post("/v1/datasets/digits/commit", json={}).json()["status"] == "ready"
    return digits[:300]


def test_the_plugin_solver_is_in_the_schema_and_the_catalogue(api):
    schema = api.get("/openapi.json").json()["components"]["schemas"]["ModelCreate"]["properties"]
    assert "toy-subset" in schema["solver"]["enum"] and "kha-smd" in schema["solver"]["enum"]
    assert "size" in schema["params"]["properties"]
    solvers = {s["name"]: s for s in api.get("/v1/solvers").json()["solvers"]}
    assert solvers["toy-subset"]["serves"] == "centres" and not solvers["toy-subset"]["iterative"]
    size = next(p for p in solvers["toy-subset"]["params"] if p["name"] == "size")
    assert size["schema"] == {"type": "integer", "minimum": 2, "default": 50, "description": "rows in the subset"}
    assert solvers["kha-smd"]["iterative"] and {"eta0", "mu", "xi", "passes"} <= {
        p["name"] for p in solvers["kha-smd"]["params"]}
    kernels = {k["type"]: k for k in api.get("/v1/kernels").json()["kernels"]}
    sigma = kernels["gaussian"]["params"][0]
    assert sigma["name"] == "sigma" and not sigma["required"] and {"type": "string", "enum": ["auto"]} in sigma["schema"]["anyOf"]


def test_fit_and_serve_the_plugin_solver(api, digits_set, digits):
    body = {"name": "toy", "dataset": "digits", "kernel": {"type": "gaussian", "sigma": 3.0}, "n_components": 4,
            "solver": "toy-subset", "params": {"size": 120, "seed": 5}}
    assert api.post("/v1/models", json=body).status_code == 202
    record = wait_for_fit(api, "toy")
    assert record["status"] == "completed", record["error"]
    assert record["params_used"]["size"] == 120 and len(record["history"]) == 1
    convergence = record["progress"]["convergence"]  # eq. 22 on all 300 rows: a subset is not the optimum
    assert convergence["metric"] == "excess_error" and 0.001 < convergence["value"] < 1, convergence
    # the model is exact kernel PCA on its 120 rows: projections equal the estimator's on those rows
    subset = np.sort(np.random.default_rng(5).choice(300, 120, replace=False))
    reference = KernelHebbianPCA(4, sigma=3.0, solver="exact").fit(digits_set[subset])
    Z = api.post("/v1/models/toy/project", json={"rows": digits[1000:1010].tolist()}).json()["components"]
    np.testing.assert_allclose(Z, reference.transform(digits[1000:1010]), atol=1e-10)
    np.testing.assert_allclose(record["progress"]["eigenvalues"], reference.eigenvalues_, rtol=1e-10)
    denoised = api.post("/v1/models/toy/denoise", json={"rows": digits[1000:1002].tolist()}).json()["rows"]
    assert np.asarray(denoised).shape == (2, 64) and np.isfinite(denoised).all()


@pytest.mark.parametrize("params, field", [({"size": 1}, "params.size"), ({"passes": 3}, "params.passes"),
                                           ({"size": 2.5}, "params.size")])
def test_the_plugin_solver_parameters_are_checked(api, digits_set, params, field):
    body = {"name": "bad-toy", "dataset": "digits", "kernel": {"type": "gaussian", "sigma": 3.0},
            "n_components": 4, "solver": "toy-subset", "params": params}
    assert_error(api.post("/v1/models", json=body), 422, "invalid", field)
