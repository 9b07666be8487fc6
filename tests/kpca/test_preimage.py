"""Pre-images (kpca.preimage): identities against dense references, gradients by
finite differences, recovery of clean points, denoising, far-away points.

Models on digits are exact (dense eigendecomposition) so that these tests check
the pre-image maths, not a solver.
"""

import numpy as np
import pytest

from kpca.errors import Stopped
from kpca.estimator import KernelHebbianPCA
from kpca.kernels import KernelSpec
from kpca.model import KernelModel
from kpca.images.denoising import preimages
from kpca.preimage import (
    PREIMAGE_METHODS,
    LearnedInverse,
    fixed_point,
    gradient_descent,
    kwok_tsang,
    reconstruct,
)
from kpca.preimage._objective import rho_and_gradient
from kpca.preimage.kwok_tsang import _kwok_tsang_position, nearest
from kpca.rows import KernelRows
from tests.kpca_helpers import feature_expansion
from tests.naive import expansion, kernel_matrix, preimage_objective

SPECS = [
    KernelSpec("gaussian", sigma=1.5),
    KernelSpec("laplacian", sigma=2.0),
    KernelSpec("polynomial", degree=3, offset=1.0, gamma=0.3),
    KernelSpec("linear"),
    KernelSpec("tanh", gamma=0.1, offset=-0.2),
]
SIGMA = 4.0  # Gaussian width on digits in [0, 1]; 2 sigma^2 = 32, median squared distance about 9
N_TRAIN = 400


def objective(model: KernelModel, Z, X) -> np.ndarray:
    """``rho(z_j) = ||Psi(x_j) - Phi(z_j)||^2`` for paired rows of Z and X (m, n): what the pre-image
    methods minimise (`kpca.preimage._objective`). O(m l (n + r))."""
    Z, X = model.check_points(Z, "Z"), model.check_points(X)
    t = model.target(X)
    return rho_and_gradient(model.rows, Z, t.gamma, t.norm2)[0]


def random_model(spec, rng, l=50, n=5, r=6):
    """A small model with arbitrary coefficients A and AK = A K' dense: the identities hold for any A."""
    X = rng.normal(size=(l, n))
    rows = KernelRows(X, spec, chunk_rows=17)  # several chunks per pass
    rows.fit_centering()
    A = rng.normal(size=(r, l)) / l
    return KernelModel(rows=rows, A=A, AK=A @ rows.dense()), X


def digits_model(digits, r, kernel="gaussian", **params):
    est = KernelHebbianPCA(r, kernel=kernel, solver="exact", **params).fit(digits[:N_TRAIN])
    model = est.model_
    np.testing.assert_allclose(model.AK, est.coefficients_ @ est.rows_.dense(), atol=1e-8)
    return model


@pytest.fixture(scope="module")
def model64(digits):
    return digits_model(digits, 64, sigma=SIGMA)


@pytest.fixture(scope="module")
def model32(digits):
    return digits_model(digits, 32, sigma=SIGMA)


# -- identities ----------------------------------------------------------------------


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.type)
def test_expansion_gram_terms_and_feature_distances_match_dense(spec, rng):
    model, X = random_model(spec, rng)
    Xnew = rng.normal(size=(7, X.shape[1]))
    gamma = expansion(model.A, X, Xnew, spec)
    np.testing.assert_allclose(feature_expansion(model, Xnew), gamma, atol=1e-12)
    K = kernel_matrix(X, X, spec)
    target = model.target(Xnew)
    scale = np.abs(K).max()
    np.testing.assert_allclose(target.k_gamma, gamma @ K, atol=1e-10 * scale)
    np.testing.assert_allclose(target.norm2, np.einsum("ij,jk,ik->i", gamma, K, gamma), atol=1e-10 * scale)
    dense = np.einsum("ij,jk,ik->i", gamma, K, gamma)[:, None] - 2 * gamma @ K + np.diag(K)[None, :]
    np.testing.assert_allclose(model.distances(target), np.maximum(dense, 0), atol=1e-10 * scale)
    np.testing.assert_allclose(gamma.sum(axis=1), 1.0, atol=1e-12)  # Psi = mu + a combination of Phi'(x_i)


