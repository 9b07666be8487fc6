"""Names say what runs (issue 53): ``kha``, ``kha-t``, ``kha-et`` and ``kha-smd``, named with nothing else,
run their papers' update rules (seed 000 eq. 8-21) row by row with their gains, from the default's warm
start; the default solver ``ritz`` runs the Rayleigh-Ritz passes that the four names ran, bit for bit,
before. Each of the four equals the step-by-step reference (`tests.naive.run_passes_reference`) from the
same start."""

import numpy as np
import pytest

from bench._adversarial import digits
from bench._stepwise import DenseRows
from kpca.estimator import KernelHebbianPCA
from kpca.fitting import FitRequest, prepare_fit
from kpca.kernels import KernelSpec
from kpca.params import ParamError
from kpca.rows import KernelRows
from tests.naive import run_passes_reference

KHA_NAMES = ("kha", "kha-t", "kha-et", "kha-smd")
ROWS, R, PASSES = 1200, 8, 3  # more rows than the exact start holds: the default's Nystrom start


@pytest.fixture(scope="module")
def X():
    return digits(ROWS)


@pytest.fixture(scope="module")
def fits(X):
    """Each name's fit: its start, its final state, its resolved parameters, and its rows."""
    out = {}
    for name in (*KHA_NAMES, "ritz"):
        rows = KernelRows(X, KernelSpec("gaussian", sigma=3.0))
        prepared = prepare_fit(rows, FitRequest(name, R, {"passes": PASSES, "seed": 0}))
        state, _ = prepared.run(rows)
        out[name] = (prepared.state, state, prepared.params, rows)
    return out


def test_the_four_names_run_four_different_update_rules(fits):
    for name in KHA_NAMES:
        start, state, params, _ = fits[name]
        assert params["update"] == "stochastic" and params["init"] == "nystrom", params
        assert state["pass"] == PASSES
    finals = {name: fits[name][1]["A"] for name in (*KHA_NAMES, "ritz")}
    for i, a in enumerate(finals):
        for b in list(finals)[i + 1:]:
            assert not np.allclose(finals[a], finals[b], rtol=1e-6, atol=0), (a, b)
    assert fits["ritz"][2]["update"] == "rayleigh-ritz" and fits["ritz"][1]["pass"] < PASSES + 1


@pytest.mark.parametrize("name", KHA_NAMES)
def test_each_name_equals_its_step_by_step_reference(fits, name):
    """The blocked, tiled passes of the fit against the papers' steps written plainly (eq. 8-21) over the
    dense K', from the same start, the same permutations and blocks."""
    start, state, params, rows = fits[name]
    Kc = rows.dense()
    reference = run_passes_reference(DenseRows(Kc), start, PASSES, params["block_size"])
    for key in ("A", "AK") + (("B", "rho") if name == "kha-smd" else ()):
        scale = float(np.abs(reference[key]).max())
        assert np.abs(state[key] - reference[key]).max() <= 1e-8 * scale, (name, key)


def test_ritz_takes_no_gain_and_a_kha_name_takes_only_its_own():
    X = digits(200)
    with pytest.raises(ParamError) as unused:
        KernelHebbianPCA(R, sigma=3.0, solver="ritz", solver_params={"eta0": 0.1}).fit(X)
    assert unused.value.field == "eta0"
    with pytest.raises(ParamError) as smd_only:
        KernelHebbianPCA(R, sigma=3.0, solver="kha-et", solver_params={"mu": 0.1}).fit(X)
    assert smd_only.value.field == "mu"
