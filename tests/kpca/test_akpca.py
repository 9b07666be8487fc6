"""Autoencoder KPCA (seed 003 §4-5): the Lanczos eigenpair, the subgradients (eq. 19-20, 24-26), the
decoder, the objective over passes, bit-exact resume, the kernel it is defined for."""

from __future__ import annotations

import numpy as np
import pytest

from kpca.driver import PassHooks, run_passes
from kpca.kernels import KernelSpec
from kpca.solvers import served_model
from kpca.params import ParamError
from kpca.preimage import reconstruct, reconstruct_components
from kpca.rows import KernelRows
from kpca.solvers import SOLVERS, AutoencoderState, FitContext
from kpca.solvers import _akpca, _ds_akpca
from kpca.solvers._autoencoder import FIGURE, KERNEL
from kpca.solvers._leading_pair import _lanczos
from tests import naive

POLY2 = KernelSpec(**KERNEL)
SOLVER_NAMES = ("akpca", "ds-akpca")


def pooled(X, factor):
    """8x8 digits averaged over factor x factor pixel blocks: (8 / factor)^2 features."""
    side = 8 // factor
    return X.reshape(-1, side, factor, side, factor).mean(axis=(2, 4)).reshape(X.shape[0], -1)


def symmetric(rng, shape):
    G = rng.normal(size=shape)
    return G + G.transpose(0, 2, 1)


def same_up_to_sign(u, v, atol):
    return min(np.abs(u - v).max(), np.abs(u + v).max()) < atol


def fit(solver, X, k, passes, block_size=64, hooks=None, **given):
    rows = KernelRows(X, POLY2)
    rows.fit_centering()  # as the worker does; the autoencoder solvers ignore it
    params = SOLVERS[solver].resolved({"seed": 3, **given}, FitContext(X.shape[0], k))
    state = SOLVERS[solver].start(rows, k, params)
    return rows, state, run_passes(rows, state, passes, block_size, hooks)


# -- Lanczos -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("d", [1, 2, 7, 40])
@pytest.mark.parametrize("which", ["LA", "LM"])
def test_lanczos_leading_eigenpair_matches_eigh(rng, d, which):
    for M in (symmetric(rng, (1, d, d))[0], -np.outer(*(2 * [rng.random(d)])) + 0.01 * symmetric(rng, (1, d, d))[0]):
        w, V = np.linalg.eigh(M)
        i = int(np.argmax(w)) if which == "LA" else int(np.argmax(np.abs(w)))
        start = rng.normal(size=d)
        pair = naive.leading_eigenpair(lambda v: M @ v, start, which, tol=1e-12, max_iter=200)
        value, vector, iterations = _lanczos(M, np.empty((0, d)), np.empty(0), np.empty(0), start, which == "LM",
                                             1e-12, 200)
        for found, u in ((pair.value, pair.vector), (value, vector)):
            assert found == pytest.approx(w[i], abs=1e-10 * np.abs(w).max())
            if d == 1 or np.sort(np.abs(w - w[i]))[1] > 1e-6:  # a simple eigenvalue: its vector is defined
                assert same_up_to_sign(u, V[:, i], 1e-7)
        assert iterations == pair.iterations <= d


def test_lanczos_with_products_only_matches_eigh(rng, digits):
    """The DS-AKPCA operator P^T diag(z) P - x x^T (never formed by the solver) against eigh of it formed."""
    P, z, x = digits[:300], 0.01 * rng.normal(size=300), digits[400]
    M = P.T @ np.diag(z) @ P - np.outer(x, x)
    w, V = np.linalg.eigh(M)
    for which, i in (("LM", int(np.argmax(np.abs(w)))), ("LA", -1)):
        value, vector, iterations = _lanczos(np.empty((0, 0)), P, z, x, x + 0.1, which == "LM", 1e-10, 64)
        assert value == pytest.approx(w[i], abs=1e-9 * np.abs(w).max()) and iterations < 64
        assert same_up_to_sign(vector, V[:, i], 1e-6)
    with pytest.raises(ValueError, match="start"):
        naive.leading_eigenpair(lambda v: M @ v, np.zeros(64))


