"""The lanczos solver against the exact eigendecomposition, out of core, with progress and cancel."""

import numpy as np
import pytest
import scipy.linalg
import zarr

from bench._common import subspace_angles
from kpca.errors import Degenerate, Stopped
from kpca.estimator import KernelHebbianPCA
from kpca.kernels import KernelSpec, median_distance
from kpca.params import ParamError
from kpca.rows import KernelRows
from kpca.solvers import SOLVERS, FitContext, exact_components
from kpca.solvers._lanczos import block_product, lobpcg
from tests.kpca_helpers import orthonormality_error


def fit(X, spec, r, report=None, rows=None, **params):
    """``(state, rows)`` of a lanczos fit of r components (the given parameters, the others defaulted)."""
    solver = SOLVERS["lanczos"]
    rows = KernelRows(X, spec) if rows is None else rows
    context = FitContext(n_rows=X.shape[0], n_components=r)
    return solver.fit(rows, r, solver.resolved(params, context), context, report=report), rows


def dense(X, spec):
    rows = KernelRows(X, spec)
    rows.fit_centering()
    return rows.dense()


def kernels(X):
    sigma = median_distance(X)
    return {"gaussian": KernelSpec("gaussian", sigma=sigma), "polynomial": KernelSpec("polynomial", degree=2),
            "laplacian": KernelSpec("laplacian", sigma=sigma)}


@pytest.mark.parametrize("kernel", ["gaussian", "polynomial", "laplacian"])
@pytest.mark.parametrize("r", [8, 16])
def test_lanczos_equals_exact(digits, kernel, r):
    """At tol 1e-10: eigenvalues to 1e-8 relative, the spans to 1e-6 rad, A K' A^T = I."""
    X = digits[:700]
    spec = kernels(X)[kernel]
    state, _ = fit(X, spec, r, tol=1e-10)
    Kc = dense(X, spec)
    lam, A = exact_components(Kc, r)
    assert state["converged"] and state["residual"] <= 1e-10
    np.testing.assert_allclose(state["eigenvalues"], lam, rtol=1e-8)
    assert np.max(subspace_angles(state["A"], A, Kc)) < 1e-6
    assert orthonormality_error(state["A"], state["A"] @ Kc) < 1e-8
    # each component alone: the same eigenvector, the same sign (largest-magnitude entry positive)
    np.testing.assert_allclose(state["A"] @ Kc @ A.T, np.eye(r), atol=1e-6)


def test_served_projections_equal_exact(digits):
    """Through the estimator, with solver_params: new points project as with the exact solver."""
    X, new = digits[:800], digits[1000:1050]
    lanczos = KernelHebbianPCA(8, solver="lanczos", solver_params={"tol": 1e-10, "max_iter": 50}).fit(X)
    exact = KernelHebbianPCA(8, solver="exact").fit(X)
    assert lanczos.params_used_["tol"] == 1e-10 and lanczos.params_used_["max_iter"] == 50
    Z, Z_exact = lanczos.transform(new), exact.transform(new)
    signs = np.sign(np.sum(Z * Z_exact, axis=0))
    np.testing.assert_allclose(Z * signs, Z_exact, atol=1e-7 * np.abs(Z_exact).max())
    np.testing.assert_allclose(lanczos.eigenvalues_, exact.eigenvalues_, rtol=1e-10)


def test_the_kept_training_projections_are_a_k_of_the_served_components(digits):
    """The model's ``AK`` (the training rows' projections that pre-images, denoising and progress read)
    is A K' of the served A, not diag(lambda) A: at tol 1e-3 the two differ by the Ritz residual (about
    1e-4 relative), which scored the fit 300x worse than its projections are (issue 53)."""
    X = digits[:800]
    model = KernelHebbianPCA(8, solver="lanczos", solver_params={"tol": 1e-3, "init_size": 100}).fit(X)
    assert model.state_["residual"] > 1e-6  # a fit that stopped with a residual to show
    served = model.transform(X).T
    scale = np.abs(served).max()
    np.testing.assert_allclose(model.model_.AK, served, rtol=0, atol=1e-10 * scale)


def test_solver_params_names_an_unknown_parameter(digits):
    with pytest.raises(ParamError, match="tolerance") as caught:
        KernelHebbianPCA(4, solver="lanczos", solver_params={"tolerance": 1e-3}).fit(digits[:100])
    assert caught.value.field == "tolerance"


class NoKernelRows(KernelRows):
    """Kernel rows that are never formed: only products with them (`left_product`) and a subset's own
    square are allowed."""

    def block(self, indices):
        raise AssertionError("the fit formed kernel rows")

    def dense(self):
        raise AssertionError("the fit formed the kernel matrix")


@pytest.mark.parametrize("init", ["subset", pytest.param("random", marks=pytest.mark.slow)])
def test_never_forms_kernel_rows(digits, init):
    X = digits[:1500]  # more rows than the subset start's 1000
    spec = KernelSpec("gaussian", sigma=3.0)
    state, _ = fit(X, spec, 8, rows=NoKernelRows(X, spec), tol=1e-10, init=init)
    lam, _ = exact_components(dense(X, spec), 8)
    np.testing.assert_allclose(state["eigenvalues"], lam, rtol=1e-8)


