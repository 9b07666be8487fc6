"""The fit and projection tasks on a real LocalCluster, with real zarr on disk."""


import numpy as np
import pytest

from bench._common import subspace_angles
from kpca.estimator import KernelHebbianPCA
from kpca.solvers import ritz_components
from store import CheckpointStore, DatasetStore, ModelRegistry
from store.jobs.records import ModelRecord
from tests.store_checks import committed_digits, ended, wait_for_record
from tests.waiting import PATIENCE_S, wait_until
from workers import Backend
from workers.fit import run_fit
from workers.operations import Project


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, digits):
    return committed_digits(tmp_path_factory.mktemp("data"), digits[:400], chunks=3)


@pytest.fixture(scope="module")
def backend(data_dir):
    with Backend(data_dir, n_workers=1) as b:
        yield b


def model_record(data_dir, name, solver="kha-smd", passes=4, **params):
    """A queued record as the service makes it (parameters checked against the data set's rows)."""
    if solver != "exact":  # the exact solver declares neither passes nor seed
        params = {"passes": passes, "seed": 3, "init": "random", **params}  # the paper's start: the passes matter
    return ModelRecord.new(name, DatasetStore(data_dir).get("digits"), kernel={"type": "gaussian", "sigma": 3.0},
                           n_components=5, solver=solver, params=params)


def wait_for(registry, name, timeout=PATIENCE_S):
    return wait_for_record(registry, name, ended, timeout)


def test_fit_on_cluster_reports_progress_and_projects(data_dir, backend, digits):
    registry = ModelRegistry(data_dir)
    registry.create(model_record(data_dir, "smd", passes=6))
    backend.submit_fit("smd")
    record = wait_for(registry, "smd")
    assert record.status == "completed", record.error
    assert [h.pass_ for h in record.history] == [1, 2, 3, 4, 5, 6]
    errors = [h.convergence.value for h in record.history]
    assert all(h.convergence.metric == "excess_error" for h in record.history)
    assert errors[-1] < errors[0] and errors[-1] < 0.05
    assert record.progress.fraction == 1.0 and record.progress.t == 6 * 400
    assert record.params_used["eta0"] > 0 and record.params_used["xi"] == 0.99
    # projection on a worker equals the estimator on the same data
    Z = backend.serve(Project("smd", digits[1000:1010]))
    exact = KernelHebbianPCA(5, sigma=3.0, solver="exact").fit(digits[:400])
    state = CheckpointStore(data_dir).load("smd")
    assert subspace_angles(state["A"], exact.coefficients_[:4], exact.rows_.dense()).max() < 0.1
    served, _, _ = ritz_components(state["A"], state["AK"])  # the model serves the iterate's Ritz components
    np.testing.assert_allclose(Z, exact.rows_.transform_block(digits[1000:1010]) @ served.T, atol=1e-10)


def test_resume_from_checkpoint_equals_uninterrupted_run(data_dir):
    registry, checkpoints = ModelRegistry(data_dir), CheckpointStore(data_dir)
    registry.create(model_record(data_dir, "whole", passes=4))
    assert run_fit(str(data_dir), "whole") == "completed"
    # "crash" after pass 2: the fit ran only two passes, then is started again for four
    registry.create(model_record(data_dir, "crashed", passes=2))
    assert run_fit(str(data_dir), "crashed") == "completed"
    record = registry.get("crashed")
    registry.update("crashed", status="queued", params={**record.params, "passes": 4})
    assert run_fit(str(data_dir), "crashed") == "completed"
    whole, resumed = checkpoints.load("whole"), checkpoints.load("crashed")
    for key in ("A", "AK", "B", "rho"):
        assert np.array_equal(whole[key], resumed[key]), key
    assert [h.pass_ for h in registry.get("crashed").history] == [1, 2, 3, 4]