# -- subgradients and steps --------------------------------------------------------------------------

def simple_gap(M):
    """Gap between the two largest eigenvalue magnitudes, relative to the largest."""
    a = np.sort(np.abs(np.linalg.eigvalsh(M)))
    return (a[-1] - a[-2]) / a[-1]


def test_akpca_subgradients_match_finite_differences(rng):
    d, k, h = 6, 3, 1e-6
    A, B, x = 0.3 * symmetric(rng, (k, d, d)), 0.3 * symmetric(rng, (k, d, d)), rng.random(d)
    assert simple_gap(naive.akpca_residual(A, B, x)[0]) > 0.05  # differentiable here
    dA, dB = naive.akpca_subgradients(A, B, x)
    for _ in range(5):
        E, F = symmetric(rng, (k, d, d)), symmetric(rng, (k, d, d))
        difference = (naive.akpca_surrogate(A + h * E, B + h * F, x)
                      - naive.akpca_surrogate(A - h * E, B - h * F, x)) / (2 * h)
        assert difference == pytest.approx(np.sum(dA * E) + np.sum(dB * F), rel=1e-6)


def test_ds_akpca_subgradients_match_finite_differences(rng, digits):
    P, x, k, h = pooled(digits[:40], 2), pooled(digits[50:51], 2)[0], 3, 1e-7
    H, G = 0.05 * rng.normal(size=(k, 40)), 0.05 * rng.normal(size=(k, 40))
    assert simple_gap(naive.ds_akpca_residual(H, G, P, x)[0]) > 0.05
    dH, dG = naive.ds_akpca_subgradients(H, G, P, x)
    for _ in range(5):
        E, F = rng.normal(size=H.shape), rng.normal(size=G.shape)
        difference = (naive.ds_akpca_surrogate(H + h * E, G + h * F, P, x)
                      - naive.ds_akpca_surrogate(H - h * E, G - h * F, P, x)) / (2 * h)
        assert difference == pytest.approx(np.sum(dH * E) + np.sum(dG * F), rel=1e-5)


def test_the_jitted_steps_equal_the_plain_steps(rng, digits):
    """`_train_rows` of both variants against the step-by-step references (M formed, numpy eigh)."""
    d, k = 16, 4
    X, start_vector = pooled(digits[:6], 2), np.full(d, 0.25)
    A, B = 0.5 * symmetric(rng, (k, d, d)), 0.5 * symmetric(rng, (k, d, d))
    A_fast, B_fast = A.copy(), B.copy()
    f = _akpca._train_rows(A_fast, B_fast, X, 0.7, start_vector, 1e-13, 100)
    for i, x in enumerate(X):
        assert f[i] == pytest.approx(naive.akpca_surrogate(A, B, x), rel=1e-10)
        A, B = naive.akpca_step(A, B, x, 0.7)
    np.testing.assert_allclose(A_fast, A, atol=1e-10)
    np.testing.assert_allclose(B_fast, B, atol=1e-10)

    P = pooled(digits[100:160], 2)
    H, G = 0.02 * rng.normal(size=(k, 60)), 0.02 * rng.normal(size=(k, 60))
    H_fast, G_fast = H.copy(), G.copy()
    _ds_akpca._train_rows(H_fast, G_fast, P, X, 0.7, start_vector, 1e-13, 100)
    for x in X:
        H, G = naive.ds_akpca_step(H, G, P, x, 0.7)
    np.testing.assert_allclose(H_fast, H, atol=1e-10)
    np.testing.assert_allclose(G_fast, G, atol=1e-10)


# -- the decoder -------------------------------------------------------------------------------------

