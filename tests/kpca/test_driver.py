"""Resumability (bit for bit), stop requests and the divergence guard."""

import threading

import numpy as np
import pytest

from kpca.driver import DenseRows, Diverged, run_passes
from kpca.kernels import KernelSpec
from kpca.rows import KernelRows
from kpca.solvers import init_state, resolve_params


@pytest.fixture(scope="module")
def Kc(digits):
    rows = KernelRows(digits[:300], KernelSpec("gaussian", sigma=3.0))
    rows.fit_centering()
    return rows.dense(), rows.centering.mean_diagonal


def start(Kc, solver, **params):
    K, s = Kc
    return init_state(solver, 5, lambda i: K[i], K.shape[0], resolve_params(solver, s, **params), seed=11)


def round_trip(state):
    """What a checkpoint does: plain arrays and scalars, copied."""
    return {k: (np.array(v) if isinstance(v, np.ndarray) else v) for k, v in state.items()}


@pytest.mark.parametrize("solver", ["kha", "kha-t", "kha-et", "kha-smd"])
def test_resume_after_a_pass_equals_uninterrupted(Kc, solver):
    rows = DenseRows(Kc[0])
    whole, _ = run_passes(rows, start(Kc, solver), 4, 64)
    snapshots = []
    run_passes(rows, start(Kc, solver), 2, 64, on_pass=lambda s: snapshots.append(round_trip(s)))
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

    partial, stopped = run_passes(rows, start(Kc, "kha-smd"), 2, 64, should_stop=stop_after_three_blocks)
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


class WatchedRows:
    """Real kernel rows, with a record of which threads ask for blocks and how many at once."""

    def __init__(self, rows):
        self.rows, self.n_rows = rows, rows.n_rows
        self.lock = threading.Lock()
        self.active = self.most_at_once = 0
        self.threads = set()

    def block(self, indices):
        with self.lock:
            self.active += 1
            self.most_at_once = max(self.most_at_once, self.active)
            self.threads.add(threading.current_thread().name)
        try:
            return self.rows.block(indices)
        finally:
            with self.lock:
                self.active -= 1


@pytest.fixture(scope="module")
def kernel_rows(digits):
    rows = KernelRows(digits[:300], KernelSpec("gaussian", sigma=3.0))
    rows.fit_centering()
    return rows


@pytest.mark.parametrize("solver", ["kha-et", "kha-smd"])
def test_overlapped_rows_give_the_sequential_result(kernel_rows, solver):
    """The next block's rows computed in the background change nothing but the timing
    (equal up to BLAS's thread count, which the overlap caps)."""
    K, s = kernel_rows.dense(), kernel_rows.centering.mean_diagonal
    state = init_state(solver, 5, lambda i: K[i], 300, resolve_params(solver, s), seed=3)
    watched = WatchedRows(kernel_rows)
    ahead, _ = run_passes(watched, state, 3, 64, overlap=True)
    plain, _ = run_passes(kernel_rows, state, 3, 64, overlap=False)
    assert any(name.startswith("kpca-rows-ahead") for name in watched.threads)
    for key in ("A", "AK", "B", "rho"):
        if key in plain:
            np.testing.assert_allclose(ahead[key], plain[key], rtol=1e-12, atol=1e-12 * np.abs(plain[key]).max())


def test_rows_are_never_used_by_two_threads_nor_after_the_return(kernel_rows):
    """Stops, divergence restarts and pass ends wait for the block in flight."""
    K, s = kernel_rows.dense(), kernel_rows.centering.mean_diagonal
    watched = WatchedRows(kernel_rows)
    calls = {"n": 0}

    def stop_after_two_blocks():
        calls["n"] += 1
        return calls["n"] == 2

    start_state = init_state("kha-et", 5, lambda i: K[i], 300, resolve_params("kha-et", s), seed=3)
    partial, stopped = run_passes(watched, start_state, 2, 64, should_stop=stop_after_two_blocks)
    assert stopped and partial["position"] == 128 and watched.active == 0
    diverging = init_state("kha-et", 5, lambda i: K[i], 300, resolve_params("kha-et", s, eta0=500.0 / s), seed=3)
    recovered, _ = run_passes(watched, diverging, 2, 64, on_pass=lambda state: watched.block(np.arange(3)))
    assert recovered["gain_reductions"] >= 1 and watched.active == 0
    assert watched.most_at_once == 1


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
    K, s = kernel_rows.dense(), kernel_rows.centering.mean_diagonal
    state = init_state(solver, 5, lambda i: K[i], 300, resolve_params(solver, s), seed=3)
    source = ProductsOnly(kernel_rows)
    fused, _ = run_passes(source, state, 3, 64)
    assert source.calls["block"] == 0 and source.calls["left_product"] == source.calls["square"] == 3 * 5
    formed, _ = run_passes(source, state, 3, 64, fused=False)
    assert source.calls["block"] == 3 * 5
    for key in ("A", "AK", "B", "BK", "rho"):
        if key in formed:
            np.testing.assert_allclose(fused[key], formed[key], rtol=1e-9, atol=1e-9 * np.abs(formed[key]).max())
