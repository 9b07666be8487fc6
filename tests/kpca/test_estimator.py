import subprocess
import sys

import numpy as np
import pytest
from sklearn.base import clone

from bench._common import subspace_angles
from kpca.estimator import KernelHebbianPCA


def test_estimator_matches_exact_up_to_rotation(digits):
    X = digits[:300]
    exact = KernelHebbianPCA(5, sigma=3.0, solver="exact").fit(X)
    smd = KernelHebbianPCA(5, sigma=3.0, solver="kha-smd", passes=20).fit(X)
    Kc = exact.rows_.dense()
    assert subspace_angles(smd.coefficients_, exact.coefficients_[:4], Kc).max() < 0.05
    # transforms of new data agree up to an orthogonal map: compare by least squares
    Z_exact, Z_smd = exact.transform(digits[1000:1100]), smd.transform(digits[1000:1100])
    Q, *_ = np.linalg.lstsq(Z_smd, Z_exact, rcond=None)
    rel = np.linalg.norm(Z_smd @ Q - Z_exact) / np.linalg.norm(Z_exact)
    assert rel < 0.1
    assert smd.params_used_["xi"] == 0.99
    # 300 rows: the default warm start is exact kernel PCA, and the passes keep it (gains 0)
    assert smd.params_used_["init"] == "subset" and smd.params_used_["eta0"] == 0.0
    assert subspace_angles(smd.coefficients_, exact.coefficients_, Kc).max() < 1e-6
    cold = KernelHebbianPCA(5, sigma=3.0, solver="kha-smd", passes=20, init="random").fit(X)
    assert cold.params_used_["eta0"] > 0
    assert subspace_angles(cold.coefficients_, exact.coefficients_[:4], Kc).max() < 0.05


def test_exact_transform_of_training_points_is_scaled_eigenvectors(digits):
    X = digits[:200]
    est = KernelHebbianPCA(3, sigma=3.0, solver="exact")
    Z = est.fit_transform(X)
    np.testing.assert_allclose(Z, est.transform(X), atol=1e-10)
    # Z = K' A^T = V sqrt(lambda): columns orthogonal with squared norms lambda
    np.testing.assert_allclose(Z.T @ Z, np.diag(est.eigenvalues_), atol=1e-8 * est.eigenvalues_[0])


def test_sklearn_protocol(digits):
    est = KernelHebbianPCA(4, kernel="polynomial", degree=3, solver="kha-et", passes=3)
    assert est.get_params()["degree"] == 3
    est.set_params(degree=2)
    assert clone(est).get_params()["degree"] == 2
    with pytest.raises(ValueError, match="n_components"):
        KernelHebbianPCA(300).fit(digits[:300])
    with pytest.raises(ValueError, match="solver"):
        KernelHebbianPCA(2, solver="power").fit(digits[:50])
    with pytest.raises(ValueError, match="kernel.sigma"):
        KernelHebbianPCA(2, sigma=-1.0).fit(digits[:50])
    with pytest.raises(ValueError, match="features"):
        KernelHebbianPCA(2, passes=1).fit(digits[:50]).transform(digits[:5, :10])


