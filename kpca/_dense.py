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
import threading

import numpy as np
import scipy.linalg
import scipy.sparse.linalg

from kpca._lapack import leading_evr
from kpca._threads import serial_blas

SERIAL_MAX = 4096  # largest matrix order run on one BLAS thread (bench/dense_threads.py)
#: `leading_eigh` inside `unlocked_eigh`: largest order answered by LAPACK's MRRR without the GIL
#: (`kpca._lapack.leading_evr`), where it is not slower than ARPACK on two threads (bench/unlocked_eigh.py)
NOGIL_MAX_ORDER = 512
KRYLOV_MIN_ORDER = 400  # `leading_eigh`: smallest order given to ARPACK (bench/leading_eigh.py)
KRYLOV_MAX_SHARE = 32  # ... and only for q <= max(KRYLOV_MIN_Q, order // KRYLOV_MAX_SHARE)
KRYLOV_MIN_Q = 16
RESIDUAL_TOL = 1e-9  # an ARPACK pair is kept when ||a v - w v|| <= RESIDUAL_TOL * |w_max|
RANK_TOL = 1e-10  # ... and its least w > RANK_TOL * |w_max| (kpca.solvers._ritz.RELATIVE_RANK_TOL's level)
CHECK_TOL = 1e-8  # `_none_missed`: relative accuracy of the largest eigenvalue outside the span


_unlocked = threading.local()


@contextlib.contextmanager
def unlocked_eigh():
    """Within the block, in the calling thread, `leading_eigh` answers matrices of order up to `NOGIL_MAX_ORDER`
    by LAPACK without Python's lock (`kpca._lapack.leading_evr`) instead of ARPACK, whose loop holds it: for
    threads that fit small models at once (an image's tiles). On one thread ARPACK is as fast or faster where
    the spectrum decays (bench/leading_eigh.py), so it stays the default."""
    previous = getattr(_unlocked, "on", False)
    _unlocked.on = True
    try:
        yield
    finally:
        _unlocked.on = previous


def sized_blas(order: int):
    """The BLAS threads for a dense call on a matrix of ``order``: one up to `SERIAL_MAX`, else the
    process's own (a context manager)."""
    return serial_blas() if int(order) <= SERIAL_MAX else contextlib.nullcontext()


def eigh(a: np.ndarray, **options):
    """`scipy.linalg.eigh` of the symmetric ``a`` (n, n) (``options`` passed on: ``subset_by_index``,
    ``eigvals_only``), BLAS threads by `sized_blas`. A ``subset_by_index`` that LAPACK answers with fewer
    pairs than asked (its index range on a cluster of equal eigenvalues, such as K' = I - 1 1^T / l, can
    return none) is answered from the whole decomposition instead. Cost O(n^3)."""
    with sized_blas(a.shape[0]):
        found = scipy.linalg.eigh(a, **options)
        subset = options.get("subset_by_index")
        if subset is None:
            return found
        values = found if options.get("eigvals_only") else found[0]
        if values.shape[0] == subset[1] - subset[0] + 1:
            return found
        whole = scipy.linalg.eigh(a, **{k: v for k, v in options.items() if k != "subset_by_index"})
        if options.get("eigvals_only"):
            return whole[subset[0] : subset[1] + 1]
        return whole[0][subset[0] : subset[1] + 1], whole[1][:, subset[0] : subset[1] + 1]