def test_block_product_is_the_product_with_the_kernel_matrix(digits, rng):
    X = digits[:300]
    spec = KernelSpec("laplacian", sigma=2.0)
    rows = KernelRows(X, spec)
    rows.fit_centering()
    V = rng.normal(size=(300, 5))
    np.testing.assert_allclose(block_product(rows, V, block_rows=64), rows.dense() @ V, rtol=1e-11, atol=1e-11)


def test_from_zarr_with_small_chunks(digits, tmp_path):
    """The same fit from a chunked array on disk, read chunk by chunk (zarr is the test's, not kpca's)."""
    X = digits[:700]
    array = zarr.create_array(store=str(tmp_path / "x.zarr"), shape=X.shape, chunks=(64, X.shape[1]), dtype="float64")
    array[:] = X
    spec = KernelSpec("gaussian", sigma=3.0)
    rows = KernelRows(zarr.open_array(str(tmp_path / "x.zarr"), mode="r"), spec, cache_bytes=4 * 64 * 64 * 8)
    state, _ = fit(X, spec, 8, rows=rows, tol=1e-10)
    assert rows.chunk_rows == 64 and rows.reads > 4 * rows.n_chunks  # chunks were read again, pass after pass
    in_memory, _ = fit(X, spec, 8, tol=1e-10)
    np.testing.assert_allclose(state["eigenvalues"], in_memory["eigenvalues"], rtol=1e-12)
    np.testing.assert_allclose(state["A"], in_memory["A"], atol=1e-9 * np.abs(in_memory["A"]).max())


def test_float32_kernel_tiles_reach_the_default_tolerance(digits):
    """kernel_precision float32 (the worker's rows in float32): the default tol 1e-6 is above its
    rounding floor, and the eigenvalues are those of float64 to about float32's precision."""
    X = digits[:1200]
    spec = KernelSpec("gaussian", sigma=3.0)
    rows = KernelRows(X, spec, dtype=np.float32, compute_dtype=np.float32)
    state, _ = fit(X, spec, 8, rows=rows, kernel_precision="float32")
    assert state["converged"] and state["residual"] <= 1e-6
    lam, _ = exact_components(dense(X, spec), 8)
    np.testing.assert_allclose(state["eigenvalues"], lam, rtol=1e-5)


def test_reports_each_iteration_and_stops_when_asked(digits):
    X = digits[:600]
    spec = KernelSpec("gaussian", sigma=3.0)
    seen = []
    state, _ = fit(X, spec, 8, report=lambda it: seen.append(it) and False, tol=1e-10, max_iter=60, init="random")
    assert [it.iteration for it in seen] == list(range(1, state["iterations"] + 1))
    assert all(it.iterations == 60 and it.metric == "residual" and it.eigenvalues.shape == (8,) for it in seen)
    residuals = [it.value for it in seen]
    assert all(b < a for a, b in zip(residuals, residuals[1:])), residuals
    assert residuals[-1] == state["residual"] <= 1e-10 < residuals[0]
    np.testing.assert_array_equal(seen[-1].eigenvalues, state["eigenvalues"])

    asked = []
    with pytest.raises(Stopped):
        fit(X, spec, 8, report=lambda it: asked.append(it.iteration) or it.iteration == 2, tol=1e-10, init="random")
    assert asked == [1, 2]


def test_max_iter_ends_the_fit_unconverged(digits):
    state, _ = fit(digits[:500], KernelSpec("gaussian", sigma=3.0), 8, tol=1e-12, max_iter=2, init="random")
    assert state["iterations"] == 2 and not state["converged"] and state["residual"] > 1e-12
    assert np.all(np.isfinite(state["A"]))


def test_fewer_directions_than_components_give_zero_components(rng):
    """A linear kernel on 3 features spans 3 directions: components 4 and 5 are zero, never NaN."""
    X = rng.normal(size=(200, 3))
    state, _ = fit(X, KernelSpec("linear"), 5, tol=1e-10)
    lam_all = np.linalg.eigvalsh(np.cov(X.T, bias=True) * 200)[::-1]
    np.testing.assert_allclose(state["eigenvalues"][:3], lam_all, rtol=1e-10)
    assert np.all(np.isfinite(state["A"])) and np.all(state["A"][3:] == 0)
    assert np.all(np.abs(state["eigenvalues"][3:]) < 1e-10 * lam_all[0])


def test_indefinite_kernel_matches_exact(digits):
    """tanh is not positive definite (here 109 positive and 290 negative eigenvalues): the leading
    eigenpairs as the exact solver gives them."""
    X = digits[:400]
    spec = KernelSpec("tanh", gamma=0.1, offset=-1.0)
    Kc = dense(X, spec)
    assert scipy.linalg.eigvalsh(Kc)[0] < -0.01 * scipy.linalg.eigvalsh(Kc)[-1]
    state, _ = fit(X, spec, 8, tol=1e-10)
    lam, A = exact_components(Kc, 8)
    np.testing.assert_allclose(state["eigenvalues"], lam, rtol=1e-8)
    assert np.max(subspace_angles(state["A"], A, Kc)) < 1e-6


