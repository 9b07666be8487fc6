"""Blocked KHA updates (kpca.solvers._blocked) against the step-by-step jitted kernels.

The reference is `tests.naive.step_block_reference`, the step-by-step form
with the O(r l)-per-row kernels `kha_steps` / `smd_steps`. Agreement is norm-wise: ``|blocked - reference| <= rtol *
max|reference|`` elementwise (entries of A far below its largest entry are
compared at that scale). Observed: about 1e-14 for one block, 1e-12 after
several passes; asserted: 1e-9 and 1e-7.
"""

import warnings

import numpy as np
import pytest

import kpca.solvers._blocked as blocked_module
from bench._stepwise import DenseRows
from kpca.driver import permutation, run_passes
from kpca.kernels import KernelSpec
from kpca.rows import KernelRows
from kpca.solvers import SOLVERS
from kpca.solvers._blocked import blocked_step_block
from kpca.solvers._kha import begin_pass, diverged
from tests.naive import centered, run_passes_reference, start_state, step_block_reference

KHA_FAMILY = ["kha", "kha-t", "kha-et", "kha-smd"]
STATE_ARRAYS = ("A", "AK", "B", "BK", "rho")


stepwise = step_block_reference  # the step-by-step reference


def assert_states_close(got, want, rtol):
    assert set(got) == set(want)
    for key in STATE_ARRAYS:
        if key in want:
            assert np.isfinite(want[key]).all(), f"{key}: the reference diverged; compare elsewhere"
            scale = np.abs(want[key]).max()
            np.testing.assert_allclose(got[key], want[key], rtol=rtol, atol=rtol * scale, err_msg=key)
    for key in ("t", "position", "pass"):
        assert got[key] == want[key], key


def params_for(solver, eta0=None, mu=None):
    params = {"eta0": 0.3 if eta0 is None else eta0}
    if solver == "kha-smd":
        # mu small enough that no log-gain reaches the clip at RHO_MAX: the clip is a discontinuity, where
        # rounding differences between the two forms could take different sides
        params.update(eta0=0.2 if eta0 is None else eta0, mu=0.5 if mu is None else mu, xi=0.99)
    return params


def first_state(Kc, solver, r, seed=1, **params):
    return start_state(solver, r, DenseRows(Kc), seed=seed, **params_for(solver, **params))


@pytest.fixture(scope="module")
def points():
    return np.random.default_rng(7).normal(size=(180, 4))


@pytest.fixture(scope="module")
def problem(points):
    """A centred Gaussian kernel matrix (sigma sqrt 2) on 180 random points in R^4."""
    X = points
    return centered(np.exp(-((X[:, None, :] - X[None, :, :]) ** 2).sum(-1) / 4.0))


def run_blocks(step, state, Kc, order, sizes, **kwargs):
    a = 0
    for size in sizes:
        idx = order[a : a + size]
        state = step(state, Kc[idx], idx, **kwargs)
        a += size
    return state


def start(Kc, solver, r, seed=1, **params):
    return begin_pass(first_state(Kc, solver, r, seed, **params))


@pytest.mark.parametrize("solver", KHA_FAMILY)
@pytest.mark.parametrize("r", [3, 8])
def test_blocked_equals_stepwise_over_several_blocks(problem, solver, r):
    state = start(problem, solver, r)
    order = permutation(0, 0, problem.shape[0])
    sizes = [64, 50, 37, 29]
    want = run_blocks(stepwise, state, problem, order, sizes)
    got = run_blocks(blocked_step_block, state, problem, order, sizes)
    if solver == "kha-smd":
        assert np.abs(want["B"]).max() > 0 and np.abs(want["rho"] - 1).max() > 1e-3  # SMD did adapt
        for state in (want, got):  # the images the blocked form reads y and B k from
            np.testing.assert_allclose(state["BK"], state["B"] @ problem, atol=1e-12)
    assert_states_close(got, want, rtol=1e-9)
    np.testing.assert_allclose(got["AK"], got["A"] @ problem, atol=1e-12)
    assert got["t"] == sum(sizes)


@pytest.mark.parametrize("solver", KHA_FAMILY)
def test_several_segments_per_block(problem, solver, monkeypatch):
    """Blocks longer than SEGMENT_ROWS are materialised every SEGMENT_ROWS rows: still the reference."""
    monkeypatch.setattr(blocked_module, "SEGMENT_ROWS", 40)
    state = start(problem, solver, 5)
    order = permutation(3, 0, problem.shape[0])
    want = run_blocks(stepwise, state, problem, order, [180])
    assert_states_close(run_blocks(blocked_step_block, state, problem, order, [180], sub_block=16), want,
                        rtol=1e-9)