def test_kpca_imports_no_io_or_service_libraries():
    code = ("import sys, kpca, kpca.estimator, kpca.driver, kpca.rows, kpca.metrics; "
            "bad = [m for m in ('zarr', 'dask', 'distributed', 'fastapi', 'pydantic', 'uvicorn') if m in sys.modules]; "
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_partial_fit_appends_rows_and_continues(digits):
    """The paper's algorithm (a random start, stochastic passes): passes continue over all rows."""
    est = KernelHebbianPCA(4, sigma=3.0, passes=5, random_state=2, init="random", solver="kha-smd")
    est.partial_fit(digits[:200])
    first_t = est.state_["t"]
    est.partial_fit(digits[200:300])
    assert est.coefficients_.shape == (4, 300) and est.state_["pass"] == 10
    assert est.state_["t"] == first_t + 5 * 300
    exact = KernelHebbianPCA(4, sigma=3.0, solver="exact").fit(digits[:300])
    assert subspace_angles(est.coefficients_, exact.coefficients_[:3], exact.rows_.dense()).max() < 0.1


def test_partial_fit_by_default_refines_the_fitted_components_to_the_tol(digits):
    """The default: the fit of 200 rows is exact at its start (no pass), and the appended rows' fit continues
    from its components with Rayleigh-Ritz passes until their residual meets the default tol."""
    est = KernelHebbianPCA(4, sigma=3.0, passes=20, random_state=2)
    est.partial_fit(digits[:200])
    assert (est.state_["pass"], est.state_["residual"], est.state_["converged"]) == (0, 0.0, True)
    est.partial_fit(digits[200:300])
    assert est.coefficients_.shape == (4, 300) and 1 <= est.state_["pass"] < 20 and est.state_["converged"]
    assert est.state_["residual"] <= est.params_used_["tol"] == 1e-3
    exact = KernelHebbianPCA(4, sigma=3.0, solver="exact").fit(digits[:300])
    assert subspace_angles(est.coefficients_, exact.coefficients_, exact.rows_.dense()).max() < 1e-2


def test_solver_params_merge_over_the_arguments(digits):
    """solver_params reaches any declared parameter by name, over the fixed arguments; unknown names are refused."""
    X = digits[:200]
    est = KernelHebbianPCA(3, sigma=3.0, solver="kha-et", passes=2, init="random",
                           solver_params={"passes": 3, "tol": 0.5}).fit(X)
    assert est.params_used_["passes"] == 3 and est.params_used_["tol"] == 0.5
    assert clone(est).get_params()["solver_params"] == {"passes": 3, "tol": 0.5}
    with pytest.raises(ValueError, match="not a parameter of solver kha-et") as caught:
        KernelHebbianPCA(3, solver="kha-et", solver_params={"max_iter": 5}).fit(X)
    assert caught.value.field == "max_iter"


@pytest.mark.parametrize("solver", ["akpca", "ds-akpca"])
def test_autoencoder_solvers_fit_transform_and_reconstruct(digits, solver):
    """akpca and ds-akpca through the estimator: codes from transform, the decoder from model_, no
    expansion coefficients; partial_fit refits on all rows (their state does not grow with the rows)."""
    X = digits[:200]
    est = KernelHebbianPCA(4, kernel="polynomial", degree=2, offset=0.0, gamma=1.0, solver=solver,
                           solver_params={"passes": 3, "seed": 1}).fit(X)
    assert est.coefficients_ is None and est.transform(X[:5]).shape == (5, 4)
    np.testing.assert_array_equal(est.transform(X[:5]), est.model_.project(X[:5]))
    error = np.sum((est.model_.reconstruct(X) - X) ** 2) / np.sum(X**2)
    assert error < 0.3
    est.partial_fit(digits[200:250])
    assert est.state_["pass"] == 3 and est.transform(digits[:2]).shape == (2, 4)



def test_changing_the_callers_array_after_fit_changes_nothing(digits):
    """The fit keeps its own copy of X (scikit-learn's test_kernel_pca_consistent_transform; issue 56): before,
    the fitted rows were the caller's array itself, so writing to X after `fit` changed what `partial_fit`
    continued from (and anything else that reads the training rows again)."""
    X = np.array(digits[:120], dtype=np.float64)
    more = np.array(digits[120:160], dtype=np.float64)
    untouched = KernelHebbianPCA(n_components=4, solver="kha", passes=2, random_state=0).fit(X.copy())
    est = KernelHebbianPCA(n_components=4, solver="kha", passes=2, random_state=0).fit(X)
    X[:] = 0.0
    untouched.partial_fit(more)
    est.partial_fit(more)
    np.testing.assert_array_equal(est.transform(more), untouched.transform(more))
