"""Jitted inner loops of the blocked KHA updates: the steps of one sub-block, on its small coefficient matrix.

`kpca.solvers._blocked` explains the algebra (module docstring): within a
sub-block of m rows the steps act on the coefficient matrix ``W`` over the
basis ``[A_0; E]`` (KHA family) or ``[A_0; B_0; E]`` (KHA-SMD), never on the
r x l state. Both loops update their arrays in place, one step per row, in
order, and stop early if the accumulated transform grows past
``growth_limit`` (*Stability* in `kpca.solvers._blocked`).

Maintenance note: every update contains ``lt(y y^T) M`` for a matrix M. Row
i of it is ``y_i * sum_{m <= i} y_m M[m]``, a *prefix sum* over the rows of
M, so a sweep over i in increasing order that accumulates ``c += y_i M[i]``
before overwriting ``M[i]`` evaluates it in O(r n) instead of O(r^2 n), with
every read of M[m] (m <= i) seeing the old value as the equations require.
"""

from __future__ import annotations

import numba
import numpy as np

_LN2 = np.log(2.0)
# SMD safeguards, both outside eq. 16: a log-gain moves by at most ln 2 per step (Schraudolph
# 2002 bounds a gain update to a factor 1/2) and stays in [-RHO_MAX, RHO_MAX], so no component's
# gain can collapse to zero (seen on image patches with a dominant eigenvalue, where rho ran off
# to -30 and the components froze) or explode. tests/naive.py applies the same.
RHO_MAX = 3.0

# The transforms' dot products and prefix sums may be reassociated (vectorised); no flag that
# assumes finite values, so a diverging state still turns non-finite for the driver's guard.
_LOOP_FASTMATH = {"reassoc", "contract", "nsz"}
GROWTH_LIMIT = 1e3


@numba.njit(inline="always")
def _leading_norm2(W, k):
    """``||W[:k, :k]||_F^2``, the growth of the accumulated transform T."""
    norm2 = 0.0
    for i in range(k):
        for c in range(k):
            norm2 += W[i, c] * W[i, c]
    return norm2


@numba.njit(nogil=True, cache=True, fastmath=_LOOP_FASTMATH)
def kha_transform(W, Qt, gain, t0, decay, l_sched, growth_limit):
    """KHA / KHA-t / KHA-et steps on the coefficient matrix W (r x (r + m)), in place.

    Qt : (m, r + m), row s is ``q_s^T = (X k_s)^T``. Column ``r + s`` of W
    stands for the observation of step s. Returns the number of steps done
    (m, or fewer if ``||W[:, :r]||_F^2 > growth_limit^2 r``).
    """
    r = W.shape[0]
    m = Qt.shape[0]
    y = np.empty(r)
    cW = np.empty(W.shape[1])
    bound = growth_limit * growth_limit * r
    for s in range(m):
        ncol = r + s  # columns of W that can be non-zero before step s
        q = Qt[s]
        factor = l_sched / (t0 + s + l_sched) if decay else 1.0
        for i in range(r):
            acc = 0.0
            for c in range(ncol):
                acc += W[i, c] * q[c]
            y[i] = acc
        cW[:ncol] = 0.0
        for i in range(r):
            yi = y[i]
            gy = gain[i] * factor * yi
            for c in range(ncol):
                cW[c] += yi * W[i, c]
                W[i, c] -= gy * cW[c]  # - G lt(y y^T) W
            W[i, ncol] += gy  # + G y e_{r+s}^T
        if s + 1 < m and _leading_norm2(W, r) > bound:
            return s + 1
    return m


@numba.njit(nogil=True, cache=True, fastmath=_LOOP_FASTMATH)
def smd_transform(W, R, Qt, Gt, rho, gain, t0, l_sched, mu, xi, growth_limit):
    """KHA-SMD steps on W (2r x n, rows [A; B]) and R = W Gm^T (2r x n), in place.

    Qt : (m, n), row s is ``q_s^T``; Gt : (n, n) = ``Gm^T``; rho : (r,)
    log-gains, updated in place. Returns the number of steps done (see
    `kha_transform`; the bound is on ``W[:, :2r]``).
    """
    r2, n = W.shape
    r = r2 // 2
    m = Qt.shape[0]
    y = np.empty(r)
    bk = np.empty(r)
    cA = np.empty(n)
    cB = np.empty(n)
    dA = np.empty(n)
    cV = np.empty(n)
    cU = np.empty(n)
    dV = np.empty(n)
    bound = growth_limit * growth_limit * r2
    for s in range(m):
        col = r2 + s
        q = Qt[s]
        gcol = Gt[col]
        factor = l_sched / (t0 + s + l_sched)
        for i in range(r):
            ay = 0.0
            by = 0.0
            for c in range(col):
                ay += W[i, c] * q[c]
                by += W[r + i, c] * q[c]
            y[i] = ay
            bk[i] = by
        cA[:col] = 0.0
        cB[:col] = 0.0
        dA[:col] = 0.0
        cV[:] = 0.0
        cU[:] = 0.0
        dV[:] = 0.0
        for i in range(r):
            yi = y[i]
            bki = bk[i]
            # prefix sums over rows m <= i (old values) and sum_{m<=i} y_m (AK B^T)[m, i]
            gkb = 0.0
            for c in range(col):
                cA[c] += yi * W[i, c]
                cB[c] += yi * W[r + i, c]
                dA[c] += bki * W[i, c]
                gkb += cA[c] * R[r + i, c]
            drho = mu * yi * (bki - gkb)  # eq. 16, clipped as described at RHO_MAX
            rho[i] = min(max(rho[i] + min(max(drho, -_LN2), _LN2), -RHO_MAX), RHO_MAX)
            g = np.exp(rho[i]) * gain[i] * factor
            gy = g * yi
            gv = g * (yi + xi * bki)
            for c in range(col):
                W[r + i, c] = xi * W[r + i, c] - g * (yi * (cA[c] + xi * cB[c]) + xi * (bki * cA[c] + yi * dA[c]))
                W[i, c] -= gy * cA[c]
            W[r + i, col] += gv  # eq. 21, e_p column
            W[i, col] += gy  # eq. 15, e_p column
            for c in range(n):  # the same row operations on R = W Gm^T
                cV[c] += yi * R[i, c]
                cU[c] += yi * R[r + i, c]
                dV[c] += bki * R[i, c]
                R[r + i, c] = (xi * R[r + i, c] - g * (yi * (cV[c] + xi * cU[c]) + xi * (bki * cV[c] + yi * dV[c]))
                               + gv * gcol[c])
                R[i, c] += gy * (gcol[c] - cV[c])
        if s + 1 < m and _leading_norm2(W, r2) > bound:
            return s + 1
    return m
