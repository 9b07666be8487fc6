"""Autoencoder KPCA (akpca, ds-akpca; seed 003) through HTTP: fit, progress, reconstruct and denoise with
the model's own decoder, resume, and the kernel and sizes they refuse."""

from __future__ import annotations

import numpy as np
import pytest

from kpca.driver import run_passes
from kpca.kernels import KernelSpec
from kpca.noise import gaussian_noise, speckle_noise
from kpca.rows import KernelRows
from kpca.solvers import SOLVERS, FitContext
from tests.api_checks import assert_error, upload_rows, wait_for_fit

POLY2 = {"type": "polynomial", "degree": 2, "offset": 0, "gamma": 1}
SERVER_SETTINGS = {"exact_limit": 250}  # ds-akpca is limited to exact_limit rows


def pooled(X):
    """8x8 digits averaged over 2x2 pixel blocks: 16 features."""
    return X.reshape(-1, 4, 2, 4, 2).mean(axis=(2, 4)).reshape(X.shape[0], -1)


@pytest.fixture(scope="module")
def sets(api, digits):
    X = pooled(digits)
    upload_rows(api, "small", X[:200])
    upload_rows(api, "large", X[:300])
    return X


def local_fit(solver, X, k, passes, seed):
    """The same fit in this process: the worker's defaults (block size: all rows), the same seed."""
    rows = KernelRows(X, KernelSpec(**POLY2))
    params = SOLVERS[solver].resolved({"seed": seed}, FitContext(X.shape[0], k))
    return SOLVERS[solver].model(run_passes(rows, SOLVERS[solver].start(rows, k, params), passes, X.shape[0])[0])


@pytest.mark.parametrize("solver, dataset, rows", [("akpca", "large", 300), ("ds-akpca", "small", 200)])
def test_fit_reconstruct_and_denoise(api, sets, solver, dataset, rows):
    name = f"{solver}-digits"
    body = {"name": name, "dataset": dataset, "kernel": POLY2, "n_components": 6, "solver": solver,
            "params": {"passes": 4, "seed": 2}}
    assert api.post("/v1/models", json=body).status_code == 202
    record = wait_for_fit(api, name)
    assert record["status"] == "completed", record["error"]
    used = record["params_used"]
    assert (used["eta0"], used["lanczos_tol"], used["lanczos_max_iter"]) == (1.0, 1e-6, 64)
    figures = [entry["convergence"]["value"] for entry in record["history"]]
    assert len(figures) == 4 and record["history"][0]["convergence"]["metric"] == "relative_reconstruction_error"
    assert figures[-1] < 0.2 and record["progress"]["gains"] == [pytest.approx(0.5)]  # eta0 / sqrt(1 + 3)

    held_out = sets[1000:1040]
    reference = local_fit(solver, sets[:rows], 6, 4, seed=2)  # the worker's fit, bit for bit
    out = api.post(f"/v1/models/{name}/reconstruct", json={"rows": held_out.tolist()})
    np.testing.assert_allclose(out.json()["rows"], reference.reconstruct(held_out), atol=1e-12)
    Z = api.post(f"/v1/models/{name}/project", json={"rows": held_out.tolist()}).json()["components"]
    np.testing.assert_allclose(Z, reference.project(held_out), atol=1e-12)
    assert np.sum((np.asarray(out.json()["rows"]) - held_out) ** 2) < 0.2 * np.sum(held_out**2)

    rng = np.random.default_rng(7)
    for noisy in (gaussian_noise(held_out, 0.3, rng), speckle_noise(held_out, 0.4, rng)):
        denoised = api.post(f"/v1/models/{name}/denoise", json={"rows": noisy.tolist(), "method": "auto"})
        assert denoised.status_code == 200, denoised.text
        assert np.sum((np.asarray(denoised.json()["rows"]) - held_out) ** 2) < np.sum((noisy - held_out) ** 2)
    for method in ("gradient", "learned"):  # pre-images of kernel expansions: not for these models
        response = api.post(f"/v1/models/{name}/reconstruct", json={"rows": held_out[:2].tolist(), "method": method})
        assert "does not apply" in assert_error(response, 422, "invalid", "method")["message"]


def test_resume_continues_the_fit(api, sets):
    body = {"name": "resumed", "dataset": "large", "kernel": POLY2, "n_components": 4, "solver": "akpca",
            "params": {"passes": 2, "seed": 5}}
    api.post("/v1/models", json=body)
    assert wait_for_fit(api, "resumed")["status"] == "completed"
    assert api.post("/v1/models/resumed/resume", json={"passes": 4}).status_code == 202
    record = wait_for_fit(api, "resumed")
    assert record["status"] == "completed" and len(record["history"]) == 4
    Z = api.post("/v1/models/resumed/project", json={"rows": sets[1000:1005].tolist()}).json()["components"]
    np.testing.assert_allclose(Z, local_fit("akpca", sets[:300], 4, 4, seed=5).project(sets[1000:1005]), atol=1e-12)


@pytest.mark.parametrize("kernel", [{"type": "gaussian", "sigma": 1.0}, {"type": "polynomial", "degree": 2},
                                    {"type": "polynomial", "degree": 3, "offset": 0}])
@pytest.mark.parametrize("solver", ["akpca", "ds-akpca"])
def test_another_kernel_fails_the_fit_with_a_clear_message(api, sets, kernel, solver):
    """The kernel is not among what a solver's check sees at creation (its parameters and the data's
    size), so the fit's start refuses it: a failed fit naming the kernel, not a 500 or a NaN model."""
    name = f"wrong-{solver}-{kernel['type']}-{kernel.get('degree', 0)}-{'offset' in kernel}"
    body = {"name": name, "dataset": "small", "kernel": kernel, "n_components": 4, "solver": solver}
    assert api.post("/v1/models", json=body).status_code == 202
    record = wait_for_fit(api, name)
    assert record["status"] == "failed" and record["error"]["code"] == "invalid", record
    assert record["error"]["message"].startswith("kernel: autoencoder KPCA is defined for the degree-2 polynomial")


def test_ds_akpca_refuses_more_rows_than_the_exact_limit(api, sets):
    body = {"name": "too-many", "dataset": "large", "kernel": POLY2, "n_components": 4, "solver": "ds-akpca"}
    message = assert_error(api.post("/v1/models", json=body), 422, "invalid", "solver")["message"]
    assert "limited to 250 rows" in message and "use akpca" in message


def test_transform_denoises_a_data_set_with_the_decoder(api, sets, data_dir):
    """``/transform`` with operation denoise runs the model's decoder chunk by chunk: what
    ``/reconstruct`` gives, row for row."""
    from store import DatasetStore

    body = {"name": "for-transform", "dataset": "small", "kernel": POLY2, "n_components": 4, "solver": "akpca",
            "params": {"passes": 2, "seed": 3}}
    api.post("/v1/models", json=body)
    assert wait_for_fit(api, "for-transform")["status"] == "completed"
    r = api.post("/v1/models/for-transform/transform",
                 json={"dataset": "small", "output": "small-denoised", "operation": "denoise"})
    assert r.status_code == 201, r.text
    assert r.json()["n_rows"] == 200 and r.json()["n_features"] == 16
    direct = api.post("/v1/models/for-transform/reconstruct", json={"rows": sets[:200].tolist()}).json()["rows"]
    np.testing.assert_allclose(DatasetStore(data_dir).open_array("small-denoised")[:], direct, atol=1e-9)

