"""The ``init="subset"`` warm start against the exact eigendecomposition (seed 000 eq. 22)."""

import numpy as np
import pytest
import scipy.linalg

from bench._common import subspace_angles
from bench._stepwise import DenseRows
from kpca.driver import run_passes
from kpca.estimator import KernelHebbianPCA
from kpca.kernels import KernelSpec
from kpca.metrics import excess_error, minimal_error
from kpca.rows import KernelRows
from kpca.solvers import SOLVERS, FitContext, default_init_size, eigenvalue_estimates, exact_components, ritz_components
from kpca.solvers._warm import INIT_BUDGET
from tests.kpca_helpers import orthonormality_error

L = 600


def problem(X, spec):
    rows = KernelRows(X, spec)
    c = rows.fit_centering()
    Kc = rows.dense()
    return Kc, c.mean_diagonal, scipy.linalg.eigvalsh(Kc)[::-1]


class RecordedRows(DenseRows):
    """Rows of K' that record every kernel row they hand out."""

    def __init__(self, Kc):
        super().__init__(Kc)
        self.fetched = []

    def block(self, indices):
        self.fetched.append(np.array(indices))
        return super().block(indices)


def resolve(mean_diagonal, n_rows=L, r=4, **given):
    """kha-smd's parameters as a fit resolves them."""
    context = FitContext(n_rows=n_rows, n_components=r, mean_diagonal=mean_diagonal)
    return SOLVERS["kha-smd"].resolved(given, context, where="")


def start(Kc, mean_diagonal, r, seed=0, solver="kha-smd", **init):
    """Initial state; the row provider records every kernel row it hands out."""
    rows = RecordedRows(Kc)
    context = FitContext(n_rows=Kc.shape[0], n_components=r, mean_diagonal=mean_diagonal)
    given = {k: v for k, v in init.items() if v is not None or k == "init"}
    params = SOLVERS[solver].resolved({"seed": seed, **given}, context, where="")
    return SOLVERS[solver].start(rows, r, params), rows.fetched


@pytest.fixture(scope="module")
def gaussian(digits):
    return problem(digits[:L], KernelSpec("gaussian", sigma=3.0))


@pytest.fixture(scope="module")
def poly(digits):
    return problem(digits[400 : 400 + L], KernelSpec("polynomial", degree=2, offset=1.0))


@pytest.mark.parametrize("data, r", [("gaussian", 6), ("gaussian", 16), ("poly", 6)])
def test_subset_of_everything_is_exact_kpca(request, data, r):
    Kc, s, lam_all = request.getfixturevalue(data)
    lam, A_exact = exact_components(Kc, r)
    state, _ = start(Kc, s, r, init="subset", init_size=L)
    assert state["init"] == "subset" and state["init_size"] == L
    assert subspace_angles(state["A"], A_exact, Kc).max() < 1e-6
    np.testing.assert_allclose(eigenvalue_estimates(state["A"], state["AK"]), lam, rtol=1e-8)
    np.testing.assert_allclose(state["eigenvalues"], lam, rtol=1e-8)
    assert abs(excess_error(Kc, state["AK"], minimal_error(lam_all, r))) < 1e-8
    # same sign convention as the exact solver, so the coefficients themselves agree
    np.testing.assert_allclose(state["A"], A_exact, atol=1e-6 * np.abs(A_exact).max())


