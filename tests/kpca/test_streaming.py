"""Continuing a fit on appended rows (seed 002 appendix A)."""

import numpy as np
import scipy.linalg

from kpca.driver import PassHooks, run_passes
from kpca.kernels import KernelSpec
from kpca.metrics import excess_error, minimal_error
from kpca.rows import KernelRows
from tests.naive import start_state
from kpca.streaming import extend_state

SPEC = KernelSpec("gaussian", sigma=3.0)


def test_extended_state_matches_a_direct_computation(digits):
    old, full = KernelRows(digits[:300], SPEC), KernelRows(digits[:380], SPEC)
    c0 = old.fit_centering()
    state = start_state("kha-smd", 5, old, seed=0)
    state, _ = run_passes(old, state, 2, 100)
    extended, c1 = extend_state(state, c0, full)
    reference = KernelRows(digits[:380], SPEC)
    ref_c = reference.fit_centering()
    np.testing.assert_allclose(c1.column_means, ref_c.column_means, atol=1e-12)
    assert c1.grand_mean == np.float64(ref_c.grand_mean) or abs(c1.grand_mean - ref_c.grand_mean) < 1e-12
    assert abs(c1.mean_diagonal - ref_c.mean_diagonal) < 1e-12
    Kc = reference.dense()
    assert extended["A"].shape == (5, 380) and np.all(extended["A"][:, 300:] == 0)
    np.testing.assert_allclose(extended["AK"], extended["A"] @ Kc, atol=1e-10)
    assert np.abs(extended["B"]).max() > 1e-3
    np.testing.assert_allclose(extended["BK"], extended["B"] @ Kc, atol=1e-10)  # SMD's B K' likewise
    assert extended["pass"] == 2 and extended["t"] == state["t"] and np.all(extended["B"][:, 300:] == 0)


def test_continued_fit_reaches_a_fresh_fits_error_in_fewer_passes(digits):
    """800 digits fitted for 15 passes, 200 appended: the continued fit needs
    fewer passes over the 1000 than a fresh fit to reach the same excess error."""
    r, passes = 8, 15
    full = KernelRows(digits[:1000], SPEC)
    full.fit_centering()
    Kc = full.dense()
    e_min = minimal_error(scipy.linalg.eigvalsh(Kc), r)

    def errors_per_pass(rows, state, more):
        errors = []
        run_passes(rows, state, state["pass"] + more, 200,
                   PassHooks(on_pass=lambda s: errors.append(excess_error(Kc, s["AK"], e_min))))
        return errors

    fresh = errors_per_pass(full, start_state("kha-smd", r, full, seed=1), passes)
    old = KernelRows(digits[:800], SPEC)
    c_old = old.fit_centering()
    state = start_state("kha-smd", r, old, seed=1)
    state, _ = run_passes(old, state, passes, 200)
    grown = KernelRows(digits[:1000], SPEC)
    state, _ = extend_state(state, c_old, grown)
    continued = errors_per_pass(grown, state, passes)

    def passes_to(errors, level):
        return next((i + 1 for i, e in enumerate(errors) if e <= level), np.inf)

    for level in (1e-2, 3e-3):
        assert passes_to(continued, level) < passes_to(fresh, level) < np.inf, (level, fresh, continued)