@pytest.mark.parametrize("solver", KHA_FAMILY)
@pytest.mark.parametrize("source", ["kernel-rows", "kernel-rows-float32", "dense"])
def test_a_row_source_instead_of_rows(problem, points, solver, source):
    """Given a source (K'[p, p] from the block's points, the one product tile by tile over
    several data chunks), the blocked step still equals the step-by-step one on the rows."""
    if source == "dense":
        rows = DenseRows(problem)
    else:
        dtype = np.float32 if source.endswith("float32") else np.float64
        rows = KernelRows(points, KernelSpec("gaussian", sigma=np.sqrt(2.0)), dtype=dtype, chunk_rows=50)
        rows.fit_centering()
    state = start(problem, solver, 5)
    order = permutation(0, 0, problem.shape[0])
    sizes = [64, 50, 37, 29]
    want = run_blocks(stepwise, state, problem, order, sizes)
    got, a = state, 0
    for size in sizes:
        got = blocked_step_block(got, rows, order[a : a + size], sub_block=16)
        a += size
    assert_states_close(got, want, rtol=1e-5 if source.endswith("float32") else 1e-9)
    np.testing.assert_allclose(got["AK"], got["A"] @ problem, atol=1e-5 if source.endswith("float32") else 1e-12)
    with pytest.raises(ValueError, match="rows"):
        blocked_step_block(state, DenseRows(problem[:90, :90]), order[:10])


def test_a_state_saved_without_BK_gets_it_from_the_rows(problem):
    """A kha-smd state from before B K' was kept: the steps say what is missing, the solver's restore
    computes it, and the driver does so by itself and then runs as if it had always been kept."""
    rows = DenseRows(problem)
    state = first_state(problem, "kha-smd", 4, seed=4)
    state, _ = run_passes(rows, state, 1, 50)
    legacy = {k: v for k, v in state.items() if k != "BK"}
    idx = permutation(0, 1, problem.shape[0])[:10]
    for step in (blocked_step_block, stepwise):
        with pytest.raises(ValueError, match="BK"):
            step(legacy, problem[idx], idx)
    np.testing.assert_allclose(SOLVERS["kha-smd"].restore(legacy, rows, 64)["BK"], state["BK"], atol=1e-12)
    want, _ = run_passes(rows, state, 3, 50)
    got, _ = run_passes(rows, legacy, 3, 50)
    assert_states_close(got, want, rtol=1e-9)


@pytest.mark.parametrize("solver", KHA_FAMILY)
@pytest.mark.parametrize("sub_block", [1, 7, 1000])
def test_sub_block_size_and_blocks_of_one_and_uneven_length(problem, solver, sub_block):
    state = start(problem, solver, 5)
    order = permutation(3, 0, problem.shape[0])
    sizes = [1, 1, 13, 1, 40, 2, 61, 1]
    want = run_blocks(stepwise, state, problem, order, sizes)
    got = run_blocks(blocked_step_block, state, problem, order, sizes, sub_block=sub_block)
    assert_states_close(got, want, rtol=1e-9)


@pytest.mark.parametrize("solver", KHA_FAMILY)
def test_repeated_indices_inside_a_block(problem, solver):
    """Not produced by a pass (a permutation), but handled: the scatter adds."""
    state = start(problem, solver, 4)
    idx = np.array([5, 17, 5, 90, 17, 5, 3])
    want = stepwise(state, problem[idx], idx)
    got = blocked_step_block(state, problem[idx], idx)
    assert_states_close(got, want, rtol=1e-9)


@pytest.mark.parametrize("solver", KHA_FAMILY)
def test_blocked_is_pure_and_keeps_the_state_layout(problem, solver):
    state = start(problem, solver, 4)
    before = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in state.items()}
    idx = permutation(0, 0, problem.shape[0])[:30]
    new = blocked_step_block(state, problem[idx], idx)
    for key, value in before.items():
        assert np.array_equal(state[key], value), key  # input untouched
    for key in state:
        if isinstance(state[key], np.ndarray):
            assert not np.shares_memory(new[key], state[key]), key
            assert new[key].dtype == state[key].dtype and new[key].shape == state[key].shape, key
    assert new["t"] == 30 and new["position"] == 30


def test_empty_block_changes_nothing(problem):
    state = start(problem, "kha-smd", 4)
    new = blocked_step_block(state, problem[:0], np.zeros(0, dtype=np.int64))
    assert_states_close(new, state, rtol=0.0)


def test_float32_state(problem):
    Kc = problem.astype(np.float32)
    l = Kc.shape[0]
    for solver in ("kha-et", "kha-smd"):
        state = begin_pass(first_state(Kc.astype(np.float64), solver, 4, seed=2))
        state = {k: (v.astype(np.float32) if isinstance(v, np.ndarray) and v.dtype == np.float64 and v.ndim == 2
                     else v) for k, v in state.items()}
        idx = permutation(0, 0, l)[:100]
        want = stepwise(state, Kc[idx], idx)
        got = blocked_step_block(state, Kc[idx], idx)
        assert got["A"].dtype == np.float32 and got["AK"].dtype == np.float32
        assert_states_close(got, want, rtol=1e-4)


