"""The jitted O(r l) block updates against the step-by-step equations of seed 000."""

import numpy as np
import pytest

from bench._stepwise import DenseRows
from kpca.solvers._kha import begin_pass, step_block
from tests.naive import centered, kha_step, smd_step, start_state, step_block_reference

STEPS = pytest.mark.parametrize("step", [step_block, step_block_reference], ids=["blocked", "reference"])


@pytest.fixture
def small_problem(rng):
    X = rng.normal(size=(30, 4))
    K = np.exp(-((X[:, None, :] - X[None, :, :]) ** 2).sum(-1) / 4.0)
    return centered(K)


@STEPS
@pytest.mark.parametrize("solver", ["kha", "kha-t", "kha-et"])
def test_kha_family_block_equals_eq8_step_by_step(small_problem, solver, step):
    Kc = small_problem
    l, r = Kc.shape[0], 4
    state = begin_pass(start_state(solver, r, DenseRows(Kc), seed=3, eta0=0.3))
    A = state["A"].copy()
    idx = np.random.default_rng(0).permutation(l)[:12]
    new = step(state, Kc[idx], idx)
    for s, p in enumerate(idx):
        factor = 1.0 if solver == "kha" else l / (s + l)
        A = kha_step(A, Kc, p, state["gain"] * factor)
    np.testing.assert_allclose(new["A"], A, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(new["AK"], A @ Kc, rtol=1e-9, atol=1e-12)  # eq. 18 kept A K' exact
    assert new["t"] == 12 and new["position"] == 12
    assert not np.shares_memory(new["A"], state["A"])  # the step is pure


@STEPS
def test_smd_block_equals_algorithm1_step_by_step(small_problem, step):
    Kc = small_problem
    l, r = Kc.shape[0], 3
    params = {"eta0": 0.2, "mu": 2.0, "xi": 0.99}
    state = begin_pass(start_state("kha-smd", r, DenseRows(Kc), seed=1, **params))
    A, B, rho = state["A"].copy(), state["B"].copy(), state["rho"].copy()
    idx = np.random.default_rng(2).permutation(l)[:15]
    new = step(state, Kc[idx], idx)
    for s, p in enumerate(idx):
        A, B, rho = smd_step(A, B, rho, Kc, p, state["gain"] * l / (s + l), params["mu"], params["xi"])
    assert np.abs(B).max() > 0 and np.abs(rho - 1).max() > 1e-6  # SMD did adapt
    np.testing.assert_allclose(new["rho"], rho, rtol=1e-9)
    np.testing.assert_allclose(new["B"], B, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(new["A"], A, rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(new["AK"], A @ Kc, rtol=1e-8, atol=1e-12)


def test_eigenvalue_estimates_eq13_at_exact_solution(small_problem):
    from kpca.solvers import eigenvalue_estimates, exact_components

    lam, A = exact_components(small_problem, 5)
    np.testing.assert_allclose(eigenvalue_estimates(A, A @ small_problem), lam, rtol=1e-10)
