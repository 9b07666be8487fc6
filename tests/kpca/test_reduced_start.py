"""``init="nystrom"`` and ``init="rskpca"``: a reduced fit's components extended to every row
(`kpca.solvers._extend`), checked against the exact eigendecomposition (seed 000 eq. 22)."""

import numpy as np
import pytest
import scipy.linalg

from bench._stepwise import DenseRows
from kpca.defaults import WARM_GAIN_SCALE
from kpca.driver import run_passes
from kpca.kernels import KernelSpec
from kpca.metrics import excess_error, minimal_error
from kpca.params import ParamError
from kpca.rows import KernelRows
from kpca.solvers import SOLVERS, FitContext
from tests.kpca_helpers import orthonormality_error

L, R = 1500, 6


@pytest.fixture(scope="module")
def problem(digits):
    rows = KernelRows(digits[:L], KernelSpec("gaussian", sigma=3.0))
    centering = rows.fit_centering()
    Kc = rows.dense()
    return rows, centering.mean_diagonal, Kc, minimal_error(scipy.linalg.eigvalsh(Kc), R)


def fitted_start(problem, **given):
    rows, s, _, _ = problem
    context = FitContext(n_rows=L, n_components=R, mean_diagonal=s)
    params = SOLVERS["kha-smd"].resolved({"seed": 0, **given}, context, where="params")
    return params, SOLVERS["kha-smd"].start(rows, R, params)


@pytest.mark.parametrize("init, extra", [("nystrom", {"init_size": 300}), ("rskpca", {})])
def test_reduced_start_is_close_and_stays_close(problem, init, extra):
    """The start is orthonormal, ordered by variance, with A K' exact, and orders of magnitude
    closer to kernel PCA than the random start; two kha-smd passes keep that lead."""
    _, _, Kc, e_min = problem
    errors = {}
    for start in ("random", init):
        params, state = fitted_start(problem, init=start, **(extra if start == init else {}))
        first = excess_error(Kc, state["AK"], e_min)
        after, _ = run_passes(DenseRows(Kc), state, 2, 256)
        errors[start] = (first, excess_error(Kc, after["AK"], e_min))
    params, state = fitted_start(problem, init=init, **extra)
    A, AK = state["A"], state["AK"]
    print(init, "excess error (start, after 2 passes):", errors)
    np.testing.assert_allclose(AK, A @ Kc, atol=1e-10 * np.abs(AK).max())
    assert orthonormality_error(A, AK) < 1e-8
    assert np.all(np.diff(np.linalg.norm(AK, axis=1)) <= 1e-12)
    assert state["init"] == init and state.get("init_size") == extra.get("init_size")
    assert 0 <= errors[init][0] < min(1e-2 * errors["random"][0], 1e-3), errors
    assert errors[init][1] < 1e-2 * errors["random"][1], errors


def test_reduced_start_gains():
    """The warm gains: nystrom's m landmarks count as the subset's m rows; rskpca's centres do not."""
    context = FitContext(n_rows=800, n_components=R, mean_diagonal=2.0)
    kha = SOLVERS["kha-smd"]
    cold = kha.resolved({"init": "random"}, context, where="params")
    nystrom = kha.resolved({"init": "nystrom", "init_size": 200}, context, where="params")
    rskpca = kha.resolved({"init": "rskpca"}, context, where="params")
    assert nystrom["init_size"] == 200 and rskpca["init_size"] is None
    assert nystrom["eta0"] == pytest.approx(WARM_GAIN_SCALE * 0.75 * cold["eta0"])
    assert rskpca["eta0"] == pytest.approx(WARM_GAIN_SCALE * cold["eta0"])
    assert kha.resolved({"init": "nystrom"}, context, where="params")["init_size"] == 800  # all rows: exact


@pytest.mark.parametrize("given", [{"init": "rskpca", "init_size": 100}, {"init": "nystrom", "init_size": R},
                                   {"init": "nystrom", "init_size": 801}])
def test_bad_reduced_start_names_the_field(given):
    context = FitContext(n_rows=800, n_components=R, mean_diagonal=2.0)
    with pytest.raises(ParamError, match="init_size"):
        SOLVERS["kha-smd"].resolved(given, context, where="params")