def test_cancel_keeps_the_last_checkpoint(data_dir):
    registry = ModelRegistry(data_dir)
    registry.create(model_record(data_dir, "cancelled", passes=50, block_size=50))
    registry.request_cancel("cancelled")
    assert run_fit(str(data_dir), "cancelled") == "cancelled"
    assert registry.get("cancelled").status == "cancelled"


def test_divergence_is_reported_in_words(data_dir):
    registry = ModelRegistry(data_dir)
    registry.create(model_record(data_dir, "wild", solver="kha", passes=2, eta0=1e12))
    assert run_fit(str(data_dir), "wild") == "failed"
    error = registry.get("wild").error
    assert error.code == "diverged" and "smaller eta0" in error.message


def test_exact_solver_task(data_dir, digits):
    registry = ModelRegistry(data_dir)
    registry.create(model_record(data_dir, "exact", solver="exact"))
    assert run_fit(str(data_dir), "exact") == "completed"
    lam = CheckpointStore(data_dir).load("exact")["eigenvalues"]
    ref = KernelHebbianPCA(5, sigma=3.0, solver="exact").fit(digits[:400]).eigenvalues_
    np.testing.assert_allclose(lam, ref, rtol=1e-8)


def test_a_fit_whose_model_is_deleted_stops_and_writes_nothing(data_dir):
    import concurrent.futures

    registry, checkpoints = ModelRegistry(data_dir), CheckpointStore(data_dir)
    registry.create(model_record(data_dir, "doomed", passes=500, block_size=20))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        outcome = pool.submit(run_fit, str(data_dir), "doomed")
        def under_way() -> bool:
            assert not outcome.done(), outcome
            return bool(checkpoints.list("doomed"))

        wait_until(under_way, what="the fit's first checkpoint", interval=0.01)
        registry.delete("doomed")
        assert outcome.result(timeout=PATIENCE_S) == "deleted"
    assert checkpoints.list("doomed") == []
    assert not (data_dir / "models" / "doomed").exists()


def test_the_embedded_dashboard_listens_on_loopback_only(backend):
    """The dask dashboard of the embedded cluster (scheduler logs, identity, metrics) answers on
    127.0.0.1 only, on the port its link names; nothing of the scheduler listens on every interface."""
    import psutil
    from urllib.parse import urlparse

    link = urlparse(backend.cluster.dashboard_link)
    assert link.hostname == "127.0.0.1"
    listening = [c.laddr for c in psutil.Process().net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN]
    assert any(addr.port == link.port for addr in listening)
    assert all(addr.ip in ("127.0.0.1", "::1") for addr in listening), listening


def test_the_embedded_workers_are_sized_to_the_machine(backend):
    """One configured worker on c cores: its numba kernels get all c threads, BLAS one; it offers one fit."""
    import os

    from workers.dask_cluster import embedded_sizing, machine_cores

    environ = backend.client.run(lambda: {k: os.environ.get(k) for k in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS",
                                                                        "OPENBLAS_NUM_THREADS")})
    _, kernel_threads = embedded_sizing(machine_cores(), 1)
    assert kernel_threads == machine_cores()
    assert list(environ.values()) == [{"NUMBA_NUM_THREADS": str(kernel_threads), "OMP_NUM_THREADS": "1",
                                       "OPENBLAS_NUM_THREADS": "1"}]
    assert backend.fit_workers() == 1


def fitted_niceness() -> int:
    """The niceness a fit started from this thread runs at: this thread's, lowered by KPCA_FIT_NICE."""
    from kpca._tiles import thread_niceness
    from workers.priority import fit_nice

    return min(19, thread_niceness() + fit_nice())


