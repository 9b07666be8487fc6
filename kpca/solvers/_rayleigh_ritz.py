"""The deterministic KHA pass: one block power step with Rayleigh-Ritz, which also measures the residual
of the components it starts from.

Why. A KHA pass (seed 000 eq. 8-10) moves ``A`` row by row; summed over a pass with ``A`` held fixed,
its update is ``eta (A K' - LT(A K'^2 A^T) A)`` (``sum_p y_p e_p^T = A K'``, ``sum_p y_p y_p^T =
A K'^2 A^T``), whose new directions are those of ``A K'``: the expected pass is a step of block power
iteration towards the leading eigenvectors, and orthonormalising it (Rayleigh-Ritz) is what KHA's
decay term does. The stochastic pass adds noise of the size of its gains, so from a start that is
already close (a Nystrom start, `kpca.solvers._extend`) it cannot get closer than that noise; this
pass has none, never makes the served components worse, and costs the same pass of kernel rows.

What. Let the served components (`kpca.solvers._ritz.ritz_components`) be ``w_i = sum_j a_ij
Phi'(x_j)``, orthonormal (``A K' A^T = I``) with variances ``mu_i``, and ``Z = A K'`` (r x l): row i
holds the projections ``z_i = [<w_i, Phi'(x_j)>]_j`` of the training rows. With the feature-space
covariance ``Q = sum_j Phi'(x_j) Phi'(x_j)^T`` (l times seed 000's C), ``Q w_i`` has coefficients
``z_i`` over the centred rows, so one pass of kernel rows gives ``Z K'`` and with it

* the next iterate: the Rayleigh-Ritz components of span(``A' = Z``) with ``A' K' = Z K'`` (a power
  step, ``A' = A K'``), kept orthonormal as a warm start is;
* the residual of the components it started from, ``||Q w_i - mu_i w_i||^2 = z_i K' z_i^T -
  mu_i^2`` (``mu_i = ||z_i||^2`` and ``||w_i|| = 1``), reported relative, ``max_i ||Q w_i - mu_i
  w_i|| / mu_i``: the convergence figure (``residual``) of the model served before the pass; the
  one served after it, from the power step's span, is closer still. Seed 000's excess error (eq. 22)
  is second order in the components' angles as the squared residual is, and measures about
  ``residual^2`` on the benches (bench/time_to_accuracy.py).

Guard vectors and the previous step (LOBPCG). Block power iteration on r vectors converges as
``lambda_{r+1} / lambda_r`` per pass, slowly where the spectrum has no gap after the r-th eigenvalue
(image patches). The pass therefore iterates ``g`` more vectors than it serves (``guard_A``,
``guard_AK`` in the state, `guard_count`), as block Lanczos keeps guard vectors, and takes the
Rayleigh-Ritz step over span(X, W, P) instead of span(Z) (`accelerated_step`): X the k = r + g current
components, W their residual directions and P the previous step, as LOBPCG does (Knyazev 2001). The
product ``Z K'`` that the power step needs is the only one: ``X K' = Z`` is known, ``W K'`` is ``Z K'``
less known terms, and P's image is kept with it (``previous_A``, ``previous_AK``). The residual is
still that of the served r. Starts that know the leading directions (subset, Nystrom) make r + g of
them; a state without guards (``guards`` 0, a random start, rows appended) takes the plain power
step, and so do passes over float32 kernel tiles (``kernel_precision``): W K' is a difference of the
product's rows, and float32 rounding of the product leaves it inconsistent with W, a direction whose
claimed Rayleigh quotient the step then takes for real (tests/kpca/test_default_fit.py). Sharded passes
take the same steps (`kpca.sharded.passes`): every norm and Gram matrix here is a sum over columns, so the
shards form their columns of the basis (`step_basis`) and the coordinator adds their reductions.

Cost: one pass, ``2 l^2 (n + r + g)`` flops (`kpca.rows.KernelRows.left_product`), no row formed, plus
``O((r + g)^2 l + (r + g)^3)``; memory O((r + g) l).
"""

from __future__ import annotations

import numpy as np

from kpca.solvers._residual import residual
from kpca.solvers._ritz import ritz_components
from kpca.solvers._rounding import checked_pass

BLOCK_ROWS = 1024  # rows of K' multiplied per call (memory O(r l) whatever it is)
# what a pass iterates beside the served r (module docstring): the g guard vectors, the previous step
GUARD_KEYS = ("guard_A", "guard_AK", "previous_A", "previous_AK")


def guard_count(n_components: int, span: int) -> int:
    """Guard vectors for r served components in a start whose span holds ``span`` directions (its
    rows or landmarks): ``min(max(r, 8), 32)``, at most ``span - r``. O(1)."""
    r = int(n_components)
    return int(max(0, min(max(r, 8), 32, int(span) - r)))


