"""Continue a fit on a grown data set (seed 002 appendix A, semi-online KHA).

When rows are appended (l0 -> l1 = l0 + k), the solver state is carried over
instead of starting again: the expansion coefficients of the new rows start at
zero (``a_ij = 0`` for rows not yet seen, appendix A.2), the centring
statistics are updated to the new mean in feature space (appendix A.3), and
``A K'`` (KHA-SMD's ``B K'``, the Rayleigh-Ritz passes' guard vectors' images)
is brought up to date for the new centring, so that the passes continue from
the fitted subspace as they left it. All of it costs the k kernel rows of the new points,
``2 k l1 n`` flops, plus O(r l1): the old rows' kernel values are never
recomputed.

Maintenance note. With ``m`` the column means of K and ``m_bar`` their mean,
for old rows i, j the centred kernel changes by
``K'1[i,j] - K'0[i,j] = -(dm_i + dm_j) + dm_bar`` (``dm = m1 - m0``), so for
the old columns ``A K'1 = A K'0 - (A dm) 1^T - (A 1) dm^T + dm_bar (A 1) 1^T``.
For a new column j, ``(A K'1)[:, j] = A (K[:l0, j] - m1[:l0] - m1[j] + m_bar1)``
with ``K[:l0, j]`` read from the new points' kernel rows (K is symmetric).
"""

from __future__ import annotations

import numpy as np

from kpca.kernels import kernel_diagonal
from kpca.rows import Centering, KernelRows
from kpca.solvers import IterativeState, KHAState


def extend_state(state: IterativeState, centering: Centering, rows: KernelRows) -> tuple[IterativeState, Centering]:
    """State and centring for ``rows`` (the grown data set, first l0 rows unchanged).

    Parameters
    ----------
    state : IterativeState
        Iterative solver state on the first ``l0 = state.n_rows`` rows.
    centering : Centering
        Centring statistics of those l0 rows.
    rows : KernelRows
        Kernel rows over all ``l1 >= l0`` rows (its centring is set here).

    Returns
    -------
    (state, centering) for l1 rows; the state carries the new centring
    (`Centering.to_state`). The pass counter and ``t`` continue; a
    pass that was interrupted restarts at its beginning on the new rows.
    Cost: ``2 k l1 n`` flops for the k new kernel rows and O(r l1) memory.
    """
    l0, l1 = int(state.n_rows), rows.n_rows
    if l1 < l0:
        raise ValueError(f"dataset_version: the data set shrank from {l0} to {l1} rows; continue only on appended rows")
    if l1 == l0:
        rows.centering = centering
        return state.replace(centering={**state.centering, **centering.to_state()}), centering
    new = np.arange(l0, l1)
    X_new = rows.take(new)
    R = rows.raw_block(X_new)  # (k, l1) raw kernel rows of the new points
    m0 = np.asarray(centering.column_means, dtype=np.float64)
    m1 = np.empty(l1)
    m1[:l0] = (l0 * m0 + R[:, :l0].sum(axis=0)) / l1
    m1[l0:] = R.sum(axis=1) / l1  # symmetry: column sums of new columns are row sums of new rows
    mbar0, mbar1 = float(centering.grand_mean), float(m1.mean())
    diag_sum = l0 * (centering.mean_diagonal + mbar0) + float(kernel_diagonal(X_new, rows.kernel).sum())
    new_centering = Centering(m1, mbar1, diag_sum / l1 - mbar1)

    out = state.replace(n_rows=l1, position=0, centering={**state.centering, **new_centering.to_state()})
    if isinstance(out, KHAState):
        # the images are recomputed here, in the rows' precision; LOBPCG's last step is a direction of the
        # old rows' problem
        out = out.replace(float32_images=None, previous_A=None, previous_AK=None)
        # B K' as A K' (KHA-SMD); the guard vectors of the Rayleigh-Ritz passes carry on as the components do
        def extended(M, MK):  # (M, M K') over the l1 rows, or (None, None) for arrays the state lacks
            if M is None:
                return None, None
            return _pad(M, l1), (None if MK is None else _recentred_image(M, MK, m0, m1, mbar0, mbar1, R))

        out.A, out.AK = extended(out.A, out.AK)
        out.B, out.BK = extended(out.B, out.BK)
        out.guard_A, out.guard_AK = extended(out.guard_A, out.guard_AK)
    rows.centering = new_centering
    return out, new_centering


def _recentred_image(M0, MK0, m0, m1, mbar0, mbar1, R):
    """``M K'1`` (r x l1) from ``MK0 = M K'0`` for coefficients M0 on the l0 old rows (module docstring). O(r l1 k)."""
    l0, l1 = M0.shape[1], m1.shape[0]
    m_sum = M0.sum(axis=1)  # M 1
    dm = m1[:l0] - m0
    MK = np.empty((M0.shape[0], l1), dtype=M0.dtype)
    MK[:, :l0] = MK0 - (M0 @ dm)[:, None] - np.outer(m_sum, dm) + (mbar1 - mbar0) * m_sum[:, None]
    MK[:, l0:] = M0 @ (R[:, :l0].T - m1[:l0, None]) + np.outer(m_sum, mbar1 - m1[l0:])
    return MK


def _pad(M: np.ndarray, l1: int) -> np.ndarray:
    out = np.zeros((M.shape[0], l1), dtype=M.dtype)
    out[:, : M.shape[1]] = M
    return out
