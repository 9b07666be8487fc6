"""The default fit (issue 26): a Nystrom start, then Rayleigh-Ritz passes until the relative residual of the
served components meets ``tol``. The residual tracks the served excess error (eq. 22) pass by pass, against
the exact eigendecomposition; ``tol`` 0 runs every pass; a tol the passes do not meet is said."""

import dataclasses

import numpy as np
import pytest

from bench._common import subspace_angles
from kpca.estimator import KernelHebbianPCA
from kpca.metrics import excess_error, minimal_error

R, SIGMA, ROWS, LANDMARKS = 12, 2.0, 700, 250


@pytest.fixture(scope="module")
def data(digits):
    """700 digits, their centred kernel matrix and the minimal error of eq. 22 at r = 12."""
    X = digits[:ROWS]
    exact = KernelHebbianPCA(R, sigma=SIGMA, solver="exact").fit(X)
    Kc = exact.rows_.dense()
    return X, Kc, minimal_error(np.linalg.eigvalsh(Kc)[::-1], R)


def fit(X, **params):
    return KernelHebbianPCA(R, sigma=SIGMA, passes=params.pop("passes", 20),
                            solver_params={"init_size": LANDMARKS, **params}).fit(X)


def test_the_residual_tracks_the_served_excess_error_pass_by_pass(data):
    """From the same Nystrom start, one to five passes with no early stop: both figures fall at every pass
    (until the excess error reaches its rounding), and the served excess error stays below the squared residual (the Rayleigh quotient's error is second
    order in the residual)."""
    X, Kc, e_min = data
    residuals, excess = [], []
    for passes in range(1, 6):
        est = fit(X, passes=passes, tol=0)
        assert est.state_["pass"] == passes and not est.state_.get("converged")
        assert est.params_used_["init"] == "nystrom" and est.params_used_["update"] == "rayleigh-ritz"
        residuals.append(est.state_["residual"])
        excess.append(excess_error(Kc, est.coefficients_ @ Kc, e_min))
    rounding = 1e-12  # the excess error's own floor (it is a difference of squared norms)
    assert np.all(np.diff(residuals) < 0), residuals
    assert all(b < a or b < rounding for a, b in zip(excess, excess[1:])), excess
    assert np.all(np.array(excess) <= np.array(residuals) ** 2), (residuals, excess)


def test_the_default_fit_stops_at_its_tol_with_the_accuracy_it_promises(data):
    X, Kc, e_min = data
    est = fit(X)
    assert est.params_used_["tol"] == 1e-3 and est.state_["converged"] and est.state_["pass"] < 20
    assert est.state_["residual"] <= 1e-3 and excess_error(Kc, est.coefficients_ @ Kc, e_min) <= 1e-6
    assert est.warnings_ == []
    assert est.params_used_["kernel_precision"] == "float32"  # auto: float32 tiles at a tol of 1e-3
    tighter = fit(X, tol=1e-4, passes=200)
    assert tighter.state_.get("converged") and tighter.params_used_["kernel_precision"] == "float64"
    assert excess_error(Kc, tighter.coefficients_ @ Kc, e_min) < excess_error(Kc, est.coefficients_ @ Kc, e_min)


def test_a_tol_the_passes_do_not_meet_is_said(data):
    X, _, _ = data
    with pytest.warns(UserWarning, match=r"params.tol 1e-09 not met in 2 passes \(relative residual"):
        est = fit(X, passes=2, tol=1e-9)
    assert not est.state_.get("converged") and len(est.warnings_) == 1


def camera_patches(l: int) -> np.ndarray:
    """l random 8 x 8 patches of scikit-image's camera: a spectrum without a gap after r = 12."""
    from skimage.data import camera

    image = camera().astype(np.float64) / 255.0
    rng = np.random.default_rng(8)
    i, j = rng.integers(0, image.shape[0] - 8, size=l), rng.integers(0, image.shape[1] - 8, size=l)
    return np.stack([image[a : a + 8, b : b + 8].ravel() for a, b in zip(i, j)])