def power_step(rows, Z: np.ndarray, block_size: int = BLOCK_ROWS) -> tuple[np.ndarray, np.ndarray]:
    """``(Z K', residual)`` for the projections ``Z`` (r, l) of the training rows onto orthonormal
    components (module docstring): ``Z K'`` (r, l) from one pass of kernel rows and the relative
    residual ``max_i sqrt(|z_i K' z_i^T - ||z_i||^4|) / ||z_i||^2`` of those components (0 for a
    component without variance). ``rows`` is a row source with its centring set. Cost: one pass,
    ``2 l^2 (n + r)`` flops."""
    Z = np.ascontiguousarray(Z, dtype=np.float64)
    ZK = rows.times(Z, block_size)
    return ZK, residual(Z, ZK)


def rayleigh_ritz_pass(state: dict, rows, block_size: int = BLOCK_ROWS, tol: float | None = None) -> dict:
    """One deterministic pass of a KHA-family state (module docstring): the projections ``Z`` of the
    served components and of the state's guard vectors become the coefficients, ``A K'`` is ``Z K'``
    from one pass of kernel rows, the leading r are served (``A``, ``AK``) and the rest kept as guards,
    and ``residual`` is the figure of the r components served before the pass. Over float32 kernel tiles
    the figure is checked against float64 (`kpca.solvers._rounding.checked_pass`: a bound of the tiles'
    rounding from a row sample, or the pass redone in float64), and the rows move to float64 when
    float32 cannot resolve it at ``tol`` (``kernel_precision`` and its reason in the state). LOBPCG's
    step needs images consistent with their coefficients: after a pass over float32 tiles (state
    ``float32_images``) the next pass takes the power step. Gains and SMD's B, BK, rho are left as they
    are. Returns a new state; the driver counts the pass. Cost as `power_step`, plus the check's (its
    module)."""
    r = np.asarray(state["A"]).shape[0]
    pairs = (("A", "guard_A"), ("AK", "guard_AK")) if "guard_A" in state else (("A",), ("AK",))
    A, AK = (np.concatenate([np.asarray(state[key], dtype=np.float64) for key in keys]) for keys in pairs)
    X, Z, _ = ritz_components(A, AK)
    Z = np.ascontiguousarray(Z)
    ZK = rows.times(Z, block_size)
    checked = checked_pass(rows, X, Z, ZK, r, block_size, (int(state["seed"]), int(state["pass"])), tol)
    ZK = checked.ZK
    if checked.switched:  # the components X with their float64 images take the power step's place
        Z = X
    dtype = np.asarray(state["A"]).dtype
    out = dict(state, residual=checked.residual, t=int(state["t"]) + int(rows.n_rows), position=0, **checked.notes,
               float32_images=checked.float32_product)
    if checked.residual is None:  # the pass measured nothing (it moved the fit to float64): no figure, not 0
        del out["residual"]
    plain = (checked.residual is None or checked.residual < PLAIN_BELOW or checked.float32_product
             or bool(state.get("float32_images")))
    if "guard_A" not in state or plain:  # a power step: the Ritz components of span(Z)
        A, AK, mu = ritz_components(Z, ZK)  # kept orthonormal, as after a warm start: a stochastic pass may follow
        out = {key: value for key, value in out.items() if key not in ("previous_A", "previous_AK")}
        if "guard_A" not in state:
            return dict(out, A=A.astype(dtype), AK=AK.astype(dtype), eigenvalues=mu)
        return dict(out, A=A[:r].astype(dtype), AK=AK[:r].astype(dtype), eigenvalues=mu[:r],
                    guard_A=A[r:].astype(dtype), guard_AK=AK[r:].astype(dtype))
    previous = None if "previous_A" not in state else (np.asarray(state["previous_A"], dtype=np.float64),
                                                      np.asarray(state["previous_AK"], dtype=np.float64))
    A, AK, mu, P, PK = accelerated_step(X, Z, ZK, previous)
    return dict(out, A=A[:r].astype(dtype), AK=AK[:r].astype(dtype), eigenvalues=mu[:r],
                guard_A=A[r:].astype(dtype), guard_AK=AK[r:].astype(dtype), previous_A=P.astype(dtype),
                previous_AK=PK.astype(dtype))


def measured_residual(state: dict, rows, block_size: int = BLOCK_ROWS) -> dict:
    """The state with the ``residual`` of the components it serves (their Ritz components) measured by one
    pass of kernel rows, the components left as they are: the end of a fit whose passes measure nothing
    (the paper's stochastic steps), so that its figure, and the tol judged by it, are the served
    components' (issue 51). Over float32 rows the figure carries its rounding bound
    (`kpca.solvers._rounding.checked_pass`). Cost: one pass, ``2 l^2 (n + r)`` flops."""
    X, Z, _ = ritz_components(np.asarray(state["A"], dtype=np.float64), np.asarray(state["AK"], dtype=np.float64))
    Z = np.ascontiguousarray(Z)
    ZK = rows.times(Z, block_size)
    checked = checked_pass(rows, X, Z, ZK, Z.shape[0], block_size, (int(state["seed"]), int(state["pass"])))
    return dict(state, residual=checked.residual)


