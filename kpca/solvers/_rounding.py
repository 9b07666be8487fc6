"""A float32 pass checked against float64: the residual a Rayleigh-Ritz pass reports is a bound of the
float64 one, or the pass is redone in float64.

Why. Float32 kernel tiles run a pass at about twice float64's speed (bench/kernel_rows.py), and on data
they resolve they leave the served components as good as float64's. Where they do not resolve K' (rows
far from the origin under a dot-product kernel, a width far above the distances), the pass's product
``Z K'`` carries errors as large as what it measures: the squared residual of
`kpca.solvers._rayleigh_ritz.residual_squares` can come out small, or negative, for components that
are far from converged (issue 51: "residual 0.0, converged at pass 0" with an excess error of 4.3).
So a float32 pass's figure is never taken as it is (`checked_pass`):

* how far its squared residuals are from float64's is estimated on a column sample and added to them
  (`rounding_bound`);
* a squared residual negative beyond that bound (products inconsistent with the components; a negative
  value within it is rounding, and the bound is the figure), or a bound that alone is
  above half the fit's tol (float32 cannot resolve the residual the tol asks for), moves the fit to
  float64 for good (`switch_to_float64`): the rows in float64, the centring computed again in float64
  (its float32 rounding is part of what could not be resolved), the pass's components given float64
  images, and the state says so (``kernel_precision``, ``kernel_precision_reason``). That pass measures
  nothing; the next one, in float64, does.

The bound. Let ``K'*`` be the centred kernel in float64 with the exact centring. The pass has ``Z``,
the projections of its components X (``Z = X K'*`` up to ``dZ``, the previous pass's rounding), and
``ZK = Z K'*`` up to ``E``. Its squared residual ``sq = (ZK - mu Z) . (Z - mu X)`` (per component, ``mu
= ||z||^2``) differs from the one of exact products, to first order in E and dZ, by

    d sq = E . c + dZ . w,     c = Z - mu X,  g = ZK - mu Z,  w = 2 g - mu c - 2 (z . c + g . x) z

(using ``K' c = g``): a sum over the l columns of terms known at any column where E and dZ are. At ``s =
CHECK_ROWS`` random columns S they are: the raw kernel rows of S in float64, from the source's data read
in float64 (`kpca.rows.KernelRows.float64_block`), give ``(Z K')[:, S]`` and ``(X K')[:, S]`` (K' is
symmetric) with the fit's centring; and their means give the exact column means at S, whose difference
``dm`` from the fit's (the centring pass's rounding) moves each row of ``Z K'`` and ``X K'`` along the
constant vector only (``z . 1 = 0``), by ``z . dm`` and ``x . dm``, terms of the same sum. Then ``d sq``
is estimated by l times the mean of its s terms, and the bound is its absolute value plus `MARGIN`
standard errors of that mean (a Monte Carlo estimate of a sum; terms of rounding are many and small,
and the margin covers a sample's miss at about three sigma). The figure reported is ``max_i sqrt(|sq_i|
+ bound_i) / mu_i``: a statistical bound, not a certainty, stated as such in
docs/choosing-a-solver.md; second-order terms (E dZ, dZ^2) are left out.

Cost per float32 pass: the s float64 kernel rows, ``2 s l n`` flops and one read of the source (about
``s / l`` of a float64 pass), and ``O(s l k)`` for the products; a switch costs two float64 passes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kpca.solvers._residual import relative_residuals, residual_squares

CHECK_ROWS = 128  # rows of K' computed in float64 to bound a float32 pass's rounding
MARGIN = 3.0  # standard errors of the sampled estimate added to it
FAR_ABOVE = 4.0  # a figure as computed above this many tols is reported as it is, unchecked (`checked_pass`)


@dataclass
class CheckedPass:
    """A pass's product and figure after the check: ``ZK``, the relative ``residual`` of its first r
    components (None where the pass switched precision: nothing consistent was measured), whether ``ZK``
    came from float32 tiles (``float32_product``), and what the state should say of the switch
    (``notes``: ``kernel_precision``, its reason and the float64 centring). After a switch ``ZK`` is
    ``X K'`` in float64, the images of the pass's own components X (`switch_to_float64`)."""

    ZK: np.ndarray
    residual: float | None
    float32_product: bool
    notes: dict = field(default_factory=dict)

    @property
    def switched(self) -> bool:
        return "kernel_precision" in self.notes


def checked_pass(rows, X: np.ndarray, Z: np.ndarray, ZK: np.ndarray, r: int, block_size: int,
                 seed: tuple[int, int], tol: float | None = None) -> CheckedPass:
    """The figure of a pass's first r components (module docstring): as computed over float64 tiles
    (``sqrt(|sq|)``); over float32 tiles, with the sampled rounding bound (``seed`` draws the sample).
    Where a squared residual is negative beyond the bound, or the bound alone is above half the fit's
    ``tol`` (float32 cannot resolve what it asks), the fit goes on in float64 (`switch_to_float64`). A pass
    whose figure as computed is more than `FAR_ABOVE` times its tol (and no square negative) cannot stop,
    and the bound would change nothing it decides: it reports the figure as computed, unchecked, and
    saves the check. Cost: module docstring."""
    dtype = np.dtype(getattr(rows, "dtype", np.float64))
    squared, mu = residual_squares(Z[:r], ZK[:r], X[:r])
    as_computed = float(relative_residuals(squared, mu).max(initial=0.0))
    if dtype == np.float64 or not hasattr(rows, "float64_block"):
        return CheckedPass(ZK, as_computed, False)
    if tol and as_computed > FAR_ABOVE * tol and not np.any(squared[mu > 0] < 0):
        # far from stopping: the bound would change no decision (the floor is checked where the fit comes near
        # its tol, the pass that could stop on it); the figure is as computed, marked so in the docstring
        return CheckedPass(ZK, as_computed, True)
    bound = rounding_bound(rows, X[:r], Z[:r], ZK[:r], mu, seed)
    if np.any((squared < -bound)[mu > 0]):
        return switch_to_float64(rows, X, block_size, "a float32 pass measured a negative squared residual beyond "
                                                      "its rounding (its products inconsistent with the components)")
    floor = float(relative_residuals(bound, mu).max(initial=0.0))
    if tol and floor > tol / 2:
        return switch_to_float64(rows, X, block_size, f"float32 tiles could not resolve this kernel matrix at tol "
                                                      f"{tol:g}: their rounding alone bounds the relative residual "
                                                      f"at {floor:.2g} (a float64 sample of {CHECK_ROWS} rows)")
    return CheckedPass(ZK, float(relative_residuals(np.abs(squared) + bound, mu).max(initial=0.0)), True)


def switch_to_float64(rows, X: np.ndarray, block_size: int, why: str) -> CheckedPass:
    """The fit moved to float64 (module docstring): ``rows`` in float64, their centring computed again in
    float64 (a float32 centring is part of what float32 could not resolve), and the images ``X K'`` of the
    pass's components in float64 for the step that follows, no figure measured. Cost: two float64 passes
    (the centring, the product)."""
    rows.use_precision(np.float64)
    rows.fit_centering(block_size)
    notes = {"kernel_precision": "float64", **rows.centering.to_state(),
             "kernel_precision_reason": f"{why}: the fit went on in float64, its centring computed again"}
    return CheckedPass(rows.times(np.ascontiguousarray(X), block_size), None, False, notes)


@dataclass
class Sample:
    """What `sampled_bound` needs of a pass's first k components, at ``s = CHECK_ROWS`` sampled columns S
    of l and summed over all l: their projections ``Z``, images ``ZK`` and coefficients ``X`` at S (k, s),
    the float64 ``(Z K')[:, S]`` and ``(X K')[:, S]`` with the fit's centring (k, s), the fit's column
    means at S less the exact ones (``dm``, s), and over all columns ``z . x``, ``zk . x`` and the sums
    of the rows of Z, X and ZK (k,). One process (`rounding_bound`) or a shard group
    (`kpca.sharded.passes`) gathers it."""

    n_rows: int
    Z: np.ndarray
    ZK: np.ndarray
    X: np.ndarray
    exact_Z: np.ndarray
    exact_X: np.ndarray
    dm: np.ndarray
    zx: np.ndarray
    kx: np.ndarray
    z_sum: np.ndarray
    x_sum: np.ndarray
    k_sum: np.ndarray


def sample_columns(n_rows: int, seed) -> np.ndarray:
    """The sorted columns S of the check (`CHECK_ROWS` of them, or all), drawn by ``seed`` (pass and fit)."""
    rng = np.random.default_rng([*seed, 51])
    return np.sort(rng.choice(n_rows, size=min(n_rows, CHECK_ROWS), replace=False))


def rounding_bound(rows, X: np.ndarray, Z: np.ndarray, ZK: np.ndarray, mu: np.ndarray, seed) -> np.ndarray:
    """How far (k,) the squared residuals of `residual_squares` may be from their float64 values, for a
    pass in one process (`sampled_bound` of its `Sample`). Cost: ``CHECK_ROWS`` float64 kernel rows, ``2 s
    l (n + 2 k)`` flops, and O(k l)."""
    S = sample_columns(rows.n_rows, seed)
    K = rows.float64_block(S)  # raw K[S, :], float64 from float64 data
    c = rows.centering
    m = np.asarray(c.column_means, dtype=np.float64)
    dm = m[S] - K.mean(axis=1)  # the fit's column means at S against the exact ones (K symmetric)
    K += (c.grand_mean - m[S])[:, None] - m[None, :]  # K'[S, :] with the fit's centring
    k = Z.shape[0]
    exact = np.vstack([Z, X]) @ K.T  # (Z K')[:, S] and (X K')[:, S] in one product (K' symmetric)
    sample = Sample(rows.n_rows, Z[:, S], ZK[:, S], X[:, S], exact[:k], exact[k:], dm,
                    np.einsum("ij,ij->i", Z, X), np.einsum("ij,ij->i", ZK, X), Z.sum(axis=1), X.sum(axis=1),
                    ZK.sum(axis=1))
    return sampled_bound(sample, mu)


def sampled_bound(sample: Sample, mu: np.ndarray) -> np.ndarray:
    """The bound of the module docstring from a `Sample`: the first-order difference of the squared residuals
    estimated from its columns, in absolute value, plus `MARGIN` standard errors. O(k s)."""
    q = sample
    e = q.ZK - q.exact_Z  # the product's error at S, centring aside
    dz = q.Z - q.exact_X  # the projections' error at S, centring aside
    # c = Z - mu X, g = ZK - mu Z and w = 2 g - mu c - 2 kappa Z (module docstring), at S and summed over all
    # columns, from inner products over all columns rather than (k, l) temporaries
    kappa = (mu - mu * q.zx) + (q.kx - mu * q.zx)  # z . c + g . x, with z . z = mu
    c_sum = q.z_sum - mu * q.x_sum
    w_sum = 2 * (q.k_sum - mu * q.z_sum) - mu * c_sum - 2 * kappa * q.z_sum
    c_S = q.Z - mu[:, None] * q.X
    w_S = 2 * (q.ZK - mu[:, None] * q.Z) - mu[:, None] * c_S - 2 * kappa[:, None] * q.Z
    terms = e * c_S + dz * w_S  # (k, s): the difference's terms at the sampled columns
    # the centring's error moves each row of Z K' by -(z . dm) 1 and of X K' by -(x . dm) 1
    terms -= (q.Z * q.dm) * c_sum[:, None] + (q.X * q.dm) * w_sum[:, None]
    estimate = q.n_rows * terms.mean(axis=1)
    error = q.n_rows * terms.std(axis=1) / np.sqrt(terms.shape[1])
    return np.abs(estimate) + MARGIN * error
