"""Jitted inner loops of the Kernel Hebbian Algorithm family: one block of steps.

Both kernels update their arrays in place, one training row at a time, in the
order the rows are given. Notation (seed 000): ``A`` (r x l) expansion
coefficients, ``AK`` = A K' (r x l), ``B`` (r x l) SMD differential
parameters, ``rho`` (r,) log-gains, ``k`` = k'_{p(t)} the centred kernel row
of the observation ``p(t)``, ``y = A k`` (eq. 7).

Maintenance note: every update contains ``lt(y y^T) M`` for an r x l matrix
M. Row i of it is ``y_i * sum_{m <= i} y_m M[m]``, a *prefix sum* over the
rows of M, so a sweep over i in increasing order that accumulates
``c += y_i * M[i]`` before overwriting ``M[i]`` evaluates it in O(r l)
instead of O(r^2 l), with every read of M[m] (m <= i) seeing the old value
as the equations require.
"""

import numba
import numpy as np

_LN2 = np.log(2.0)
# SMD safeguards, both outside eq. 16: a log-gain moves by at most ln 2 per
# step (Schraudolph 2002 bounds a gain update to a factor 1/2) and stays in
# [-RHO_MAX, RHO_MAX], so no component's gain can collapse to zero (seen on
# image patches with a dominant eigenvalue, where rho ran off to -30 and the
# components froze) or explode.
RHO_MAX = 3.0


@numba.njit(nogil=True, cache=True)
def _kha_steps(A, AK, rows, idx, gain, t0, decay, l_sched):
    """KHA / KHA-t / KHA-et steps (eq. 8-11 with eq. 18 for A K').

    gain : (r,) base gain per component; the step-t gain is
    ``gain * l_sched / (t + l_sched)`` when ``decay`` else ``gain``.
    Cost per row O(r l).
    """
    r, l = A.shape
    y = np.empty(r, dtype=A.dtype)
    cA = np.empty(l, dtype=A.dtype)
    cAK = np.empty(l, dtype=A.dtype)
    for s in range(rows.shape[0]):
        k = rows[s]
        p = idx[s]
        factor = l_sched / (t0 + s + l_sched) if decay else 1.0
        for i in range(r):
            acc = 0.0
            for j in range(l):
                acc += A[i, j] * k[j]
            y[i] = acc
        cA[:] = 0.0
        cAK[:] = 0.0
        for i in range(r):
            yi = y[i]
            gy = gain[i] * factor * yi
            for j in range(l):
                cA[j] += yi * A[i, j]
                cAK[j] += yi * AK[i, j]
                A[i, j] -= gy * cA[j]  # eq. 8: - eta lt(y y^T) A
                AK[i, j] += gy * (k[j] - cAK[j])  # eq. 17-18
            A[i, p] += gy  # eq. 8: + eta y e_p^T


@numba.njit(nogil=True, cache=True)
def _smd_steps(A, B, AK, BK, rho, rows, idx, gain, t0, l_sched, mu, xi):
    """KHA-SMD steps: eq. 16 (rho), 21 (B), 15 (A), 18 (A K'), in that order; B K' by eq. 21 times K'.

    gain : (r,) KHA/et base gains (eq. 12 without the l/(t+l) factor, which
    is applied here). Cost per row O(r l).
    """
    r, l = A.shape
    y = np.empty(r, dtype=A.dtype)
    Bk = np.empty(r, dtype=A.dtype)
    cA = np.empty(l, dtype=A.dtype)
    cB = np.empty(l, dtype=A.dtype)
    dA = np.empty(l, dtype=A.dtype)
    cAK = np.empty(l, dtype=A.dtype)
    cBK = np.empty(l, dtype=A.dtype)
    dAK = np.empty(l, dtype=A.dtype)
    for s in range(rows.shape[0]):
        k = rows[s]
        p = idx[s]
        factor = l_sched / (t0 + s + l_sched)
        for i in range(r):
            ay = 0.0
            by = 0.0
            for j in range(l):
                ay += A[i, j] * k[j]
                by += B[i, j] * k[j]
            y[i] = ay
            Bk[i] = by
        cA[:] = 0.0
        cB[:] = 0.0
        dA[:] = 0.0
        cAK[:] = 0.0
        cBK[:] = 0.0
        dAK[:] = 0.0
        for i in range(r):
            yi = y[i]
            bki = Bk[i]
            # prefix sums over rows m <= i (old values) and <Gamma_i K', B_i>
            gkb = 0.0
            for j in range(l):
                cA[j] += yi * A[i, j]
                cB[j] += yi * B[i, j]
                dA[j] += bki * A[i, j]
                cAK[j] += yi * AK[i, j]
                cBK[j] += yi * BK[i, j]
                dAK[j] += bki * AK[i, j]
                gkb += cAK[j] * B[i, j]
            # eq. 16 with eq. 17: diag(Gamma K' B^T)_i = y_i (B_i k - <lt-row of A K', B_i>)
            # eq. 16 with the safeguards described at RHO_MAX
            drho = mu * yi * (bki - gkb)
            rho[i] = min(max(rho[i] + min(max(drho, -_LN2), _LN2), -RHO_MAX), RHO_MAX)
            g = np.exp(rho[i]) * gain[i] * factor
            gy = g * yi
            gv = g * (yi + xi * bki)
            for j in range(l):
                # eq. 21 (all terms but the e_p column)
                B[i, j] = xi * B[i, j] - g * (yi * (cA[j] + xi * cB[j]) + xi * (bki * cA[j] + yi * dA[j]))
                A[i, j] -= gy * cA[j]  # eq. 15
                AK[i, j] += gy * (k[j] - cAK[j])  # eq. 18
                # eq. 21 times K' (B K' for the blocked form; its e_p column becomes k)
                BK[i, j] = (xi * BK[i, j] - g * (yi * (cAK[j] + xi * cBK[j]) + xi * (bki * cAK[j] + yi * dAK[j]))
                            + gv * k[j])
            B[i, p] += gv
            A[i, p] += gy
