"""Resumability (bit for bit), stop requests and the divergence guard."""

import numpy as np
import pytest

from bench._stepwise import DenseRows
from kpca.driver import Diverged, PassHooks, run_passes
from kpca.kernels import KernelSpec
from kpca.rows import KernelRows
from kpca.solvers._blocked import blocked_step_block
from tests.naive import run_passes_reference, start_state


@pytest.fixture(scope="module")
def Kc(digits):
    rows = KernelRows(digits[:300], KernelSpec("gaussian", sigma=3.0))
    rows.fit_centering()
    return rows.dense(), rows.centering.mean_diagonal


def start(Kc, solver, **params):
    return start_state(solver, 5, DenseRows(Kc[0]), seed=11, **params)


def round_trip(state):
    """What a checkpoint does: plain arrays and scalars, copied."""
    return {k: (np.array(v) if isinstance(v, np.ndarray) else v) for k, v in state.items()}


@pytest.mark.parametrize("solver", ["kha", "kha-t", "kha-et", "kha-smd"])
def test_resume_after_a_pass_equals_uninterrupted(Kc, solver):
    rows = DenseRows(Kc[0])
    whole, _ = run_passes(rows, start(Kc, solver), 4, 64)
    snapshots = []
    run_passes(rows, start(Kc, solver), 2, 64, PassHooks(on_pass=lambda s: snapshots.append(round_trip(s))))
    resumed, stopped = run_passes(rows, snapshots[-1], 4, 64)
    assert not stopped and resumed["pass"] == 4 and resumed["t"] == whole["t"]
    for key in ("A", "AK", "B", "rho"):
        if key in whole:
            assert np.array_equal(resumed[key], whole[key]), key


def test_stop_mid_pass_then_resume_is_bit_exact(Kc):
    rows = DenseRows(Kc[0])
    whole, _ = run_passes(rows, start(Kc, "kha-smd"), 2, 64)
    blocks = {"n": 0}

    def stop_after_three_blocks():
        blocks["n"] += 1
        return blocks["n"] == 3

    partial, stopped = run_passes(rows, start(Kc, "kha-smd"), 2, 64, PassHooks(should_stop=stop_after_three_blocks))
    assert stopped and partial["pass"] == 0 and partial["position"] == 3 * 64
    resumed, stopped = run_passes(rows, round_trip(partial), 2, 64)
    assert not stopped
    assert np.array_equal(resumed["A"], whole["A"]) and np.array_equal(resumed["rho"], whole["rho"])


def test_divergence_guard_reduces_the_gain_and_keeps_components_finite(Kc):
    rows = DenseRows(Kc[0])
    state, _ = run_passes(rows, start(Kc, "kha-et", eta0=500.0), 2, 64)
    assert state["gain_reductions"] >= 1 and state["eta0"] < 500.0
    assert np.all(np.isfinite(state["A"])) and np.all(np.isfinite(state["AK"]))


def test_divergence_that_cannot_be_recovered_says_what_to_do(Kc):
    rows = DenseRows(Kc[0])
    with pytest.raises(Diverged, match="smaller eta0"):
        run_passes(rows, start(Kc, "kha", eta0=1e12), 1, 64)


@pytest.fixture(scope="module")
def kernel_rows(digits):
    rows = KernelRows(digits[:300], KernelSpec("gaussian", sigma=3.0))
    rows.fit_centering()
    return rows


def test_the_driver_needs_a_row_source(Kc):
    with pytest.raises(TypeError, match="row source"):
        run_passes(Kc[0], start(Kc, "kha"), 1, 64)


class ProductsOnly:
    """Real kernel rows as a row source that counts what the driver asks of it."""

    def __init__(self, rows):
        self.rows, self.n_rows = rows, rows.n_rows
        self.calls = {"block": 0, "square": 0, "left_product": 0}

    def block(self, indices):
        self.calls["block"] += 1
        return self.rows.block(indices)

    def square(self, indices):
        self.calls["square"] += 1
        return self.rows.square(indices)

    def left_product(self, indices, C, out, **transform):
        self.calls["left_product"] += 1
        return self.rows.left_product(indices, C, out, **transform)


@pytest.mark.parametrize("solver", ["kha-et", "kha-smd"])
def test_a_fused_pass_never_forms_the_rows_and_matches_one_that_does(kernel_rows, solver):
    """From a row source the update multiplies tiles as they come (no block of rows is
    formed); the result is that of the pass over formed rows, up to rounding."""
    state = start_state(solver, 5, kernel_rows, seed=3)
    source = ProductsOnly(kernel_rows)
    fused, _ = run_passes(source, state, 3, 64)
    assert source.calls["block"] == 0 and source.calls["left_product"] == source.calls["square"] == 3 * 5
    formed = run_passes_reference(DenseRows(kernel_rows.dense()), state, 3, 64, step=blocked_step_block)
    for key in ("A", "AK", "B", "BK", "rho"):
        if key in formed:
            np.testing.assert_allclose(fused[key], formed[key], rtol=1e-9, atol=1e-9 * np.abs(formed[key]).max())