#: Below this residual of the served components a pass takes the plain power step (with the guards):
#: LOBPCG's step carries ``A K'`` by combinations whose rounding grows from pass to pass once its
#: directions are near rounding (a run of 500 passes at tol 0 ended with an excess error of 3.5), while
#: the power step takes ``A K'`` from the pass's own product.
PLAIN_BELOW = 1e-6


def accelerated_step(X: np.ndarray, Z: np.ndarray, ZK: np.ndarray, previous=None):
    """LOBPCG's step from one product (module docstring): ``(A, AK, mu, P, PK)``, the k Ritz components
    of span(X, W, P) and the part of their step outside span(X).

    X (k, l) are orthonormal Ritz components (``X K' X^T = I``) with ``Z = X K'``; ``ZK = Z K'`` is the
    pass's product. The residual directions ``W = Z - diag(mu) X`` (coefficients of ``Q w_i - mu_i
    w_i``) have ``W K' = ZK - diag(mu) Z``, and the previous step's P its images PK (``previous``), so
    the Rayleigh-Ritz problem over all three needs no other product; W and P are formed as differences
    of vectors (not of their inner products) and scaled to unit feature-space norm, which keeps them
    accurate as the residual shrinks. Cost ``O(k^2 l + k^3)``, no kernel row.
    """
    k = X.shape[0]
    mu = np.einsum("ij,ij->i", Z, Z)
    w_rows, w_norms = kept_directions(np.einsum("ij,ij->i", ZK - mu[:, None] * Z, Z - mu[:, None] * X), mu)
    p_rows = p_norms = np.zeros(0)
    if previous is not None:
        p_rows, p_norms = kept_directions(np.einsum("ij,ij->i", previous[1], previous[0]),
                                          np.ones(previous[0].shape[0]))
    B, BK = step_basis(X, Z, ZK, mu, (w_rows, w_norms), previous, (p_rows, p_norms))
    A, AK, values = ritz_components(B, BK)
    A, AK = A[:k], AK[:k]
    overlap = AK @ X.T  # (A K' X^T): the new components' coordinates along the old ones
    P, PK = _unit(A - overlap @ X, AK - overlap @ Z, np.ones(k))
    return A, AK, values[:k], P, PK


DIRECTION_FLOOR = 1e-8  # a residual or step direction below this (relative) is rounding, not a direction


def kept_directions(squared: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, norms)``: the directions whose feature-space norm (``sqrt(squared)``, squared = ``diag(C
    K' C^T)``) is above ``DIRECTION_FLOOR`` times ``scale``, and those norms (`_unit`'s rule, from the
    norms alone: a sharded step gets them as reductions). O(k)."""
    norms = np.sqrt(np.maximum(np.asarray(squared, dtype=np.float64), 0.0))
    rows = np.flatnonzero(norms > DIRECTION_FLOOR * np.asarray(scale))
    return rows, norms[rows]


def step_basis(X: np.ndarray, Z: np.ndarray, ZK: np.ndarray, mu: np.ndarray, residual_rows,
               previous=None, previous_rows=None) -> tuple[np.ndarray, np.ndarray]:
    """``(B, BK)``: LOBPCG's basis ``[X; W; P]`` of `accelerated_step` and its image, on any set of columns
    (one process's all, or a shard's own): the residual directions ``W = Z - diag(mu) X`` (``W K' = ZK -
    diag(mu) Z``) and the previous step ``previous = (P, PK)``, each restricted to ``(rows, norms)``
    (`kept_directions`) and scaled to unit norm. O(k l)."""
    rows, norms = residual_rows
    blocks = [(X, Z), ((Z[rows] - mu[rows, None] * X[rows]) / norms[:, None],
                       (ZK[rows] - mu[rows, None] * Z[rows]) / norms[:, None])]
    if previous is not None and previous_rows is not None and len(previous_rows[0]):
        rows, norms = previous_rows
        blocks.append((previous[0][rows] / norms[:, None], previous[1][rows] / norms[:, None]))
    return tuple(np.concatenate([block[i] for block in blocks]) for i in (0, 1))


def _unit(C: np.ndarray, CK: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(C, C K')`` with each row scaled to unit feature-space norm (``diag(C K' C^T) = 1``), keeping
    only the rows whose norm is above ``DIRECTION_FLOOR`` times ``scale`` (k,): C and C K' are
    differences of nearly equal vectors, and below that their rounding makes C K' no longer C's image,
    a direction the Rayleigh-Ritz step would take for a real one. O(k l)."""
    rows, norms = kept_directions(np.einsum("ij,ij->i", CK, C), scale)
    return C[rows] / norms[:, None], CK[rows] / norms[:, None]
