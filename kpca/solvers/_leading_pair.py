"""The leading eigenpair of a symmetric operator by Lanczos, with matrix-vector products only.

Autoencoder KPCA (seed 003 §4-5) needs, once per training row and once per
decoded point, one extreme eigenpair of a symmetric d x d matrix ``M`` that
DS-AKPCA never forms (``M w = sum_i z_i x_i (x_i . w) - x (x . w)``, O(l d)
per product; seed 003 §5.3). `_lanczos` runs the Lanczos iteration on
products with it:

* full reorthogonalisation (classical Gram-Schmidt, twice) of every new
  Lanczos vector against the basis so far: O(j d) per iteration j, so the
  basis stays orthonormal to rounding and no spurious copies of converged
  Ritz values appear (the iteration is short: at most ``max_iter`` vectors);
* the Ritz pairs of the tridiagonal ``T_j`` (`numpy.linalg.eigh`, small)
  every `CHECK_EVERY` iterations; it stops once the chosen pair's residual
  ``||M v - theta v|| = beta_j |s_j|`` is at most ``tol`` times the largest
  Ritz value's magnitude (an estimate of ``||M||_2``), at an invariant
  subspace (``beta_j`` ~ 0: the pair is exact), or after ``max_iter``
  iterations (with full reorthogonalisation, ``max_iter >= d`` is exact up
  to rounding);
* ``which="LA"``: the largest algebraic eigenvalue (the decoder's ``lambda_1``);
  ``which="LM"``: the largest in magnitude, whose absolute value is the
  spectral norm ``||M||_2`` (the surrogate objective, seed 003 eq. 17-18).

Deterministic: the same ``start`` and products give the same pair bit for
bit (no hidden random start, unlike ARPACK's, whose seed persists between
calls), which is what a bit-exact resume of a fit needs. Cost: ``j``
products plus O(j^2 d) for ``j`` iterations, memory O(max_iter d).

The solvers call `_lanczos`, the iteration jitted (numba) for the one
operator shape they need, ``M w = D w + U^T (c * (U w)) - x (x . w)``
(any of the three terms may be empty), so that a training step runs
without Python overhead; tests/naive.py's ``leading_eigenpair`` is its
plain twin for any ``matvec``, which the tests compare it with.
"""

from __future__ import annotations

import numba
import numpy as np

TOL = 1e-6  # default residual tolerance, relative to the estimate of ||M||_2
MAX_ITER = 64  # default cap on Lanczos vectors (capped again by the dimension d)
CHECK_EVERY = 4  # Ritz pairs are computed every CHECK_EVERY iterations (and at the last)


@numba.njit(nogil=True, cache=True)
def _operator(D, U, c, x, w):
    """``D w + U^T (c * (U w)) - x (x . w)``; an empty D (0 x 0), U (0 x d) or x (0,) drops its term."""
    out = D @ w if D.shape[0] else np.zeros(w.size)
    if U.shape[0]:
        out += U.T @ (c * (U @ w))
    if x.size:
        out -= x * (x @ w)
    return out


@numba.njit(nogil=True, cache=True)
def _lanczos(D, U, c, x, start, largest_magnitude, tol, max_iter):
    """The extreme eigenpair of `_operator` (D, U, c, x) by Lanczos (module docstring), jitted:
    ``(value, vector, iterations)``.

    ``largest_magnitude``: "LM" if True, else "LA". ``start`` must be finite
    and non-zero (the callers ensure it). Cost: at most ``min(max_iter, d)``
    products and O(max_iter^2 d).
    """
    d = start.size
    m = max(1, min(max_iter, d))
    Q = np.empty((m, d))
    alpha = np.empty(m)
    beta = np.empty(m)
    q = start / np.sqrt(start @ start)
    for j in range(m):
        Q[j] = q
        w = _operator(D, U, c, x, q)
        alpha[j] = q @ w
        basis = Q[: j + 1]
        for _ in range(2):  # twice is enough
            w = w - basis.T @ (basis @ w)
        b = np.sqrt(w @ w)
        beta[j] = b
        previous = beta[j - 1] if j > 0 else 0.0
        exhausted = j == m - 1 or b <= 1e-13 * max(abs(alpha[j]), previous, 1e-300)
        if exhausted or (j + 1) % CHECK_EVERY == 0:
            T = np.diag(alpha[: j + 1])
            for i in range(j):
                T[i, i + 1] = beta[i]
                T[i + 1, i] = beta[i]
            theta, S = np.linalg.eigh(T)  # jitted: numba's own LAPACK binding
            i = int(np.argmax(np.abs(theta))) if largest_magnitude else int(np.argmax(theta))
            residual = b * abs(S[j, i])
            if exhausted or residual <= tol * max(np.max(np.abs(theta)), 1e-300):
                vector = basis.T @ np.ascontiguousarray(S[:, i])
                return theta[i], vector / np.sqrt(vector @ vector), j + 1
        q = w / b
    return 0.0, start, m  # unreachable: the last iteration returns