def test_a_fit_runs_below_serving_priority_and_its_tiles_with_it(data_dir, caplog, monkeypatch):
    """A fit's thread runs KPCA_FIT_NICE (default 10) below the thread that starts it (and at the idle policy
    with KPCA_BACKGROUND_POLICY=idle), so that projections and the API process get the cores first on a busy
    machine; its kernel tiles' pool threads share both, and KPCA_FIT_NICE=0 keeps a fit at the caller's
    priority and policy."""
    import logging

    from kpca import _tiles
    from workers.priority import FIT_NICE, thread_policy

    registry = ModelRegistry(data_dir)
    base = _tiles.thread_niceness()
    monkeypatch.delenv("KPCA_FIT_NICE", raising=False)
    monkeypatch.setenv("KPCA_BACKGROUND_POLICY", "idle")
    earlier = _tiles._pools.pop(min(19, base + FIT_NICE), None)  # started by an earlier fit, at the default policy
    if earlier is not None:
        earlier.shutdown()
    registry.create(model_record(data_dir, "niced", passes=2))
    with caplog.at_level(logging.INFO, logger="workers.fit"):
        assert run_fit(str(data_dir), "niced") == "completed"
    assert f"at niceness {min(19, base + FIT_NICE)}, idle policy" in caplog.text and FIT_NICE == 10
    assert _tiles.thread_niceness() == base and thread_policy() == "normal"  # the calling (dask) thread's own
    if min(19, base + FIT_NICE) in _tiles._pools:  # tiles shared among threads: their pool runs at the fit's
        pool = _tiles._pools[min(19, base + FIT_NICE)]
        assert pool.submit(lambda: (_tiles.thread_niceness(), thread_policy())).result() == (
            min(19, base + FIT_NICE), "idle")
    monkeypatch.setenv("KPCA_FIT_NICE", "0")
    registry.create(model_record(data_dir, "not-niced", passes=1))
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="workers.fit"):
        assert run_fit(str(data_dir), "not-niced") == "completed"
    assert "model not-niced: kernel tiles on" in caplog.text and f"at niceness {base}, normal policy" in caplog.text
    registry.delete("niced")
    registry.delete("not-niced")


def test_a_fit_alone_takes_every_core_for_its_tiles_and_shares_them_with_another(data_dir, caplog):
    """Run in this process (as a worker runs it): alone, its kernel tiles get every core of the machine; with
    another fit whose record says running, its share."""
    import logging

    from workers.placement import fit_threads, machine_cores

    registry = ModelRegistry(data_dir)
    registry.create(model_record(data_dir, "alone", passes=1))
    with caplog.at_level(logging.INFO, logger="workers.fit"):
        assert run_fit(str(data_dir), "alone") == "completed"
    assert f"model alone: kernel tiles on {machine_cores()} thread(s) at niceness {fitted_niceness()}" in caplog.text
    registry.create(model_record(data_dir, "other", passes=1))
    registry.update("other", status="running")  # as a fit running on another worker leaves it
    registry.create(model_record(data_dir, "beside", passes=1))
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="workers.fit"):
        assert run_fit(str(data_dir), "beside") == "completed"
    assert f"model beside: kernel tiles on {fit_threads(machine_cores(), 2)} thread(s) at niceness" in caplog.text
    assert fit_threads(16, 1) == 16 and fit_threads(16, 3) == 5 and fit_threads(2, 5) == 1
    registry.delete("other")


def test_a_checkpoint_of_a_deleted_model_is_not_written(data_dir):
    """A fit's checkpoint written after its model's DELETE brought ``models/{name}/checkpoints`` back (CI saw
    it once in the test above). `workers.progress.save_while_present` writes under the job's shared lock,
    after checking the record."""
    from types import SimpleNamespace

    from store import NotFound
    from workers.progress import save_while_present

    registry, checkpoints = ModelRegistry(data_dir), CheckpointStore(data_dir)
    registry.create(model_record(data_dir, "gone", passes=3, block_size=20))
    registry.delete("gone")
    with pytest.raises(NotFound):
        save_while_present(SimpleNamespace(registry=registry, checkpoints=checkpoints), "gone", 1, {"pass": 1})
    assert not (data_dir / "models" / "gone").exists()
