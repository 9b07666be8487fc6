"""Typed solver state (`kpca.solvers._state`): its checkpoint encoding is the dict layout the solvers
kept before it was typed, so a checkpoint written then loads and resumes bit for bit (the migration)."""

import re
from pathlib import Path

import numpy as np
import pytest

from kpca.driver import PassHooks
from kpca.fitting import FitRequest, prepare_fit
from kpca.kernels import KernelSpec
from kpca.rows import KernelRows
from kpca.solvers import AutoencoderState, ComponentsState, KHAState, SolverState, as_state, get_solver, served_model
from store import CheckpointStore

KERNEL = KernelSpec("gaussian", sigma=3.0)
PARAMS = {"passes": 3, "seed": 5, "block_size": 64, "init": "random", "tol": 0.0}


def _fit(X, solver, params, resume=None, passes=None, on_pass=None):
    rows = KernelRows(X, KERNEL)
    prepared = prepare_fit(rows, FitRequest(solver, 4, params), resume=resume, where="")
    state, _ = prepared.run(rows, PassHooks(on_pass=on_pass), passes=passes)
    return state


def _legacy_kha_checkpoint(state: KHAState) -> dict:
    """The dict the KHA family's code wrote before the state was typed (kpca/solvers/_kha.py ``start``,
    the driver's counters, the centring's entries), key by key, from a state's values."""
    legacy = {"solver": state.solver, "A": state.A, "AK": state.AK, "gain": state.gain,
              "eigenvalues": state.eigenvalues, "t": state.t, "pass": state.pass_, "position": state.position,
              "seed": state.seed, "n_rows": state.n_rows, "norm_limit": state.norm_limit, "update": state.update,
              "eta0": state.eta0, "init": state.init,
              "centering_column_means": state.centering["centering_column_means"],
              "centering_grand_mean": state.centering["centering_grand_mean"],
              "centering_mean_diagonal": state.centering["centering_mean_diagonal"]}
    if state.solver == "kha-smd":
        legacy.update(mu=state.mu, xi=state.xi, B=state.B, BK=state.BK, rho=state.rho)
    if state.elapsed_s is not None:
        legacy["elapsed_s"] = state.elapsed_s
    return legacy


@pytest.mark.parametrize("solver", ["kha-et", "kha-smd"])
def test_a_checkpoint_in_the_old_dict_layout_loads_and_resumes_bit_for_bit(digits, tmp_path, solver):
    X = digits[:240]
    whole = _fit(X, solver, PARAMS)
    passes = []
    _fit(X, solver, PARAMS, passes=1, on_pass=passes.append)
    legacy = _legacy_kha_checkpoint(passes[-1])
    assert set(passes[-1].to_checkpoint()) == set(legacy)  # the encoding is the old layout, key for key
    store = CheckpointStore(tmp_path)
    store.save("m", 1, legacy)  # a plain dict, as the old code handed the store
    loaded = store.load("m")
    state = as_state(loaded)
    assert isinstance(state, KHAState) and state.pass_ == 1 and state.solver == solver
    resumed = _fit(X, solver, PARAMS, resume=loaded)
    assert resumed.pass_ == whole.pass_ == 3 and resumed.t == whole.t
    assert np.array_equal(resumed.A, whole.A) and np.array_equal(resumed.AK, whole.AK)
    assert np.array_equal(resumed.gain, whole.gain) and resumed.residual == whole.residual
    if solver == "kha-smd":
        assert np.array_equal(resumed.B, whole.B) and np.array_equal(resumed.rho, whole.rho)


def test_a_kha_smd_checkpoint_from_before_bk_and_norm_limit_resumes(digits):
    """Checkpoints from before 2026-11-26 lack BK (restore computes it) and norm_limit (the default)."""
    X = digits[:200]
    passes = []
    whole = _fit(X, "kha-smd", PARAMS)
    _fit(X, "kha-smd", PARAMS, passes=1, on_pass=passes.append)
    legacy = _legacy_kha_checkpoint(passes[-1])
    del legacy["BK"], legacy["norm_limit"]
    state = as_state(legacy)
    assert state.BK is None and state.norm_limit is None
    resumed = _fit(X, "kha-smd", PARAMS, resume=legacy)
    assert resumed.BK is not None and resumed.pass_ == 3
    assert np.allclose(resumed.A, whole.A, rtol=1e-6, atol=1e-9)