@pytest.mark.parametrize("solver", ["kha-et", "kha-smd"])
def test_float32_rows_with_a_float64_state(problem, solver):
    """float32 rows are multiplied in float32 (half the bytes); the state stays float64 and
    agrees with the float64 steps on the same (float32-rounded) rows to float32 rounding."""
    K32 = problem.astype(np.float32)
    K64 = K32.astype(np.float64)
    state = start(K64, solver, 6)
    order = permutation(0, 0, K64.shape[0])
    got = run_blocks(blocked_step_block, state, K32, order, [100, 80])
    want = run_blocks(stepwise, state, K64, order, [100, 80])
    assert got["A"].dtype == np.float64 and got["AK"].dtype == np.float64
    assert_states_close(got, want, rtol=1e-5)
    with pytest.raises(AssertionError):  # and the float32 products are really used
        assert_states_close(got, run_blocks(blocked_step_block, state, K64, order, [100, 80]), rtol=1e-13)


@pytest.mark.parametrize("solver", KHA_FAMILY)
def test_long_run_through_the_driver(problem, solver):
    """Six passes of run_passes (uneven last block): blocked within 1e-7 of step by step."""
    rows = DenseRows(problem)
    state = start_state(solver, 6, rows, seed=5)
    want = run_passes_reference(rows, state, 6, 50)
    got, _ = run_passes(rows, state, 6, 50)
    assert got["pass"] == want["pass"] == 6 and "gain_reductions" not in got
    assert_states_close(got, want, rtol=1e-7)


def record_sub_blocks(monkeypatch):
    """Wrap the jitted transforms to log (rows offered, steps done) per sub-block."""
    log = []
    for name, qt_position in (("kha_transform", 1), ("smd_transform", 2)):  # W, [R,] Qt, ...
        jitted = getattr(blocked_module, name)

        def logged(*args, jitted=jitted, qt_position=qt_position):
            done = jitted(*args)
            log.append((args[qt_position].shape[0], done))
            return done

        monkeypatch.setattr(blocked_module, name, logged)
    return log


@pytest.mark.parametrize("solver", KHA_FAMILY)
def test_rematerialisation_path_is_exact(problem, solver, monkeypatch):
    """A growth limit just below the starting ||T|| ends sub-blocks early, then lets them run."""
    log = record_sub_blocks(monkeypatch)
    state = start(problem, solver, 5)
    order = permutation(1, 0, problem.shape[0])
    sizes = [90, 90]
    want = run_blocks(stepwise, state, problem, order, sizes)
    got = run_blocks(blocked_step_block, state, problem, order, sizes, sub_block=30, growth_limit=0.99)
    assert any(done < offered for offered, done in log)  # re-materialised early ...
    assert any(done == offered > 1 for offered, done in log)  # ... and accumulated otherwise
    assert sum(done for _, done in log) == 180
    assert_states_close(got, want, rtol=1e-9)


@pytest.mark.parametrize("solver", ["kha-et", "kha-smd"])
def test_large_gain_rematerialises_and_diverges_like_the_reference(problem, solver, monkeypatch):
    """A gain far beyond stability: ||T|| passes GROWTH_LIMIT, the block ends early and
    the state is diverged exactly when the step-by-step one is (the driver's guard)."""
    log = record_sub_blocks(monkeypatch)
    state = start(problem, solver, 4, eta0=5.0)
    idx = permutation(0, 0, problem.shape[0])[:128]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = stepwise(state, problem[idx], idx)
        got = blocked_step_block(state, problem[idx], idx)
    assert any(done < offered for offered, done in log)
    assert diverged(want) and diverged(got)


def test_divergence_guard_in_the_driver_behaves_the_same(problem):
    rows = DenseRows(problem)
    state = start_state("kha-et", 4, rows, seed=3, eta0=50.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = run_passes_reference(rows, state, 2, 64)
        got, _ = run_passes(rows, state, 2, 64)
    assert want["gain_reductions"] >= 1 and got["gain_reductions"] == want["gain_reductions"]
    assert_states_close(got, want, rtol=1e-7)


@pytest.mark.parametrize("solver", KHA_FAMILY)
def test_the_registered_step_is_the_blocked_one(problem, solver):
    """The step the registry declares (and the driver calls) agrees with the reference."""
    state = start(problem, solver, 4)
    idx = permutation(2, 0, problem.shape[0])[:70]
    step = SOLVERS[solver].step
    assert_states_close(step(state, problem[idx], idx), stepwise(state, problem[idx], idx), rtol=1e-9)