def leading_eigh(a: np.ndarray, q: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``q`` largest eigenpairs of the symmetric ``a`` (n, n), ascending as `eigh`'s
    ``subset_by_index=[n - q, n - 1]`` gives them: ``(w (q,), V (n, q))``.

    Below order `KRYLOV_MIN_ORDER`, and up to `NOGIL_MAX_ORDER` inside `unlocked_eigh`, LAPACK's MRRR answers,
    called without Python's lock (`kpca._lapack.leading_evr`: `eigh`'s driver, its numbers to rounding), so
    that threads fitting small models at once run at once; ARPACK's loop and `scipy.linalg.eigh` hold the lock.

    Where q is small against n (n >= `KRYLOV_MIN_ORDER`, q <= max(`KRYLOV_MIN_Q`, n / `KRYLOV_MAX_SHARE`))
    implicitly restarted Lanczos (ARPACK, `scipy.sparse.linalg.eigsh`, to machine precision, from a
    fixed-seed start so that the answer does not vary between calls) costs O(n^2 q) per restart
    against LAPACK's O(n^3) reduction, as scikit-learn's KernelPCA chooses ``arpack`` for few components
    of many rows. Each pair it returns must satisfy ||a v - w v|| <= `RESIDUAL_TOL` |w_max|, the
    smallest w must be above `RANK_TOL` |w_max| (a rank-deficient a, whose trailing pairs Lanczos finds
    slowly and not uniquely), and no eigenvalue outside their span may exceed the smallest
    (`_none_missed`: Lanczos can miss copies of a multiple eigenvalue, and would then answer the
    next eigenvalue down in their place); otherwise, or if ARPACK fails (no convergence, or no shift to
    apply on a matrix with one eigenvalue of multiplicity n - 1, such as K' = I - 1 1^T / l), LAPACK's
    `eigh` answers.
    BLAS threads by `sized_blas`. Cost O(n^2 q) per restart, O(n^3) on the fallback and by LAPACK.
    """
    n, q = a.shape[0], int(q)
    if n < KRYLOV_MIN_ORDER or (n <= NOGIL_MAX_ORDER and getattr(_unlocked, "on", False)):
        with sized_blas(n):  # LAPACK, releasing the GIL; `eigh` where it reports a failure
            found = leading_evr(a, q)
        return found if found is not None else eigh(a, subset_by_index=[n - q, n - 1])
    if q > max(KRYLOV_MIN_Q, n // KRYLOV_MAX_SHARE) or q >= n - 1:
        return eigh(a, subset_by_index=[n - q, n - 1])
    start = np.random.default_rng(0).standard_normal(n)
    with sized_blas(n):
        try:
            w, V = scipy.sparse.linalg.eigsh(a, k=q, which="LA", tol=0.0, v0=start)
        except scipy.sparse.linalg.ArpackError:  # no convergence, or no shift to apply (K' = I - 1 1^T / l)
            return eigh(a, subset_by_index=[n - q, n - 1])
        order = np.argsort(w)
        w, V = w[order], V[:, order]
        top = max(abs(float(w[-1])), np.finfo(float).tiny)
        residual = float(np.linalg.norm(a @ V - V * w, axis=0).max())
        if residual <= RESIDUAL_TOL * top and float(w[0]) > RANK_TOL * top and _none_missed(a, V, w[0], top):
            return w, V
    return eigh(a, subset_by_index=[n - q, n - 1])


def _none_missed(a: np.ndarray, V: np.ndarray, least: float, top: float) -> bool:
    """Whether no eigenvalue of the symmetric ``a`` outside the span of the orthonormal V exceeds
    ``least`` (to `RESIDUAL_TOL` ``top``): the largest eigenvalue of (I - V V^T) a (I - V V^T), by
    Lanczos for one value. Lanczos finds each distinct eigenvalue once, so an eigenvalue of multiplicity
    above what its restarts kept can leave copies out of V; its value is still found here. False too
    when that Lanczos does not converge. Cost O(n^2) per step."""
    n = a.shape[0]

    def deflated(x):
        x = np.asarray(x, dtype=np.float64).reshape(n)
        x = x - V @ (V.T @ x)
        y = a @ x
        return y - V @ (V.T @ y)

    operator = scipy.sparse.linalg.LinearOperator((n, n), matvec=deflated, dtype=np.float64)
    try:
        outside = scipy.sparse.linalg.eigsh(operator, k=1, which="LA", tol=CHECK_TOL,
                                            v0=np.random.default_rng(1).standard_normal(n), return_eigenvectors=False)
    except scipy.sparse.linalg.ArpackError:
        return False
    return float(outside[0]) <= least + RESIDUAL_TOL * top


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


def positive_solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a^-1 b`` for a symmetric positive definite ``a`` (n, n), by its Cholesky factor
    (`scipy.linalg.cho_factor`, `cho_solve`; `numpy.linalg.LinAlgError` where ``a`` is not positive definite):
    without `scipy.linalg.solve`'s condition estimate, and releasing the GIL for the factor, so that solves in
    threads run at once. BLAS threads by `sized_blas`. Cost O(n^3 / 3 + n^2 k) for b (n, k)."""
    with sized_blas(a.shape[0]):
        factor = scipy.linalg.cho_factor(a, lower=True, check_finite=False)
        return scipy.linalg.cho_solve(factor, b, check_finite=False)


def svd(a: np.ndarray, **options):
    """`numpy.linalg.svd` of ``a`` (m, n) (``options`` passed on), BLAS threads by `sized_blas` of the
    smaller side. Cost O(m n min(m, n))."""
    with sized_blas(min(a.shape)):
        return np.linalg.svd(a, **options)