def exact_state(solver, P, X_mean):
    """A hand-made state whose encoder and decoder are the exact (uncentred) degree-2 KPCA components of
    the points P, all d (d + 1) / 2 of them: then B^T A phi(x) = phi(x) for every x."""
    d = P.shape[1]
    k = d * (d + 1) // 2
    base = {"solver": solver, "scale": 1.0, "mean": X_mean, "start_vector": np.full(d, d**-0.5),
            "lanczos_tol": 1e-12, "lanczos_max_iter": 100, "n_rows": P.shape[0], "t": 0, "pass_": 0,
            "position": 0, "seed": 0, "eta0": 1.0, "gain": np.ones(1), "surrogate_sum": 0.0}
    if solver == "akpca":
        Phi = np.einsum("ir,is->irs", P, P).reshape(P.shape[0], d * d)
        w, V = np.linalg.eigh(Phi.T @ Phi)
        U = V[:, ::-1][:, :k].T.reshape(k, d, d)  # the k components with non-zero variance
        return AutoencoderState(**base, encoder=U, decoder=U.copy())
    K = (P @ P.T) ** 2
    w, V = np.linalg.eigh(K)
    alpha = (V[:, ::-1][:, :k] / np.sqrt(w[::-1][:k])).T  # unit-norm components, seed 003 §3.4
    return AutoencoderState(**base, encoder=alpha, decoder=alpha.copy(), points=P)


@pytest.mark.parametrize("solver", SOLVER_NAMES)
def test_the_decoder_inverts_the_exact_encoder(digits, solver):
    """g(f(x)) = x when the components span every x x^T (2x2-pooled digits, d = 4, k = 10), for training
    and held-out digits: the sign convention (v_1 . mean >= 0) gives +x for non-negative pixels."""
    P, X = pooled(digits[:80], 4), pooled(digits[500:540], 4)
    state = exact_state(solver, P, P.mean(axis=0))
    model = SOLVERS[solver].model(state)
    if solver == "akpca":
        decode = lambda y: naive.akpca_decode(state["decoder"], y, state["mean"])  # noqa: E731
    else:
        decode = lambda y: naive.ds_akpca_decode(state["decoder"], state["points"], y, state["mean"])  # noqa: E731
    for rows in (P[:20], X):
        np.testing.assert_allclose(model.reconstruct(rows), rows, atol=1e-9)
        np.testing.assert_allclose([decode(y) for y in model.project(rows)], rows, atol=1e-9)
    assert model.figure(X) == (FIGURE, pytest.approx(0.0, abs=1e-16))
    assert np.array_equal(reconstruct(model, X, "auto"), model.reconstruct(X))  # "auto" is the decoder
    with pytest.raises(ValueError, match="does not apply"):
        reconstruct(model, X, "gradient")
    # the codes of -x are those of x (x x^T cannot tell them apart): decoding codes alone gives +x by the
    # mean rule, reconstructing the row -x takes its sign from the row (issue 28)
    np.testing.assert_allclose(reconstruct_components(model, model.project(-X)), X, atol=1e-9)
    np.testing.assert_allclose(model.reconstruct(-X), -X, atol=1e-9)


@pytest.mark.parametrize("solver", SOLVER_NAMES)
def test_rows_of_centred_data_are_reconstructed_with_their_own_sign(digits, solver):
    """Issue 28: on data centred at 0 the mean rule is a coin toss per row; the served reconstruction
    (and the figure, its error) takes each row's sign from the row, so the exact components give
    g(f(x)) = x for every row, where decoding the codes alone gets some rows as -x."""
    P = pooled(digits[:80], 4)
    P = P - P.mean(axis=0)
    state = exact_state(solver, P, P.mean(axis=0))
    model = SOLVERS[solver].model(state)
    np.testing.assert_allclose(model.reconstruct(P), P, atol=1e-9)
    assert model.figure(P) == (FIGURE, pytest.approx(0.0, abs=1e-16))
    from_codes = reconstruct_components(model, model.project(P))
    wrong = np.abs(from_codes + P).max(axis=1) < 1e-9
    assert 0 < wrong.sum() < P.shape[0]  # the mean rule flips some rows, not all


