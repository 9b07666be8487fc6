"""LAPACK's leading eigenpairs of a small symmetric matrix without Python's lock (issue 55).

`scipy.linalg.eigh` holds the GIL for the whole LAPACK call, and ARPACK (`scipy.sparse.linalg.eigsh`) for
its reverse-communication loop in Python, so two threads that each fit a small kernel PCA model (the image
tiles' models, 512 rows) run one after the other. `leading_evr` calls LAPACK's ``dsyevr`` (MRRR, the driver
`scipy.linalg.eigh` uses for ``subset_by_index``) from a numba function that releases the GIL. SciPy
exports its LAPACK for compiled callers (`scipy.linalg.cython_lapack`); its address is found once, at import,
and passed to the jitted function as an argument, so that numba's cache stays valid in other processes (a
function pointer read as a global would be compiled into the code, and numba refuses to cache that).
"""

from __future__ import annotations

import ctypes

import numba
import numpy as np
from numba.extending import get_cython_function_address

__all__ = ["leading_evr"]

#: ``dsyevr(jobz, range, uplo, n, a, lda, vl, vu, il, iu, abstol, m, w, z, ldz, isuppz, work, lwork, iwork,
#: liwork, info)``, every argument by address (the Fortran convention)
DSYEVR = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 21))(
    get_cython_function_address("scipy.linalg.cython_lapack", "dsyevr"))


def leading_evr(a: np.ndarray, q: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The ``q`` largest eigenpairs of the symmetric ``a`` (n, n), ascending, as `scipy.linalg.eigh` with
    ``subset_by_index=[n - q, n - 1]`` gives them: ``(w (q,), V (n, q))``, or None where ``a`` is not finite
    or LAPACK reports a failure (the caller falls back). Reads one triangle of ``a``; does not modify it. Runs
    without the GIL; BLAS threads as the caller set them. Cost O(n^3) (the reduction to tridiagonal form) plus
    O(n^2 q)."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    n, q = a.shape[0], int(q)
    if a.ndim != 2 or a.shape[1] != n or not 1 <= q <= n:
        raise ValueError(f"a: expected a square matrix and 1 <= q <= {a.shape[0]}, got {a.shape} and q {q}")
    if not np.isfinite(a).all():  # LAPACK's answer is undefined; the caller's fallback says what is wrong
        return None
    w, V, found, info = _dsyevr_leading(DSYEVR, a, q)
    if info != 0 or found != q:
        return None
    return w, V


@numba.njit(nogil=True, cache=True)
def _dsyevr_leading(dsyevr, a, q):  # pragma: no cover - jitted
    """``dsyevr`` for eigenvalues n - q + 1 .. n (1-based, ascending) of a copy of ``a``; a C-ordered matrix is
    its transpose in Fortran's order, the same symmetric matrix. A workspace query, then the call."""
    n = a.shape[0]
    A = a.copy()
    jobz = np.array([ord("V")], dtype=np.uint8)
    which = np.array([ord("I")], dtype=np.uint8)
    uplo = np.array([ord("L")], dtype=np.uint8)
    order = np.array([n], dtype=np.int32)
    lower = np.zeros(1)  # vl, vu: unused with range "I"
    upper = np.zeros(1)
    first = np.array([n - q + 1], dtype=np.int32)
    last = np.array([n], dtype=np.int32)
    abstol = np.zeros(1)
    found = np.zeros(1, dtype=np.int32)
    w = np.empty(n)
    Z = np.empty((q, n))  # Fortran's (n, q), leading dimension n
    support = np.empty(2 * q, dtype=np.int32)
    info = np.zeros(1, dtype=np.int32)
    lwork = np.array([-1], dtype=np.int32)
    liwork = np.array([-1], dtype=np.int32)
    work = np.empty(1)
    iwork = np.empty(1, dtype=np.int32)
    for _ in range(2):  # the workspace query (lwork = -1), then the decomposition
        dsyevr(jobz.ctypes, which.ctypes, uplo.ctypes, order.ctypes, A.ctypes, order.ctypes, lower.ctypes,
               upper.ctypes, first.ctypes, last.ctypes, abstol.ctypes, found.ctypes, w.ctypes, Z.ctypes,
               order.ctypes, support.ctypes, work.ctypes, lwork.ctypes, iwork.ctypes, liwork.ctypes, info.ctypes)
        if info[0] != 0 or lwork[0] != -1:
            break
        lwork[0] = max(int(work[0]), 26 * n)
        liwork[0] = max(iwork[0], 10 * n)
        work = np.empty(lwork[0])
        iwork = np.empty(liwork[0], dtype=np.int32)
    m = found[0]
    return w[:q].copy(), np.ascontiguousarray(Z.T), m, info[0]