def test_expansion_of_linear_kernel_is_pca_projection_plus_mean(rng):
    """Linear kernel: Phi = identity, so Psi = X^T gamma must be mu + U U^T (x - mu)."""
    X = rng.normal(size=(80, 6)) @ rng.normal(size=(6, 6))
    est = KernelHebbianPCA(3, kernel="linear", solver="exact").fit(X)
    model = est.model_
    Xnew = rng.normal(size=(5, 6))
    mu = X.mean(axis=0)
    U = np.linalg.svd(X - mu, full_matrices=False)[2][:3].T
    expected = mu + (Xnew - mu) @ U @ U.T
    np.testing.assert_allclose(feature_expansion(model, Xnew) @ X, expected, atol=1e-10)
    # the pre-image exists: distance-based and optimising methods recover it
    np.testing.assert_allclose(kwok_tsang(model, Xnew, n_neighbors=20), expected, atol=1e-8)
    np.testing.assert_allclose(gradient_descent(model, Xnew), expected, atol=1e-5)
    np.testing.assert_allclose(objective(model, expected, Xnew), 0, atol=1e-9)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.type)
def test_objective_matches_dense(spec, rng):
    model, X = random_model(spec, rng)
    Xnew, Z = rng.normal(size=(4, X.shape[1])), rng.normal(size=(4, X.shape[1]))
    Z[0] = X[3]  # coincident with a training point (the Laplacian's cone point)
    gamma = expansion(model.A, X, Xnew, spec)
    dense = [preimage_objective(z, g, X, spec) for z, g in zip(Z, gamma)]
    np.testing.assert_allclose(objective(model, Z, Xnew), dense, atol=1e-10)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.type)
def test_gradient_matches_finite_differences(spec, rng):
    model, X = random_model(spec, rng)
    target = model.target(rng.normal(size=(3, X.shape[1])))
    Z = rng.normal(size=(3, X.shape[1]))
    _, grad = rho_and_gradient(model.rows, Z, target.gamma, target.norm2)
    h = 1e-6
    for d in range(X.shape[1]):
        e = np.zeros(X.shape[1])
        e[d] = h
        up = rho_and_gradient(model.rows, Z + e, target.gamma, target.norm2)[0]
        down = rho_and_gradient(model.rows, Z - e, target.gamma, target.norm2)[0]
        np.testing.assert_allclose(grad[:, d], (up - down) / (2 * h), rtol=1e-5, atol=1e-7)


def test_laplacian_gradient_is_finite_at_a_training_point(rng):
    model, X = random_model(KernelSpec("laplacian", sigma=2.0), rng)
    target = model.target(X[:2])
    rho, grad = rho_and_gradient(model.rows, X[:2].copy(), target.gamma, target.norm2)
    assert np.isfinite(rho).all() and np.isfinite(grad).all()


def test_kwok_tsang_position_recovers_a_point_from_exact_distances(rng):
    P = rng.normal(size=(3, 7, 4))  # 7 neighbours spanning R^4, for 3 points
    z = rng.normal(size=(3, 4))
    d2 = ((P - z[:, None, :]) ** 2).sum(axis=2)
    np.testing.assert_allclose(_kwok_tsang_position(P, d2), z, atol=1e-10)


@pytest.mark.parametrize("b, l, k", [(40, 300, 10), (30, 10, 10), (20, 5, 1), (25, 60, 59)])
def test_nearest_are_the_k_least_of_each_row_least_first_ties_by_index(b, l, k, rng):
    """`nearest` (the neighbours of Kwok-Tsang's start) against a full sort by (value, index), on values with
    many ties (integers 0-5) and without."""
    for dist in (rng.random((b, l)), rng.integers(0, 6, (b, l)).astype(float)):
        want = np.lexsort((np.broadcast_to(np.arange(l), dist.shape), dist), axis=1)[:, :k]
        np.testing.assert_array_equal(nearest(dist, k), want)


