"""Small dense LAPACK calls run on one BLAS thread (`kpca._dense`), whatever the process's BLAS threads,
and the one-thread cap is reference counted across threads (`kpca._threads.serial_blas`)."""

import contextlib
import threading

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse.linalg

from bench._common import subspace_angles
from kpca._dense import SERIAL_MAX
from kpca._threads import _controller_, _set_threads, serial_blas


@contextlib.contextmanager
def two_blas_threads():
    """BLAS on two threads, as on a machine with cores (threadpoolctl's own limit is ignored in every
    thread but the first that set one)."""
    libraries = _controller_().select(user_api="blas").lib_controllers
    before = [library.num_threads for library in libraries]
    for library in libraries:
        _set_threads(library, 2)
    try:
        yield
    finally:
        for library, threads in zip(libraries, before):
            _set_threads(library, threads)
from kpca.estimator import KernelHebbianPCA
from tests.kpca_helpers import blas_threads


@pytest.fixture
def eigh_threads(monkeypatch):
    """Every scipy.linalg.eigh and scipy.sparse.linalg.eigsh call's matrix order and the BLAS threads in
    effect during it."""
    seen = []
    real = scipy.linalg.eigh

    def spy(a, *args, **options):
        seen.append((a.shape[0], blas_threads()))
        return real(a, *args, **options)

    monkeypatch.setattr(scipy.linalg, "eigh", spy)
    real_eigsh = scipy.sparse.linalg.eigsh

    def spy_eigsh(a, *args, **options):
        seen.append((a.shape[0], blas_threads()))
        return real_eigsh(a, *args, **options)

    monkeypatch.setattr(scipy.sparse.linalg, "eigsh", spy_eigsh)
    return seen


@pytest.mark.parametrize("solver", ["kha-smd", "nystrom", "exact", "lanczos", "rskpca"])
def test_a_fit_runs_its_small_eigenproblems_on_one_blas_thread(rng, eigh_threads, solver):
    X = rng.normal(size=(400, 6))
    with two_blas_threads():  # a machine's default: every core
        KernelHebbianPCA(5, sigma=2.0, solver=solver, passes=2).fit(X)
        assert blas_threads() == 2  # and restored after
    assert eigh_threads, "the fit made no eigh call"
    assert [threads for _, threads in eigh_threads] == [1] * len(eigh_threads), eigh_threads
    assert max(order for order, _ in eigh_threads) <= 400 < SERIAL_MAX


def test_subspace_angles_run_on_one_blas_thread(rng, monkeypatch):
    seen = []
    real = np.linalg.svd

    def spy(a, *args, **options):
        seen.append(blas_threads())
        return real(a, *args, **options)

    monkeypatch.setattr(np.linalg, "svd", spy)
    G = rng.normal(size=(30, 30))
    with two_blas_threads():
        subspace_angles(G @ G.T, G @ G.T, G @ G.T)
    assert seen == [1]


def test_the_one_thread_cap_is_reference_counted_across_threads():
    with two_blas_threads():
        entered, release = threading.Barrier(3), threading.Event()

        def hold():
            with serial_blas():
                entered.wait()
                release.wait()

        workers = [threading.Thread(target=hold) for _ in range(2)]
        for w in workers:
            w.start()
        entered.wait()
        assert blas_threads() == 1
        with serial_blas():  # a third holder leaving first must not lift the cap
            pass
        assert blas_threads() == 1
        release.set()
        for w in workers:
            w.join()
        assert blas_threads() == 2
