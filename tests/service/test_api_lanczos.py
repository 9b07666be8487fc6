"""The lanczos solver through HTTP: one history record per iteration, the exact figure at the end, cancel."""

import numpy as np

from kpca.estimator import KernelHebbianPCA
from tests.api_checks import upload_rows, wait_for_fit, wait_for_pass


def test_listed_as_a_one_shot_solver(api):
    solvers = {s["name"]: s for s in api.get("/v1/solvers").json()["solvers"]}
    assert solvers["lanczos"]["iterative"] is False
    assert (solvers["lanczos"]["shardable"], solvers["lanczos"]["clusterable"]) == (False, True)
    assert (solvers["kha-smd"]["shardable"], solvers["nystrom"]["clusterable"]) == (True, False)
    names = {p["name"] for p in solvers["lanczos"]["params"]}
    assert {"tol", "max_iter", "seed", "block", "kernel_precision"} <= names


def test_fit_records_each_iteration_and_ends_exact(api, digits):
    X = digits[:500]
    upload_rows(api, "digits", X)
    body = {"name": "reference", "dataset": "digits", "kernel": {"type": "gaussian", "sigma": 3.0},
            "n_components": 8, "solver": "lanczos", "params": {"tol": 1e-10, "init": "random"}}
    assert api.post("/v1/models", json=body).status_code == 202
    record = wait_for_fit(api, "reference")
    assert record["status"] == "completed", record["error"]
    history = record["history"]
    assert [h["pass"] for h in history] == list(range(1, len(history) + 1))
    *iterations, final = history
    assert len(iterations) >= 3 and all(h["convergence"]["metric"] == "residual" for h in iterations)
    residuals = [h["convergence"]["value"] for h in iterations]
    assert residuals[-1] <= 1e-10 < residuals[0]
    # the last record: the figure of the served model, exact kernel PCA (l is below the exact limit)
    assert final["convergence"]["metric"] == "excess_error" and abs(final["convergence"]["value"]) < 1e-8
    assert record["progress"]["convergence"] == final["convergence"] and record["progress"]["fraction"] == 1.0
    used = record["params_used"]
    assert (used["tol"], used["max_iter"], used["block"], used["init"]) == (1e-10, 100, 32, "random")
    exact = KernelHebbianPCA(8, sigma=3.0, solver="exact").fit(X)
    np.testing.assert_allclose(record["progress"]["eigenvalues"], exact.eigenvalues_, rtol=1e-8)
    new = digits[1000:1020]
    Z = np.asarray(api.post("/v1/models/reference/project", json={"rows": new.tolist()}).json()["components"])
    np.testing.assert_allclose(np.abs(Z), np.abs(exact.transform(new)), atol=1e-6)


def test_cancel_stops_between_iterations(api):
    """A slow case on purpose: points on an ellipse whose axes differ by 1e-4, so that the kernel's
    eigenvalues come in pairs split by about 1e-4 of their size, and no guard vectors: the third
    component (half of a pair) takes about a thousand iterations to 1e-12."""
    theta = 2 * np.pi * np.arange(400) / 400
    upload_rows(api, "ellipse", np.c_[np.cos(theta), (1 + 1e-4) * np.sin(theta)])
    body = {"name": "slow", "dataset": "ellipse", "kernel": {"type": "gaussian", "sigma": 0.5}, "n_components": 3,
            "solver": "lanczos", "params": {"tol": 1e-12, "block": 0, "init": "random", "max_iter": 10_000}}
    assert api.post("/v1/models", json=body).status_code == 202
    wait_for_pass(api, "slow", 3)
    assert api.post("/v1/models/slow/cancel", json={}).status_code == 202
    record = wait_for_fit(api, "slow")
    assert record["status"] == "cancelled", record
    done = record["progress"]["pass"]
    assert 3 <= done < 10_000 and len(record["history"]) == done
    assert all(h["convergence"]["metric"] == "residual" for h in record["history"])
