"""Warm starts from a reduced solution (``init="nystrom"`` or ``"rskpca"``): a landmark or reduced-set
solver's components, extended to coefficients over all l training rows.

What it computes. A one-shot solver of the registry (`REDUCED_INITS`) fits
its r components on a few centres (m landmarks, or a reduced set's m
weighted centres, seed 004); they serve projections of any point at O(m n)
each. An eigenvector ``w`` of the feature-space covariance
``C = (1/l) sum_i Phi'(x_i) Phi'(x_i)^T`` with eigenvalue ``mu`` is a
combination of the centred training points,

    w = (1 / (l mu)) sum_i <Phi'(x_i), w> Phi'(x_i),

so its coefficients over the l rows are proportional to the projections
``y_i = <Phi'(x_i), w>`` of the training rows (seed 003 eq. 13 is the same
extension, for a Nyström eigenvector). The reduced model's projections are
centred by its own mean; the mean of the rows' projections is subtracted,
which centres them by the data's (as `workers.progress` does for eq. 22).
The start is then the Rayleigh-Ritz components of the span of ``A = Y^T``
(`kpca.solvers._ritz`: orthonormal in feature space and ordered by
variance, like the subset start of `kpca.solvers._warm`), with ``A K'`` from
one pass of kernel rows: a Rayleigh-Ritz pass from the reduced model
(`kpca.solvers._rayleigh_ritz`), which also gives the residual of the
reduced model's components (nystrom's are orthonormal in feature space).

Cost: the reduced fit, a projection of the l rows onto its m centres
(``O(l m n)``), one pass of kernel rows (``2 l^2 (n + r)`` flops, like a
KHA pass); memory O(r l). The coefficients are dense over the l rows.
"""

from __future__ import annotations

import numpy as np

from kpca.errors import Degenerate
from kpca.solvers._rayleigh_ritz import power_step
from kpca.solvers._registry import FitContext, get_solver, served_model
from kpca.solvers._residual import residual as projections_residual
from kpca.solvers._ritz import RELATIVE_RANK_TOL, ritz_components

REDUCED_INITS = ("nystrom", "rskpca")


def extended_start(solver_name: str, rows, n_components: int, seed: int, block_size: int = 1024,
                   landmarks: int | None = None, served: int | None = None):
    """``(A, AK, residual, note)``: the components of solver ``solver_name`` (fitted with its defaults,
    ``seed`` and, for nystrom, ``landmarks``) extended to all rows of ``rows`` (a
    `kpca.rows.KernelRows`), A and AK (r, l); rows without a centring are centred in the extension's
    pass, which then is the only full pass (a nystrom fit reads kernel values against its landmarks
    only); ``residual``, the relative
    residual of the reduced model's components measured by the extension's pass
    (`kpca.solvers._rayleigh_ritz.power_step`; its components are orthonormal in feature space),
    None for ``rskpca`` (whose are not) and over float32 rows (unchecked); with ``served`` (<= r), the
    residual of the first ``served`` components only, the others being guard vectors
    (`kpca.solvers._rayleigh_ritz`). Where the rows span fewer than r directions in feature space, A and
    AK have only as many rows (the start then serves zero components past them); `Degenerate` only where
    they span none. ``note``: what the reduced fit said of itself (its ``solver_note``, or None)."""
    r, l = int(n_components), int(rows.n_rows)
    reduced = get_solver(solver_name)
    fit = reduced.fit
    if fit is None:
        raise ValueError(f"init: a start extends a one-shot fit, and {solver_name} is iterative")
    context = FitContext(n_rows=l, n_components=r)
    given = {"seed": int(seed)} if reduced.param("seed") is not None else {}
    if landmarks is not None and reduced.param("landmarks") is not None:
        given["landmarks"] = int(landmarks)
    if reduced.param("max_centres") is not None:  # a start wants the shadow's accuracy, not a small model
        given["max_centres"] = min(l, context.exact_limit)
    centering = rows.centering
    state = fit(rows, r, reduced.resolved(given, context, where=""), context)
    rows.centering = centering  # a reduced fit may have centred the rows its own way
    model = served_model(state, rows)
    rows.centering = centering
    Y = np.concatenate([model.project(np.asarray(chunk, dtype=np.float64)) for _, chunk in rows.chunks()])
    Y -= Y.mean(axis=0)
    A = np.ascontiguousarray(Y.T)
    if centering is None:  # the rows are centred in the same pass (`kpca.rows.KernelRows.fit_centering_times`)
        AK = rows.fit_centering_times(A, block_size)
    else:
        AK, _ = power_step(rows, A, block_size)
    q = r if served is None else int(served)
    # the reduced model's components come by variance; over float32 tiles the figure would be unchecked
    # (`kpca.solvers._rounding` checks a pass's): the first pass measures it instead
    float32 = np.dtype(getattr(rows, "dtype", np.float64)) != np.float64
    residual = None if float32 else projections_residual(A[:q], AK[:q])
    variance = np.einsum("ij,ij->i", AK, A)  # the rows' variance along each extended component
    live = variance > RELATIVE_RANK_TOL * max(float(np.max(variance, initial=0.0)), 0.0)
    if not np.any(live):
        raise Degenerate(f"the {solver_name} start found no direction with variance on these rows: all rows are "
                         "the same point in feature space (check the data, or the kernel's width or scale)")
    # orthonormal, by variance: the same span, the best start in it; past the data's rank in feature space
    # (fewer directions than asked, r and the guard vectors) only those the span holds
    A_r, AK_r, mu = ritz_components(A[live], AK[live])
    kept = mu > 0
    return (np.ascontiguousarray(A_r[kept]), np.ascontiguousarray(AK_r[kept]),
            residual if solver_name == "nystrom" else None, state.solver_note)
