"""The solvers over centres through HTTP (real server, real cluster): fit, project and denoise with each;
their parameters checked as 422s naming the field; a model over centres serves with its data set gone."""

import numpy as np
import pytest

from kpca.estimator import KernelHebbianPCA
from kpca.preimage import reconstruct
from tests.api_checks import assert_error, upload_rows, wait_for_fit
from workers.serve import load_model

N = 300
KERNEL = {"type": "gaussian", "sigma": 3.0}
PARAMS = {"subsampled": {"size": 100, "seed": 1}, "nystrom": {"landmarks": 100, "seed": 1},
          "nystrom-weighted": {"landmarks": 60, "seed": 1}, "rskpca": {"ell": 3.0}}


@pytest.fixture(scope="module")
def digits_set(api, digits):
    upload_rows(api, "digits", digits[:N], chunks=3)
    return digits[:N]


@pytest.fixture(scope="module")
def fitted(api, digits_set):
    """One model per solver, fitted concurrently; their final records."""
    for solver, params in PARAMS.items():
        body = {"name": f"m-{solver}", "dataset": "digits", "kernel": KERNEL, "n_components": 6, "solver": solver,
                "params": params}
        assert api.post("/v1/models", json=body).status_code == 202
    return {solver: wait_for_fit(api, f"m-{solver}") for solver in PARAMS}


def test_the_catalogue_lists_them_as_serving_centres(api):
    solvers = {s["name"]: s for s in api.get("/v1/solvers").json()["solvers"]}
    for name in PARAMS:
        assert solvers[name]["serves"] == "centres" and not solvers[name]["iterative"]
    params = {p["name"]: p for p in solvers["rskpca"]["params"]}
    assert params["ell"]["schema"]["default"] == 4.0 and params["density"]["schema"]["enum"] == [
        "shadow", "kmeans", "paring", "herding"]


@pytest.mark.parametrize("solver", list(PARAMS))
def test_fit_project_and_denoise(api, digits_set, digits, fitted, solver):
    record = fitted[solver]
    assert record["status"] == "completed", record["error"]
    used = record["params_used"]
    m = {"subsampled": "size", "nystrom": "landmarks", "nystrom-weighted": "landmarks", "rskpca": "centres"}[solver]
    assert 6 < used[m] < N and len(record["history"]) == 1
    convergence = record["progress"]["convergence"]  # eq. 22 on the 300 training rows
    assert convergence["metric"] == "excess_error" and 0 < convergence["value"] < 0.5, convergence
    # the service's model is the estimator's, run on the same rows with the same parameters
    reference = KernelHebbianPCA(6, sigma=3.0, solver=solver, solver_params=PARAMS[solver]).fit(digits_set)
    assert reference.params_used_[m] == used[m]
    X = digits[1000:1010]
    Z = api.post(f"/v1/models/m-{solver}/project", json={"rows": X.tolist()}).json()["components"]
    np.testing.assert_allclose(Z, reference.transform(X), atol=1e-9)
    np.testing.assert_allclose(record["progress"]["eigenvalues"], reference.eigenvalues_, rtol=1e-9)
    noisy = X[:3] + np.random.default_rng(0).normal(scale=0.2, size=(3, 64))
    denoised = np.asarray(api.post(f"/v1/models/m-{solver}/denoise", json={"rows": noisy.tolist()}).json()["rows"])
    assert denoised.shape == (3, 64) and np.isfinite(denoised).all()
    np.testing.assert_allclose(denoised, reconstruct(reference.model_, noisy, method="auto"), atol=1e-6)


def test_rskpca_reports_what_the_shadow_estimate_kept(fitted):
    """By default at most max(10 r, l / 10) centres (60 of 300 here): the ell in effect, its radius and the
    error bound of seed 004 eq. 21 it guarantees are reported."""
    used = fitted["rskpca"]["params_used"]
    assert used["density"] == "shadow" and used["max_centres"] == 60 and used["centres"] <= 60
    assert used["ell"] <= 3.0 and used["epsilon"] == pytest.approx(np.sqrt(2) * 3.0 / used["ell"])
    assert used["mmd_bound"] == pytest.approx(np.sqrt(2 * (1 - np.exp(-1 / used["ell"] ** 2))))


