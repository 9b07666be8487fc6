"""Rayleigh-Ritz components of a solver's span (kpca.solvers._ritz) against exact kernel PCA."""

import numpy as np
import pytest
import scipy.linalg

from bench._common import subspace_angles
from bench._stepwise import DenseRows
from kpca.driver import run_passes
from kpca.kernels import KernelSpec
from kpca.metrics import excess_error, minimal_error
from kpca.rows import KernelRows
from kpca.solvers import exact_components, ritz_components
from tests.kpca_helpers import orthonormality_error
from tests.naive import start_state

R = 6


@pytest.fixture(scope="module")
def problem(digits):
    rows = KernelRows(digits[:400], KernelSpec("gaussian", sigma=3.0))
    c = rows.fit_centering()
    Kc = rows.dense()
    lam, A = exact_components(Kc, R)
    return Kc, c.mean_diagonal, lam, A


def test_a_mixed_basis_of_the_exact_span_gives_the_exact_components(problem, rng):
    Kc, _, lam, A = problem
    M = rng.normal(size=(R, R))  # any invertible mixing: scaled, rotated, reordered
    A_r, AK_r, mu = ritz_components(M @ A, M @ A @ Kc)
    np.testing.assert_allclose(mu, lam, rtol=1e-9)
    np.testing.assert_allclose(np.abs(A_r), np.abs(A), atol=1e-8 * np.abs(A).max())  # up to sign
    np.testing.assert_allclose(AK_r, A_r @ Kc, atol=1e-9 * np.abs(AK_r).max())
    assert orthonormality_error(A_r, AK_r) < 1e-9


def test_on_a_kha_iterate_the_span_is_kept_and_the_error_drops(problem):
    Kc, s, lam, A = problem
    state = start_state("kha-smd", R, DenseRows(Kc), seed=0)
    state, _ = run_passes(DenseRows(Kc), state, 3, 128)
    A_r, AK_r, mu = ritz_components(state["A"], state["AK"])
    assert subspace_angles(A_r, state["A"], Kc).max() < 1e-6  # same span
    assert orthonormality_error(A_r, AK_r) < 1e-8 < orthonormality_error(state["A"], state["AK"])
    assert np.all(np.diff(mu) <= 0)
    e_min = minimal_error(scipy.linalg.eigvalsh(Kc), R)
    raw, ritz = excess_error(Kc, state["AK"], e_min), excess_error(Kc, AK_r, e_min)
    assert ritz < 0.5 * raw, (raw, ritz)  # measured: about a third
    assert np.all(mu <= lam * (1 + 1e-9))  # Ritz values never exceed the eigenvalues (Cauchy interlacing)


def test_a_span_of_fewer_directions_serves_them_and_zero_rows(problem, rng):
    """Issue 28: six rows spanning three directions (components collapsed onto each other, or r above
    the data's rank) serve the three Ritz components of that span and three components of variance 0,
    never the raw rows."""
    Kc, _, lam, A = problem
    same = np.vstack([A[:3], np.diag([2.0, -1.0, 0.5]) @ A[:3]])[rng.permutation(R)]  # rank 3 in 6 rows
    A_r, AK_r, mu = ritz_components(same, same @ Kc)
    np.testing.assert_allclose(mu[:3], lam[:3], rtol=1e-9)
    assert np.all(mu[3:] == 0) and np.all(A_r[3:] == 0) and np.all(AK_r[3:] == 0)
    np.testing.assert_allclose(np.abs(A_r[:3]), np.abs(A[:3]), atol=1e-8 * np.abs(A).max())
    assert orthonormality_error(A_r[:3], AK_r[:3]) < 1e-9