def test_subset_start_beats_random_start_and_after_two_passes(gaussian):
    """m = l/3: the start alone is orders of magnitude closer than the random start, and with the warm
    start's default gains (WARM_GAIN_SCALE) two kha-smd passes keep that lead instead of undoing it."""
    Kc, s, lam_all = gaussian
    r = 6
    e_min = minimal_error(lam_all, r)
    errors = {}
    for init, m in (("random", None), ("subset", L // 3)):
        state, _ = start(Kc, s, r, init=init, init_size=m)
        first = excess_error(Kc, state["AK"], e_min)
        state, _ = run_passes(DenseRows(Kc), state, 2, 128)
        errors[init] = (first, excess_error(Kc, state["AK"], e_min))
    print("excess error (start, after 2 kha-smd passes):", errors)
    assert 0 < errors["subset"][0] < 1e-2 * errors["random"][0], errors
    assert errors["subset"][0] < 1e-3, errors
    assert errors["subset"][1] < 1e-2 * errors["random"][1], errors
    assert errors["subset"][1] < 3 * errors["subset"][0], errors


def test_warm_start_default_gains_are_scaled():
    from kpca.defaults import WARM_GAIN_SCALE, WARM_REFERENCE_ROWS

    l = WARM_REFERENCE_ROWS
    cold = resolve(2.0, l, init="random")
    warm = resolve(2.0, l, init="subset", init_size=l // 4)  # the scale, times the uncovered 3/4
    assert warm["eta0"] == pytest.approx(WARM_GAIN_SCALE * 0.75 * cold["eta0"])
    assert warm["mu"] == pytest.approx(WARM_GAIN_SCALE * 0.75 * cold["mu"])
    small = resolve(2.0, l // 2, init="subset", init_size=l // 8)
    assert (small["eta0"], small["mu"]) == (warm["eta0"], warm["mu"])  # below WARM_REFERENCE_ROWS: no l factor
    big = resolve(2.0, 10 * l, init="subset", init_size=10 * l // 4)
    assert big["eta0"] == pytest.approx(warm["eta0"] / 10) and big["mu"] == pytest.approx(warm["mu"] / 10)
    exact = resolve(2.0, l, init="subset")  # the default subset of 1000 rows is all of them: exact kernel PCA
    assert exact["init_size"] == l and exact["eta0"] == exact["mu"] == 0.0  # the passes keep it as it is
    assert resolve(2.0, init="subset", eta0=0.5)["eta0"] == 0.5  # a user's value is kept


@pytest.mark.slow
def test_the_first_pass_on_a_larger_set_keeps_the_start(digits):
    """3000 jittered digits from a 1000-row subset: with the default gains (scaled down by l and by the
    covered third) the served components after one kha-smd pass are at least as good as the start;
    with 10x those gains the pass loses much of it."""
    X = np.resize(digits, (3000, 64)) + np.random.default_rng(0).normal(scale=0.05, size=(3000, 64))
    rows = KernelRows(X, KernelSpec("gaussian", sigma=3.0))
    c = rows.fit_centering()
    Kc = rows.dense()
    e_min = minimal_error(scipy.linalg.eigvalsh(Kc), 16)

    def served_error(state):
        return excess_error(Kc, ritz_components(state["A"], state["AK"])[1], e_min)

    after = {}
    rule = resolve(c.mean_diagonal, 3000, r=16, init="subset", init_size=1000, seed=0)
    for factor in (1, 10):
        params = {**rule, "eta0": factor * rule["eta0"], "mu": factor * rule["mu"], "update": "stochastic"}
        state = SOLVERS["kha-smd"].start(DenseRows(Kc), 16, params)
        start = served_error(state)
        state, _ = run_passes(DenseRows(Kc), state, 1, 512)
        after[factor] = served_error(state)
    print("served excess error: start", start, "after one pass", after)
    assert after[1] <= start < 1e-4, (start, after)
    assert after[10] > 3 * start, (start, after)


@pytest.mark.parametrize("m", [6, 40, L // 3])
def test_components_have_unit_norm_and_AK_is_exact(gaussian, m):
    Kc, s, _ = gaussian
    r = 6
    state, fetched = start(Kc, s, r, init="subset", init_size=m)
    A, AK = state["A"], state["AK"]
    S = np.flatnonzero(np.any(A != 0, axis=0))
    assert S.size == m and np.array_equal(np.sort(np.concatenate(fetched)), S)  # m kernel rows, nothing else
    assert max(len(f) for f in fetched) <= 256
    np.testing.assert_allclose(AK, A @ Kc, atol=1e-10 * np.abs(AK).max())
    np.testing.assert_allclose(np.einsum("ij,ij->i", AK, A), 1.0, rtol=1e-9)  # diag(A K' A^T) = 1
    assert orthonormality_error(A, AK) < 1e-8
    assert np.all(np.diff(np.linalg.norm(AK, axis=1)) <= 1e-12)  # captured variance ||A_i K'||^2, leading first
    assert np.array_equal(state["B"], np.zeros_like(A)) and np.array_equal(state["rho"], np.ones(r))
    assert state["t"] == state["pass"] == state["position"] == 0


def test_subset_of_rank_below_r_is_completed_with_random_rows(rng):
    """A linear kernel on 3 features has feature-space rank 3: the subset gives the 3 leading components
    (exactly, since the subset spans the whole feature space) and the other 2 rows are random."""
    X = rng.standard_normal((200, 3)) * [3.0, 2.0, 1.0]
    Kc, s, lam_all = problem(X, KernelSpec("linear"))
    state, _ = start(Kc, s, 5, init="subset", init_size=50)
    A, AK = state["A"], state["AK"]
    np.testing.assert_allclose(AK, A @ Kc, atol=1e-10 * np.abs(AK).max())
    _, A_exact = exact_components(Kc, 3)
    assert subspace_angles(A[:3], A_exact, Kc).max() < 1e-6
    assert np.all(np.linalg.norm(A[3:], axis=1) > 0)
    state, _ = run_passes(DenseRows(Kc), state, 2, 64)  # and the solver runs from there
    assert np.all(np.isfinite(state["A"]))


@pytest.mark.parametrize("init, init_size, field", [
    ("warm", None, "init"), (None, None, "init"), ("Subset", None, "init"),
    ("subset", 3, "init_size"), ("subset", L + 1, "init_size"), ("subset", 0, "init_size"),
    ("subset", 100.0, "init_size"), ("subset", True, "init_size"), ("random", L + 1, "init_size"),
])
def test_bad_init_is_a_value_error_naming_the_field(gaussian, init, init_size, field):
    Kc, s, _ = gaussian
    with pytest.raises(ValueError, match=rf"^{field}: "):
        start(Kc, s, 4, init=init, init_size=init_size)
    if init is None:  # the estimator's None means "the default" (random)
        return
    with pytest.raises(ValueError, match=rf"^{field}: "):
        KernelHebbianPCA(n_components=4, sigma=3.0, init=init, init_size=init_size).fit(np.eye(L, 8))


def test_same_seed_same_state(gaussian):
    Kc, s, _ = gaussian
    a, _ = start(Kc, s, 6, seed=5, init="subset", init_size=100)
    b, _ = start(Kc, s, 6, seed=5, init="subset", init_size=100)
    c, _ = start(Kc, s, 6, seed=6, init="subset", init_size=100)
    assert a.keys() == b.keys()
    for key, value in a.items():
        assert np.array_equal(value, b[key]), key
    assert not np.array_equal(a["A"] != 0, c["A"] != 0)  # another seed, another subset


def test_default_init_size():
    assert default_init_size(6, 600) == 600  # small l: the whole set, i.e. exact KPCA
    assert default_init_size(5, 3000) == 1000
    assert default_init_size(200, 3000) == 2000
    assert default_init_size(16, 100_000) == 2**25 // 100_000  # the memory cap
    assert default_init_size(16, 10**6) == 64  # never below 4 r (2**25 // 10**6 = 33)
    assert default_init_size(32, 10**6) == 128
    # m l stays within the memory budget, but where the floor of 4 r lifts m above it
    assert default_init_size(16, 100_000) * 100_000 <= INIT_BUDGET < default_init_size(16, 10**6) * 10**6
    assert default_init_size(16, 40) == 40


def test_estimator_with_subset_init(digits):
    X = digits[:300]
    model = KernelHebbianPCA(n_components=4, sigma=3.0, passes=1, init="subset", init_size=120).fit(X)
    assert model.params_used_["init"] == "subset" and model.params_used_["init_size"] == 120
    assert model.get_params()["init"] == "subset"
    cold = KernelHebbianPCA(n_components=4, sigma=3.0, passes=1, init="random").fit(X)
    assert cold.params_used_["init"] == "random" and "init_size" not in cold.params_used_
    default = KernelHebbianPCA(n_components=4, sigma=3.0, passes=1).fit(X)  # init="auto": warm where affordable
    assert default.params_used_["init"] == "subset" and default.params_used_["init_size"] == X.shape[0]
