"""Default gains on data and kernels the defaults were not tuned on."""

import numpy as np
import pytest
import scipy.linalg
import scipy.spatial.distance
from sklearn.datasets import load_digits, make_blobs

from bench._stepwise import DenseRows
from kpca.driver import PassHooks, run_passes
from kpca.errors import Degenerate
from kpca.estimator import KernelHebbianPCA
from kpca.kernels import KernelSpec, kernel_block
from kpca.metrics import excess_error, minimal_error
from kpca.rows import KernelRows
from tests.naive import start_state


@pytest.mark.parametrize("name,spec", [
    ("blobs", KernelSpec("gaussian", sigma=2.0)),
    ("blobs", KernelSpec("laplacian", sigma=5.0)),
    ("digits-wide", KernelSpec("gaussian", sigma=8.0)),
])
def test_default_gains_converge_on_unseen_data(name, spec, digits):
    X = make_blobs(500, n_features=10, centers=6, random_state=3)[0] if name == "blobs" else digits[1200:1700]
    rows = KernelRows(X, spec)
    rows.fit_centering()
    Kc = rows.dense()
    e_min = minimal_error(scipy.linalg.eigvalsh(Kc), 8)
    for solver, bound in (("kha-et", 0.1), ("kha-smd", 0.05)):
        state = start_state(solver, 8, rows, seed=0)
        state, _ = run_passes(DenseRows(Kc), state, 15, 100)
        assert excess_error(Kc, state["AK"], e_min) < bound, (solver, spec)


@pytest.mark.parametrize("init", ["random", pytest.param("auto", marks=pytest.mark.slow)])
def test_a_kernel_scaled_by_any_constant_gives_the_same_run(digits, init):
    """Scale-free starts and gains: K' times 10^k (k = -6..6) gives the same excess error per pass (eq. 22)
    to 1e-8 relative, no gain reductions, and the same components (A K' A^T, A scaled by 10^(-k/2))."""
    rows = KernelRows(digits[:300], KernelSpec("gaussian", sigma=3.0))
    rows.fit_centering()
    Kc = rows.dense()
    e_min = minimal_error(scipy.linalg.eigvalsh(Kc), 5)
    runs = {}
    for k in range(-6, 7):
        c = 10.0 ** k
        scaled = DenseRows(c * Kc)
        curve = []
        state = start_state("kha-smd", 5, scaled, seed=2, init=init)
        state, _ = run_passes(scaled, state, 6, 64, PassHooks(
            on_pass=lambda s, c=c: curve.append(excess_error(c * Kc, s["AK"], c * e_min))))
        assert "gain_reductions" not in state, (k, state.get("gain_reductions"))
        runs[k] = (np.array(curve), state["A"] * np.sqrt(c))
    curve0, A0 = runs[0]
    assert np.all(np.isfinite(curve0)) and curve0[-1] < 0.05
    for k, (curve, A) in runs.items():
        np.testing.assert_allclose(curve, curve0, rtol=1e-8, atol=1e-12, err_msg=f"kernel x 1e{k}")
        np.testing.assert_allclose(A, A0, rtol=1e-7, atol=1e-9 * np.abs(A0).max(), err_msg=f"kernel x 1e{k}")


def test_linear_kernel_on_data_in_any_units_gives_the_same_components(digits):
    """The estimator on digits in pixels 0..16, divided by 16, and times 1e3: the same projections
    up to the data's scale (the bug: a start that did not scale with the kernel diverged on raw pixels)."""
    X = digits[:400] * 16.0
    fits = {scale: KernelHebbianPCA(6, kernel="linear", init="random", passes=8).fit(X * scale)
            for scale in (1 / 16, 1.0, 1e3)}
    reference = fits[1.0].transform(X[:20])
    for scale, fit in fits.items():
        assert "gain_reductions" not in fit.params_used_, scale
        np.testing.assert_allclose(fit.transform(X[:20] * scale) / scale, reference, rtol=1e-6,
                                   atol=1e-8 * np.abs(reference).max())


def test_polynomial_kernel_on_raw_digits_completes():
    """Regression (issue 14): degree 2 on pixels 0..16 (trace(K')/l ~ 1e6) raised Diverged even with eta0 1e-13."""
    X = load_digits().data[:1000]
    for init in ("random", "auto"):
        fit = KernelHebbianPCA(8, kernel="polynomial", degree=2, init=init).fit(X)
        assert np.all(np.isfinite(fit.coefficients_)) and np.all(fit.eigenvalues_ > 0), init


def test_sigma_auto_is_the_median_distance_and_is_reported(digits):
    X = digits[:500]
    fit = KernelHebbianPCA(4, passes=2).fit(X)  # sigma="auto" is the default
    distances = scipy.spatial.distance.pdist(X)
    assert fit.kernel_["sigma"] == pytest.approx(np.median(distances[distances > 0]), rel=1e-12)
    assert fit.get_params()["sigma"] == "auto"  # the estimator's parameter is left as given
    with pytest.raises(ValueError, match="kernel.sigma"):  # "auto" is resolved before any kernel value
        kernel_block(X[:2], X[:3], KernelSpec("gaussian"))


def test_degenerate_data_ends_with_a_clear_message():
    equal = np.ones((60, 3))
    for solver in ("kha-smd", "exact"):
        with pytest.raises(Degenerate, match="all rows"):
            KernelHebbianPCA(2, kernel="linear", solver=solver, init="random").fit(equal)
    with pytest.raises(Degenerate, match="equal"):
        KernelHebbianPCA(2, solver="kha-smd").fit(equal)  # sigma "auto": no distance to take a width from
