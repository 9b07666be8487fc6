"""Dense linear algebra on small matrices (eigh, Cholesky, solves, SVD) at its speed.

LAPACK on a matrix of order up to a few thousand gains little from BLAS threads on an idle machine
and collapses when another process or thread keeps a core busy (the threads spin and wait on each
other), which in a service is the normal case: a second fit, serving, a test run. Every small
dense call of the numerics goes through this module, which runs it on one BLAS thread
(`kpca._threads.serial_blas`) up to order `SERIAL_MAX`, and with the process's BLAS threads above
it; bench/dense_threads.py measures both on the machine at hand, idle and beside a busy process.
"""

from __future__ import annotations

import contextlib

import numpy as np
import scipy.linalg

from kpca._threads import serial_blas

SERIAL_MAX = 4096  # largest matrix order run on one BLAS thread (bench/dense_threads.py)


def sized_blas(order: int):
    """The BLAS threads for a dense call on a matrix of ``order``: one up to `SERIAL_MAX`, else the
    process's own (a context manager)."""
    return serial_blas() if int(order) <= SERIAL_MAX else contextlib.nullcontext()


def eigh(a: np.ndarray, **options):
    """`scipy.linalg.eigh` of the symmetric ``a`` (n, n) (``options`` passed on: ``subset_by_index``,
    ``eigvals_only``), BLAS threads by `sized_blas`. Cost O(n^3)."""
    with sized_blas(a.shape[0]):
        return scipy.linalg.eigh(a, **options)


def eigvalsh(a: np.ndarray, **options) -> np.ndarray:
    """The eigenvalues of the symmetric ``a`` (n, n), ascending (`scipy.linalg.eigvalsh`), BLAS threads
    by `sized_blas`. Cost O(n^3)."""
    with sized_blas(a.shape[0]):
        return scipy.linalg.eigvalsh(a, **options)


def cholesky(a: np.ndarray) -> np.ndarray:
    """The lower Cholesky factor of the positive definite ``a`` (n, n) (`numpy.linalg.cholesky`),
    BLAS threads by `sized_blas`. Cost O(n^3)."""
    with sized_blas(a.shape[0]):
        return np.linalg.cholesky(a)


def solve(a: np.ndarray, b: np.ndarray, **options) -> np.ndarray:
    """``a^-1 b`` for ``a`` (n, n) (`scipy.linalg.solve`, ``options`` passed on: ``assume_a``), BLAS
    threads by `sized_blas`. Cost O(n^3 + n^2 k) for b (n, k)."""
    with sized_blas(a.shape[0]):
        return scipy.linalg.solve(a, b, **options)


def svd(a: np.ndarray, **options):
    """`numpy.linalg.svd` of ``a`` (m, n) (``options`` passed on), BLAS threads by `sized_blas` of the
    smaller side. Cost O(m n min(m, n))."""
    with sized_blas(min(a.shape)):
        return np.linalg.svd(a, **options)