def test_fewer_positive_eigenvalues_than_components(rng):
    """tanh on 2 features: q positive eigenvalues, then ~0 and negative ones; asking for q + 3
    components serves the last 3 as zero components, never NaN."""
    X = rng.normal(size=(200, 2))
    spec = KernelSpec("tanh", gamma=1.0, offset=0.0)
    Kc = dense(X, spec)
    lam_all = scipy.linalg.eigvalsh(Kc)[::-1]
    q = int(np.sum(lam_all > 1e-10 * lam_all[0]))
    state, _ = fit(X, spec, q + 3, tol=1e-8)
    np.testing.assert_allclose(state["eigenvalues"][:q], lam_all[:q], rtol=1e-6)
    assert np.all(np.abs(state["eigenvalues"][q:]) <= 1e-10 * lam_all[0])
    assert np.all(np.isfinite(state["A"])) and np.all(state["A"][q:] == 0) and np.all(state["A"][:q].any(axis=1))


def test_rows_all_equal_are_degenerate():
    with pytest.raises(Degenerate, match="no variance"):
        fit(np.ones((50, 3)), KernelSpec("gaussian", sigma=1.0), 2)


def test_more_vectors_than_rows(digits):
    """r + block at least l: the iterate spans everything and the first Rayleigh-Ritz step is exact."""
    X = digits[:30]
    spec = KernelSpec("gaussian", sigma=3.0)
    state, _ = fit(X, spec, 5, tol=1e-10, init="random")
    lam, _ = exact_components(dense(X, spec), 5)
    assert state["iterations"] == 1
    np.testing.assert_allclose(state["eigenvalues"], lam, rtol=1e-10)


def test_lobpcg_on_a_dense_matrix(rng):
    """The iteration alone, on a matrix with a known spectrum: stops on the wanted pairs only."""
    Q, _ = np.linalg.qr(rng.normal(size=(300, 300)))
    spectrum = 0.9 ** np.arange(300)
    K = (Q * spectrum) @ Q.T
    lam, V, _, iterations, residual = lobpcg(lambda V: K @ V, rng.normal(size=(300, 12)), 4, 1e-9, 200)
    np.testing.assert_allclose(lam, spectrum[:4], rtol=1e-12)
    assert residual <= 1e-9 and np.max(np.linalg.norm(K @ V - V * lam, axis=0) / lam) <= 1e-9


def test_lobpcg_from_a_start_whose_ritz_values_are_all_negative(rng):
    """An indefinite matrix and a start nearly orthogonal to its one positive direction: every Ritz
    value of the start is < 0. The stopping test scales by the largest |Ritz value| then, so the
    iteration goes on to the positive eigenpair (it used to read the start as converged)."""
    n = 60
    spectrum = np.concatenate([[1.0], -np.linspace(1.0, 3.0, n - 1)])
    K = np.diag(spectrum)
    X0 = rng.normal(size=(n, 5))
    X0[0] *= 1e-3
    lam, V, _, iterations, residual = lobpcg(lambda V: K @ V, X0, 1, 1e-9, 200)
    assert iterations > 1 and residual <= 1e-9
    np.testing.assert_allclose(lam, [1.0], rtol=1e-9)
    assert abs(V[0, 0]) == pytest.approx(1.0, abs=1e-8)


@pytest.mark.parametrize("params, field", [({"init_size": 101}, "init_size"), ({"tol": 0}, "tol"),
                                           ({"max_iter": 0}, "max_iter"), ({"block": -1}, "block")])
def test_parameters_are_checked(params, field):
    context = FitContext(n_rows=100, n_components=4)
    with pytest.raises(ParamError) as caught:
        SOLVERS["lanczos"].resolved(params, context)
    assert caught.value.field == f"params.{field}"


def test_a_tol_not_met_within_max_iter_is_said(digits):
    """A lanczos fit that stops at max_iter above its tol warns (the estimator's ``warnings_``, a model's
    warnings): before issue 56 only the iterative solvers' unmet tol was said, and this fit read as converged."""
    X = np.resize(digits, (1500, 64)) + np.random.default_rng(0).normal(scale=0.05, size=(1500, 64))
    with pytest.warns(UserWarning, match="params.tol 1e-14 not met in 1 iterations"):
        est = KernelHebbianPCA(6, solver="lanczos", sigma=3.0, solver_params={"tol": 1e-14, "max_iter": 1}).fit(X)
    assert est.state_.converged is False and any("not met" in w for w in est.warnings_)
    assert not [w for w in KernelHebbianPCA(6, solver="lanczos", sigma=3.0).fit(X).warnings_ if "not met" in w]