@pytest.mark.parametrize("solver, params, field", [
    ("rskpca", {"ell": 0}, "params.ell"), ("rskpca", {"ell": "big"}, "params.ell"),
    ("rskpca", {"density": "parzen"}, "params.density"), ("rskpca", {"centres": 40}, "params.centres"),
    ("rskpca", {"density": "kmeans", "centres": 301}, "params.centres"),
    ("rskpca", {"max_centres": 3}, "params.max_centres"), ("rskpca", {"landmarks": 50}, "params.landmarks"),
    ("nystrom", {"landmarks": 4}, "params.landmarks"), ("nystrom", {"landmarks": 301}, "params.landmarks"),
    ("nystrom-weighted", {"kmeans_passes": 0}, "params.kmeans_passes"), ("subsampled", {"size": 2.5}, "params.size"),
    ("subsampled", {"size": 6}, "params.size"),
])
def test_bad_parameters_are_422_naming_the_field(api, digits_set, solver, params, field):
    body = {"name": "bad", "dataset": "digits", "kernel": KERNEL, "n_components": 6, "solver": solver,
            "params": params}
    assert_error(api.post("/v1/models", json=body), 422, "invalid", field)


def test_the_shadow_estimate_needs_a_radial_kernel(api, digits_set):
    body = {"name": "bad-poly", "dataset": "digits", "kernel": {"type": "polynomial", "degree": 2},
            "n_components": 6, "solver": "rskpca"}
    message = assert_error(api.post("/v1/models", json=body), 422, "invalid", "params.density")["message"]
    assert "radial" in message and "kmeans" in message
    body.update(name="poly-kmeans", params={"density": "kmeans", "centres": 40})
    assert api.post("/v1/models", json=body).status_code == 202
    record = wait_for_fit(api, "poly-kmeans")
    assert record["status"] == "completed" and record["params_used"]["centres"] <= 40


def test_a_model_over_centres_serves_without_its_training_rows(api, digits, data_dir):
    """The data set is deleted before the first projection: the rskpca model still projects (its m
    centres are in its checkpoint), with sigma "auto" resolved at the fit; a model expanded over its
    training rows cannot be loaded any more."""
    upload_rows(api, "gone", digits[300:600], chunks=3)
    for name, solver in (("gone-rs", "rskpca"), ("gone-exact", "exact")):
        body = {"name": name, "dataset": "gone", "kernel": {"type": "gaussian"}, "n_components": 5, "solver": solver}
        assert api.post("/v1/models", json=body).status_code == 202
        assert wait_for_fit(api, name)["status"] == "completed"
    # the exact model needs the rows: a 409 naming it (not the rskpca model), then a cascade deletes it
    message = api.delete("/v1/datasets/gone").json()["error"]["message"]
    assert "'gone-exact'" in message and "gone-rs" not in message
    assert api.delete("/v1/datasets/gone", params={"cascade": "true"}).status_code == 204
    assert not (data_dir / "datasets" / "gone").exists()
    assert api.get("/v1/models/gone-exact").status_code == 404
    X = digits[1500:1505]
    response = api.post("/v1/models/gone-rs/project", json={"rows": X.tolist()})
    assert response.status_code == 200, response.text
    Z = np.asarray(response.json()["components"])
    record = api.get("/v1/models/gone-rs").json()
    sigma = record["params_used"]["kernel"]["sigma"]
    reference = KernelHebbianPCA(5, sigma=sigma, solver="rskpca").fit(digits[300:600])
    np.testing.assert_allclose(Z, reference.transform(X), atol=1e-9)
    assert reference.params_used_["centres"] == record["params_used"]["centres"] < 300
    assert load_model(str(data_dir), "gone-rs").model.rows.n_rows == record["params_used"]["centres"]
    with pytest.raises(Exception):
        load_model(str(data_dir), "gone-exact")


def test_transform_a_data_set_through_a_model_over_centres(api, digits_set, fitted, data_dir):
    """``/transform`` (one dask task per chunk) gives what ``/project`` gives, row for row."""
    from store import DatasetStore

    r = api.post("/v1/models/m-rskpca/transform", json={"dataset": "digits", "output": "digits-rskpca"})
    assert r.status_code == 201, r.text
    assert r.json()["n_rows"] == N and r.json()["n_features"] == 6
    direct = np.asarray(api.post("/v1/models/m-rskpca/project", json={"rows": digits_set.tolist()}).json()["components"])
    np.testing.assert_allclose(DatasetStore(data_dir).open_array("digits-rskpca")[:], direct, atol=1e-9)