def test_guard_vectors_take_fewer_passes_where_the_spectrum_has_no_gap():
    """The Rayleigh-Ritz passes iterate g guard vectors beside the r served ones (kpca.solvers._rayleigh_ritz):
    on image patches they reach the tol in fewer passes than the same start without them, and the served
    components and their residual are the r leading ones either way."""
    from kpca.fitting import FitRequest, prepare_fit
    from kpca.kernels import KernelSpec
    from kpca.rows import KernelRows

    X = camera_patches(800)
    spec = KernelSpec("gaussian", sigma=1.0)
    runs = {}
    for guarded in (True, False):
        rows = KernelRows(X, spec)
        prepared = prepare_fit(rows, FitRequest("ritz", R, {"init_size": 100, "tol": 1e-3, "passes": 200}))
        assert prepared.state["guard_A"].shape == prepared.state["guard_AK"].shape == (R, 800)
        state = prepared.state if guarded else {k: v for k, v in prepared.state.items() if not k.startswith("guard")}
        final, _ = dataclasses.replace(prepared, state=state).run(rows)
        assert final["converged"] and final["A"].shape == (R, 800) and ("guard_A" in final) == guarded
        runs[guarded] = final
    assert runs[True]["pass"] < runs[False]["pass"], (runs[True]["pass"], runs[False]["pass"])
    Kc = KernelRows(X, spec)
    Kc.fit_centering()
    assert subspace_angles(runs[True]["A"], runs[False]["A"], Kc.dense()).max() < 0.05


def test_passes_from_an_exact_start_keep_it_exact(data):
    """An exact start (all rows in the subset) and Rayleigh-Ritz passes with no early stop: the residual
    directions and steps are rounding there and must not be taken as directions (the served excess error
    stayed at 4e-7 after one pass before they were dropped below DIRECTION_FLOOR)."""
    X, Kc, e_min = data
    est = fit(X, passes=3, tol=0, init_size=ROWS)
    assert est.params_used_["init"] == "subset" and est.params_used_["guards"] > 0 and est.state_["pass"] == 3
    assert excess_error(Kc, est.coefficients_ @ Kc, e_min) < 1e-12 and est.state_["residual"] < 1e-10


def test_many_passes_past_convergence_stay_converged(data):
    """tol 0 and 60 passes from the Nystrom start: the served components stay at the exact ones (LOBPCG's
    step, taken on after convergence, let the rounding of its carried A K' grow to an excess error of 3.5
    over 500 passes)."""
    X, Kc, e_min = data
    est = fit(X, passes=60, tol=0)
    assert est.state_["pass"] == 60 and excess_error(Kc, est.coefficients_ @ Kc, e_min) < 1e-10


def test_float32_kernel_tiles_serve_the_accuracy_of_the_tol():
    """``kernel_precision: float32`` (tiles and the pass's product in float32): the passes take the plain
    power step, whose product is fresh every pass, so the served components reach the default tol with the
    accuracy float64 reaches; LOBPCG's step forms its residual directions' images as differences of the
    product, which float32 rounding made inconsistent with the directions (one such pass on these patches
    served an excess error of 110). The estimator fits in the precision asked and serves in float64."""
    X = camera_patches(800)
    exact = KernelHebbianPCA(R, sigma="auto", solver="exact").fit(X)
    Kc = exact.rows_.dense()
    e_min = minimal_error(np.linalg.eigvalsh(Kc)[::-1], R)
    fits = {precision: KernelHebbianPCA(R, sigma="auto", solver_params={"init_size": LANDMARKS,
                                                                       "kernel_precision": precision}).fit(X)
            for precision in ("float64", "float32")}
    for precision, est in fits.items():
        assert est.params_used_["kernel_precision"] == precision and est.state_["converged"], precision
        assert est.rows_.dtype == np.float64  # served in float64
        assert excess_error(Kc, est.coefficients_ @ Kc, e_min) <= 1e-6, precision
    assert np.max(subspace_angles(fits["float32"].coefficients_, exact.coefficients_, Kc)) < 1e-2