def svd_position(P: np.ndarray, d2: np.ndarray) -> np.ndarray:
    """Kwok & Tsang's closed form as they write it, by a thin SVD of the centred neighbours (directions with
    singular values below sqrt(eps) times the largest dropped): the oracle of the Gram form."""
    mean = P.mean(axis=1)
    C = P - mean[:, None, :]
    V, s, Ut = np.linalg.svd(C, full_matrices=False)
    d0 = np.einsum("bkq,bkq->bk", V * s[:, None, :], V * s[:, None, :])
    keep = s > np.sqrt(np.finfo(float).eps) * s[:, :1]
    inv = np.divide(1.0, s, out=np.zeros_like(s), where=keep)
    z = -0.5 * inv * np.einsum("bkq,bk->bq", V, d2 - d0)
    return mean + np.einsum("bq,bqn->bn", z, Ut)


def test_kwok_tsang_position_from_the_gram_matrix_equals_the_svd_form(rng):
    """The position is computed from the neighbours' k x k Gram matrix, not an SVD of the k x n neighbours:
    the same point on patches (10 neighbours of 49 values: one direction always zero), on more neighbours
    than dimensions, on neighbours of rank 2, on repeated neighbours, and far from the origin."""
    cases = {"patches": rng.normal(size=(50, 10, 49)), "more neighbours": rng.normal(size=(50, 12, 5)),
             "rank 2": rng.normal(size=(50, 10, 2)) @ rng.normal(size=(2, 49)),
             "repeated": np.repeat(rng.normal(size=(50, 5, 49)), 2, axis=1),
             "offset": 1e3 + rng.normal(size=(50, 10, 49))}
    for name, P in cases.items():
        d2 = ((P - P.mean(axis=1, keepdims=True) - rng.normal(scale=0.3, size=(50, 1, P.shape[2]))) ** 2).sum(axis=2)
        want = svd_position(P, d2)
        scale = np.abs(P).max()
        np.testing.assert_allclose(_kwok_tsang_position(P, d2), want, rtol=0, atol=1e-8 * scale, err_msg=name)


# -- clean points are (nearly) their own pre-images --------------------------------------

# r = 64 of 400 Gaussian components (sigma 4) leave rho(x) = ||P Phi'(x) - Phi'(x)||^2
# of about 0.01-0.03 for training points and 0.015-0.035 for held-out digits (k(x, x) = 1).
# Measured relative errors ||z - x|| / ||x||: fixed point and gradient descent (same
# stationary point) 0.05-0.08 on training points and 0.07-0.11 on held-out digits;
# Kwok-Tsang 0.05-0.08 and 0.2-0.3 (it can only move within the affine span of its
# 10 neighbours, and a held-out digit is ~0.25 ||x|| away from that span); the learned
# inverse interpolates its training sample (error < 0.002) and gives 0.05-0.07 held out.
RELATIVE_ERROR_BOUND = {  # (training points, held-out digits)
    "fixed-point": (0.12, 0.15),
    "gradient": (0.12, 0.15),
    "kwok-tsang": (0.12, 0.35),
    "learned": (0.01, 0.15),
}


@pytest.mark.parametrize("method", PREIMAGE_METHODS)
def test_clean_points_are_nearly_their_own_preimages(method, model64, digits):
    train, held_out = digits[[0, 7, 123]], digits[1500:1503]
    for points, bound in zip((train, held_out), RELATIVE_ERROR_BOUND[method]):
        Z = reconstruct(model64, points, method)
        rel = np.linalg.norm(Z - points, axis=1) / np.linalg.norm(points, axis=1)
        assert rel.max() < bound, (method, rel)
        if method in ("fixed-point", "gradient"):
            # the optimisers do at least as well as the point itself
            assert (objective(model64, Z, points) <= objective(model64, points, points) + 1e-9).all()


def test_fixed_point_and_gradient_descent_reach_the_same_minimum(model64, digits):
    X = digits[1500:1510]
    rho_fp = objective(model64, fixed_point(model64, X, tol=1e-10, n_iter=500), X)
    rho_gd = objective(model64, gradient_descent(model64, X), X)
    np.testing.assert_allclose(rho_fp, rho_gd, atol=1e-6)


# -- denoising -----------------------------------------------------------------------------