# -- fitting -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("solver", SOLVER_NAMES)
def test_the_objective_decreases_over_passes(digits, solver):
    X = pooled(digits[:200], 2)
    figures, surrogates = [], []

    def on_pass(state):
        figures.append(served_model(state, rows).figure(X)[1])
        surrogates.append(state["surrogate_sum"] / X.shape[0])

    rows = KernelRows(X, POLY2)
    params = SOLVERS[solver].resolved({"seed": 3}, FitContext(200, 4))
    state = SOLVERS[solver].start(rows, 4, params)
    first = served_model(state, rows).figure(X)[1]
    state, stopped = run_passes(rows, state, 8, 64, PassHooks(on_pass=on_pass))
    assert not stopped and state["pass"] == 8 and state["t"] == 8 * 200
    assert figures[-1] < 0.5 * first and figures[-1] <= min(figures[:2])
    assert surrogates[-1] < 0.8 * surrogates[0]
    assert state["gain"][0] == pytest.approx(state["eta0"] / np.sqrt(8))  # the last pass: eta0 / sqrt(1 + 7)
    assert not state.get("gain_reductions")


@pytest.mark.parametrize("solver", SOLVER_NAMES)
def test_resuming_mid_fit_equals_an_uninterrupted_run(digits, solver):
    X = pooled(digits[:150], 2)
    _, _, (whole, _) = fit(solver, X, 3, 4, block_size=40)
    asked = iter(range(10**6))
    rows, _, (cut, stopped) = fit(solver, X, 3, 4, block_size=40, hooks=PassHooks(
        should_stop=lambda: next(asked) == 6))  # mid-way through pass 2
    assert stopped and cut["pass"] == 1 and 0 < cut["position"] < 150
    saved = {key: (value.copy() if isinstance(value, np.ndarray) else value) for key, value in cut.items()}
    resumed, stopped = run_passes(rows, saved, 4, 40)
    assert not stopped and resumed.keys() == whole.keys()
    for key, value in whole.items():
        assert np.array_equal(resumed[key], value), key


@pytest.mark.parametrize("solver", SOLVER_NAMES)
def test_a_scaled_data_set_gives_the_same_fit(digits, solver):
    X = pooled(digits[:100], 2)
    _, _, (state, _) = fit(solver, X, 3, 2)
    _, _, (scaled, _) = fit(solver, 1e3 * X, 3, 2)
    assert scaled["scale"] == pytest.approx(1e3 * state["scale"], rel=1e-12)
    for key in ("encoder", "decoder"):
        np.testing.assert_allclose(scaled[key], state[key], rtol=1e-6, atol=1e-9 * np.abs(state[key]).max())
    Y = pooled(digits[300:310], 2)
    np.testing.assert_allclose(SOLVERS[solver].model(scaled).reconstruct(1e3 * Y),
                               1e3 * SOLVERS[solver].model(state).reconstruct(Y), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("solver", SOLVER_NAMES)
@pytest.mark.parametrize("kernel", [KernelSpec("gaussian", sigma=2.0), KernelSpec("polynomial", degree=2),
                                    KernelSpec("polynomial", degree=3, offset=0.0), KernelSpec("linear")])
def test_other_kernels_are_refused(digits, solver, kernel):
    rows = KernelRows(pooled(digits[:50], 2), kernel)
    params = SOLVERS[solver].resolved({}, FitContext(50, 2))
    with pytest.raises(ParamError, match="degree-2 polynomial kernel") as caught:
        SOLVERS[solver].start(rows, 2, params)
    assert caught.value.field == "kernel"


def test_ds_akpca_is_limited_to_the_exact_limit_and_akpca_to_its_size(digits):
    with pytest.raises(ParamError, match="limited to 3000 rows") as caught:
        SOLVERS["ds-akpca"].check({}, FitContext(n_rows=3001, n_components=4))
    assert caught.value.field == "solver"
    SOLVERS["akpca"].check({}, FitContext(n_rows=10**6, n_components=4))
    rows = KernelRows(np.ones((10, 2000)), POLY2)
    with pytest.raises(ParamError, match="ds-akpca") as caught:
        SOLVERS["akpca"].start(rows, 9, SOLVERS["akpca"].resolved({}, FitContext(10, 9)))
    assert caught.value.field == "n_components"