def test_the_encoding_round_trips_every_family(digits):
    X = digits[:150]
    for solver, params, family in (("ritz", {"seed": 1, "passes": 2}, KHAState),
                                   ("nystrom", {"landmarks": 40, "seed": 1}, ComponentsState),
                                   ("exact", {}, ComponentsState)):
        state = _fit(X, solver, params)
        assert type(state) is family
        encoded = state.to_checkpoint()
        assert all(value is not None for value in encoded.values())
        again = get_solver(solver).state_type.from_checkpoint(encoded)
        assert set(again.to_checkpoint()) == set(encoded)
        for key, value in encoded.items():
            assert np.array_equal(np.asarray(again.to_checkpoint()[key]), np.asarray(value)), key
    nystrom = _fit(X, "nystrom", {"landmarks": 40, "seed": 1})
    assert nystrom.used == {"landmarks": 40} and nystrom.to_checkpoint()["used_landmarks"] == 40


def test_an_autoencoder_state_keeps_its_layout(digits):
    X = np.asarray(digits[:80, :6])
    rows = KernelRows(X, KernelSpec("polynomial", degree=2, offset=0.0, gamma=1.0))
    prepared = prepare_fit(rows, FitRequest("akpca", 2, {"passes": 1, "seed": 0}), where="")
    state, _ = prepared.run(rows)
    assert isinstance(state, AutoencoderState)
    legacy = {key: state.to_checkpoint()[key] for key in (
        "solver", "n_rows", "t", "pass", "position", "seed", "eta0", "gain", "lanczos_tol", "lanczos_max_iter",
        "scale", "mean", "start_vector", "encoder", "decoder", "surrogate_sum", "norm_limit")}
    legacy.update(state.centering)
    again = as_state(legacy)
    assert set(again.to_checkpoint()) == set(state.to_checkpoint())
    model, served = served_model(legacy, rows), served_model(state, rows)
    assert np.array_equal(model.project(X[:5]), served.project(X[:5]))


def test_entries_the_solver_does_not_know_are_carried_and_missing_ones_named():
    entries = {"solver": "exact", "A": np.eye(2, 3), "eigenvalues": np.ones(2), "n_rows": 3,
               "cluster_labels": np.array([0, 1, 1]), "centering_grand_mean": 0.5}
    state = as_state(entries)
    assert state.extras.keys() == {"cluster_labels"} and state.centering == {"centering_grand_mean": 0.5}
    assert set(state.to_checkpoint()) == set(entries)
    assert "cluster_labels" not in state.without_extras("cluster_labels").to_checkpoint()
    with pytest.raises(ValueError, match="eigenvalues"):
        as_state({"solver": "exact", "A": np.eye(2), "n_rows": 2})


def test_the_transitional_mapping_view_reads_the_encoding():
    state = ComponentsState(solver="exact", n_rows=3, A=np.eye(2, 3), eigenvalues=np.ones(2), pass_=1)
    assert isinstance(state, SolverState)
    assert state["pass"] == 1 and "AK" not in state and state.get("residual") is None
    assert dict(state, residual=0.5)["residual"] == 0.5 and as_state(state) is state


ROOT = Path(__file__).resolve().parents[2]
#: The state module itself (its docstring shows the mapping view), and one whose ``state`` is not a
#: solver's (an ASGI scope's).
EXEMPT = {"kpca/solvers/_state.py", "service/security.py"}
STRING_READS = re.compile(r"""\bstate_?\[\s*["']|\bstate_?\.get\(\s*["']"""
                          r"""|["']\w+["']\s+(?:not\s+)?in\s+state_?\b(?!\.)""")


def test_no_module_reads_a_solver_state_by_string_keys():
    """Modules read a state through its fields and methods (issue 54); the mapping view is for tests, bench/
    and paper/ results."""
    found = []
    for package in ("kpca", "store", "workers", "service", "client"):
        for path in sorted((ROOT / package).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name in EXEMPT:
                continue
            found += [f"{name}:{n}" for n, line in enumerate(path.read_text().splitlines(), 1)
                      if STRING_READS.search(line)]
    assert found == []