# Measured (digits[1500:1560], noise sigma 0.35, seed 20061204, r = 32, sigma = 4):
# noisy MSE ~0.12 per pixel; fixed point / gradient ~0.03, Kwok-Tsang ~0.027, learned
# ~0.038; the mean training digit has MSE ~0.072.
DENOISING_RATIO = {"fixed-point": 0.35, "gradient": 0.35, "kwok-tsang": 0.35, "learned": 0.45}


@pytest.mark.parametrize("method", PREIMAGE_METHODS)
def test_denoising_reduces_the_error_to_the_clean_digit(method, model32, digits, rng):
    clean = digits[1500:1560]
    noisy = clean + rng.normal(scale=0.35, size=clean.shape)
    noisy_mse = np.mean((noisy - clean) ** 2)
    denoised_mse = np.mean((reconstruct(model32, noisy, method) - clean) ** 2)
    assert denoised_mse < DENOISING_RATIO[method] * noisy_mse, (method, denoised_mse, noisy_mse)
    assert denoised_mse < np.mean((digits[:N_TRAIN].mean(axis=0) - clean) ** 2)  # better than the mean digit


def test_fixed_point_with_laplacian_kernel_denoises(digits, rng):
    model = digits_model(digits, 32, kernel="laplacian", sigma=SIGMA)
    clean = digits[1500:1530]
    noisy = clean + rng.normal(scale=0.35, size=clean.shape)
    Z = fixed_point(model, noisy)
    assert np.mean((Z - clean) ** 2) < 0.5 * np.mean((noisy - clean) ** 2)
    assert (objective(model, Z, noisy) <= objective(model, kwok_tsang(model, noisy), noisy) + 1e-12).all()


def test_float32_rows_give_nearly_the_same_preimages(model32, digits):
    rows32 = KernelRows(digits[:N_TRAIN], model32.kernel, dtype=np.float32)
    rows32.fit_centering()
    model = KernelModel(rows=rows32, A=model32.A, AK=model32.AK)
    X = digits[1500:1505]
    np.testing.assert_allclose(fixed_point(model, X), fixed_point(model32, X), atol=1e-3)


# -- robustness ------------------------------------------------------------------------------


FAR_METHODS = {"gaussian": PREIMAGE_METHODS, "laplacian": PREIMAGE_METHODS,
               "polynomial": ("kwok-tsang", "gradient", "learned"), "tanh": ("gradient", "learned")}


@pytest.mark.parametrize("kernel,params", [("gaussian", {"sigma": SIGMA}), ("laplacian", {"sigma": SIGMA}),
                                           ("polynomial", {"degree": 2, "gamma": 0.1}), ("tanh", {"gamma": 0.01})])
def test_a_point_far_from_all_data_gives_finite_output(kernel, params, digits):
    model = digits_model(digits, 16, kernel=kernel, **params)
    far = np.vstack([100 * np.ones(64), -100 * np.ones(64), digits[1500]])
    if kernel == "gaussian":  # every k(far, x_i) underflows: starts at x stop at once
        assert model.rows.raw_block(far[:2]).max() == 0
    data_scale = np.linalg.norm(digits[:N_TRAIN], axis=1).max()
    for method in FAR_METHODS[kernel]:
        Z = reconstruct(model, far, method)
        assert np.isfinite(Z).all(), method
        if kernel in ("gaussian", "laplacian"):
            assert np.linalg.norm(Z, axis=1).max() < 3 * data_scale, method  # near the data, not at x


def test_unsupported_kernels_and_unknown_methods_raise(digits, rng):
    model, _ = random_model(KernelSpec("tanh", gamma=0.1), rng)
    X = rng.normal(size=(2, 5))
    with pytest.raises(ValueError, match="method"):
        fixed_point(model, X)
    with pytest.raises(ValueError, match="method"):
        kwok_tsang(model, X)
    with pytest.raises(ValueError, match="method"):
        reconstruct(model, X, "newton")
    with pytest.raises(ValueError, match="options.n_iter"):
        reconstruct(model, X, "gradient", n_iter=3)
    with pytest.raises(ValueError, match="X"):
        reconstruct(model, np.full((1, 5), np.nan))
    assert np.isfinite(reconstruct(model, X)).all()  # auto: gradient descent from x


def test_auto_dispatch(model32, digits, rng):
    X = digits[1500:1503]
    np.testing.assert_array_equal(reconstruct(model32, X), fixed_point(model32, X))
    poly, _ = random_model(KernelSpec("polynomial", degree=2), rng)
    Y = rng.normal(size=(2, 5))
    np.testing.assert_array_equal(reconstruct(poly, Y), gradient_descent(poly, Y))


class AskedAfter:
    """A ``stop`` callable that answers True from its ``n``-th call on, counting its calls."""

    def __init__(self, n):
        self.n, self.calls = n, 0

    def __call__(self):
        self.calls += 1
        return self.calls >= self.n


@pytest.mark.parametrize("method", ["fixed-point", "gradient"])
def test_an_iterative_preimage_stops_when_asked_and_is_unchanged_when_not(method, model32, digits):
    """``stop`` is asked between steps (issue 30: a request that ended stops its running pre-images): True
    raises Stopped after a few steps, never True leaves the answer bit for bit as without it."""
    X = digits[1500:1504]
    options = {"n_iter": 500, "tol": 1e-300} if method == "fixed-point" else {"max_iter": 500, "tol": 1e-300}
    never = AskedAfter(10**9)
    np.testing.assert_array_equal(reconstruct(model32, X, method, stop=never, **options),
                                  reconstruct(model32, X, method, **options))
    assert never.calls > 50  # asked at every step
    soon = AskedAfter(5)
    with pytest.raises(Stopped):
        reconstruct(model32, X, method, stop=soon, **options)
    assert soon.calls == 5  # no step after the answer


def test_the_tuned_paths_fixed_point_stops_when_asked(model32, digits):
    """`kpca.images.denoising.preimages` (the tuned requests' pre-images) passes ``stop`` to its fixed point."""
    X = digits[1500:1504]
    never = AskedAfter(10**9)
    np.testing.assert_array_equal(preimages(model32, X, "fixed-point", {"n_iter": 30}, stop=never),
                                  preimages(model32, X, "fixed-point", {"n_iter": 30}))
    assert never.calls == 31  # before each of the 30 steps and the last iterate's evaluation
    with pytest.raises(Stopped):
        preimages(model32, X, "fixed-point", {"n_iter": 30}, stop=AskedAfter(3))


def test_closed_form_preimages_ignore_stop(model32, digits):
    X = digits[1500:1504]
    asked = AskedAfter(1)
    np.testing.assert_array_equal(reconstruct(model32, X, "kwok-tsang", stop=asked), kwok_tsang(model32, X))
    assert asked.calls == 0


# -- learned inverse --------------------------------------------------------------------------


def test_learned_inverse_state_round_trip(model32, digits, rng):
    inverse = LearnedInverse.fit(model32, n_samples=300, rng=rng)
    state = inverse.to_state()
    assert all(isinstance(v, (np.ndarray, float, str)) for v in state.values())
    X = digits[1500:1520]
    again = LearnedInverse.from_state({k: (v.copy() if isinstance(v, np.ndarray) else v)
                                       for k, v in state.items()}, model32)
    np.testing.assert_array_equal(again(X), inverse(X))
    B = model32.project(X)
    np.testing.assert_array_equal(LearnedInverse.from_state(state).map_components(B), inverse.map_components(B))
    np.testing.assert_array_equal(reconstruct(model32, X, "learned", inverse=inverse), inverse(X))
    with pytest.raises(RuntimeError):
        LearnedInverse.from_state(state)(X)


def test_learned_inverse_defaults(model32):
    inverse = LearnedInverse.fit(model32, n_samples=200)
    assert inverse.centers.shape == (200, 32) and inverse.weights.shape == (200, 64)
    assert inverse.alpha == pytest.approx(1e-3)
    d = ((inverse.centers[:, None] - inverse.centers[None]) ** 2).sum(-1)
    assert inverse.gamma == pytest.approx(1 / np.median(d[np.triu_indices(200, 1)]))
    far = inverse.map_components(np.full((1, 32), 1e6))
    np.testing.assert_allclose(far[0], inverse.offset)  # far from every centre: the sample mean
