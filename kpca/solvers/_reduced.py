"""Kernel PCA over a reduced set: ``subsampled``, ``nystrom-weighted`` and ``rskpca`` (seed 004).

All three are one-shot solvers that serve ``"centres"``: the model keeps m
centres ``c_j`` (m x n) with weights and never opens the training rows
again, so projecting a point costs O(m n) (m kernel values) instead of
O(l n). They differ in how the centres and their weights are found
(`kpca.reduced_sets`), and share the eigenproblem, `weighted_components`.

Reduced-set KPCA (seed 004 Algorithm 1), with centring. Centres ``c_j``
with counts ``n_j`` (summing to l) stand for the data set in which each
``c_j`` is repeated ``n_j`` times (the "quantised" set of seed 004 §5). With
``p = n / l``, ``K_C = [k(c_i, c_j)]`` (m x m) and the weighted mean
``mu = sum_j p_j Phi(c_j)``, the centred kernel of the centres is
``K'_C = K_C - 1 q^T - q 1^T + (p^T q) 1 1^T``, ``q = K_C p``
(`kpca.rows.Centering.weighted`). The quantised set's centred kernel
matrix is ``E K'_C E^T`` (E: l x m, row i the indicator of row i's centre);
since ``E^T E = diag(n)``, its nonzero eigenvalues are l times those of the
density-weighted matrix (seed 004 eq. 13, Algorithm 1 step 3)

    K_tilde = P^1/2 K'_C P^1/2,         P = diag(p),

and with ``K_tilde phi_t = lambda_t phi_t`` the components of unit norm in
feature space are ``A = P^1/2 phi_t / sqrt(lambda_t)`` over the centred
centres (the reweighting of Algorithm 1, step 5): ``A K'_C A^T = I``, and a
point projects as ``A k'(x)``. This is exactly kernel PCA of the quantised
set (tests/kpca/test_reduced.py), reported with eigenvalue estimates
``l lambda_t`` for the l x l K' of the training rows. Algorithm 1 as
printed leaves out the centring; here every model is centred (seed 000 eq.
4-5), by the weighted mean of its centres. Cost O(m^2 n + m^3).

Which reduced set (defaults chosen to work untuned):

* ``subsampled``: m rows uniformly at random with equal weights, i.e. exact
  KPCA on the subsample, eigenvalues scaled by l/m: the one-shot Nyström
  method of seed 003 §3.7 (eigenvectors of the subsample's kernel matrix,
  eq. 13, whose values at any point are these projections up to the scale
  ``sqrt(m) / (l lambda_hat)``; eigenvalues ``(l/m) lambda_hat``, eq. 14), centred
  on the subsample; seed 004's "subsampled KPCA" baseline. O(m^2 n + m^3).
* ``nystrom-weighted``: the density-weighted Nyström method (Zhang & Kwok,
  seed 004 [20]): m k-means centroids weighted by their cluster fractions
  (`kpca.reduced_sets.kmeans_estimate`), the eigenproblem of
  ``P^1/2 K'_C P^1/2``. Its asymmetric form ``K'_C P`` has the same
  eigenvalues, and its eigenfunctions over the centres are these
  components; so it computes what ``rskpca`` with ``density="kmeans"``
  computes with the same m and seed. O((passes + 1) l m n + m^3).
* ``rskpca``: seed 004 Algorithm 1 over the shadow density estimate
  (Algorithm 2, one pass, O(l m n)) by default, or another RSDE of §6.

Default m (``size``, ``landmarks``): ``min(l, max(10 r, 1000), exact_limit)``,
the warm start's rule (`kpca.solvers.default_init_size`): ten landmarks per
component, and at least 1000 where the data have them, so the m x m
eigenproblem stays small (its matrices 8 MB at m = 1000); never more than the
m x m matrices a fit may form (``exact_limit``, the exact limit of the
service).

RSKPCA's purpose is a model over a small fraction of the rows (seed 004:
O(m) serving, "m << n"). With ell = 4 and the median width the shadow keeps
most rows of data that are sparse at the kernel's scale (digits: 67 %; 36 to
90 % for ell 3 to 5 on digits and breast cancer), so by default it keeps at
most ``max_centres = min(l, exact_limit, max(10 r, ceil(l / 10)))``
(`default_max_centres`: a tenth of the rows, at least ten per component),
growing epsilon 1.25-fold until it does; ``params_used.ell`` reports the ell
in effect, ``params_used.centres`` the m, and ``params_used.mmd_bound`` the
error that ell guarantees (seed 004 eq. 21, `kpca.reduced_sets.shadow_mmd_bound`).
The same m is the default of ``centres`` for the other densities (a kernel
without a shadow: ``min(default m, max_centres)``). What the default costs in
accuracy, measured against exact KPCA and the other solvers at the same m, is
in docs/reduced-set.md (bench/reduced_set.py).
"""

from __future__ import annotations

import numpy as np

from kpca._dense import eigh
from kpca.kernels import kernel_block
from kpca.params import Param, ParamError
from kpca.reduced_sets import (
    SHADOW_KERNELS,
    ReducedSet,
    herding_estimate,
    kmeans_estimate,
    paring_estimate,
    shadow_epsilon,
    shadow_estimate,
    shadow_mmd_bound,
)
from kpca.rows import Centering
from kpca.solvers._exact import exact_components
from kpca.solvers._registry import SEED, FitContext, Solver, register, served_model
from kpca.solvers._ritz import rounding_floor
from kpca.solvers._state import ComponentsState

DENSITIES = ("shadow", "kmeans", "paring", "herding")
DEFAULT_ELL = 4.0  # seed 004 §1: "can generally be set to a generic value (say l = 4)"; §6 tries 3 to 5
KMEANS_PASSES = 3

SIZE = Param("size", int, None, low=2, description="rows in the uniform random subsample, m (default "
             "min(l, max(10 n_components, 1000)), at most the exact limit); between n_components + 1 and l")
LANDMARKS = Param("landmarks", int, None, low=2, description="landmarks m: uniformly drawn rows (nystrom) or "
                  "k-means centroids (nystrom-weighted); default min(l, max(10 n_components, 1000)), at most "
                  "the exact limit; between n_components + 1 and l")
ELL = Param("ell", float, DEFAULT_ELL, low=0.0, low_open=True, description="shadow parameter: rows "
            "closer than epsilon = sigma / ell to a centre join it (sigma the kernel's width: sqrt(2) "
            "sigma for the Gaussian kernel here, sigma for the Laplacian), so the kernel between a row and its "
            "centre is at least exp(-1/ell^2) (Gaussian). Larger ell keeps more centres; 3 to 5 work well")
DENSITY = Param("density", str, "shadow", choices=DENSITIES, description="reduced-set density estimate: "
                "shadow (one pass; the number of centres m follows from ell; radial kernels), kmeans (mini-batch "
                "k-means, cluster sizes), paring (uniform rows, equal weights), herding (kernel herding, "
                "O(l^2 n), up to the exact limit of rows)")
CENTRES = Param("centres", int, None, low=2, description="centres m of density kmeans, paring or herding "
                "(default: the m the shadow estimate keeps with this ell, or min(l, max(10 n_components, 1000)) "
                "for a kernel without a width); between n_components + 1 and l")
MAX_CENTRES = Param("max_centres", int, None, low=2, description="most centres the shadow estimate keeps: "
                    "beyond, epsilon grows 1.25x and the centres merge, and params_used.ell reports the ell in "
                    "effect. Default: a tenth of the rows (at least 10 per component, at most the exact limit), "
                    "doubled while the components capture less than 95% of the variance that exact kernel PCA "
                    "of as many uniformly drawn rows captures (params_used.variance_ratio)")
KMEANS_PASSES_PARAM = Param("kmeans_passes", int, KMEANS_PASSES, low=1, high=100,
                            description="passes of mini-batch k-means over the data (then one assignment pass)")


def default_centres(n_components: int, n_rows: int, exact_limit: int) -> int:
    """``min(l, max(10 r, 1000), exact_limit)``: the default m (module docstring). O(1)."""
    return int(min(n_rows, max(10 * n_components, 1000), exact_limit))


DEFAULT_FRACTION = 0.1  # rskpca keeps at most this fraction of the rows by default (`default_max_centres`)


def default_max_centres(n_components: int, n_rows: int, exact_limit: int) -> int:
    """``min(l, exact_limit, max(10 r, ceil(DEFAULT_FRACTION l)))``: rskpca's default bound on m (module
    docstring). O(1)."""
    return int(min(n_rows, exact_limit, max(10 * n_components, int(np.ceil(DEFAULT_FRACTION * n_rows)))))


def check_centres(name: str, value: int | None, context: FitContext) -> int:
    """``value`` (default `default_centres`) if ``n_components < value <= min(l, exact_limit)``, else
    `ParamError` naming ``name``: m centres carry at most m - 1 centred directions. O(1)."""
    r, l = context.n_components, context.n_rows
    m = default_centres(r, l, context.exact_limit) if value is None else int(value)
    top = min(l, context.exact_limit)
    if not r < m <= top:
        bound = f"the {l} rows" if top == l else f"the exact limit {context.exact_limit} (m x m kernel matrix)"
        raise ParamError(name, f"must be between n_components + 1 = {r + 1} and {top} ({bound}), got {m}")
    return m


def weighted_components(K: np.ndarray, counts: np.ndarray | None, n_components: int):
    """Seed 004 Algorithm 1, centred (module docstring): ``(eigenvalues, A, AK, centering)``.

    Parameters
    ----------
    K : ndarray of shape (m, m)
        ``K_C``, the kernel matrix of the centres (uncentred).
    counts : ndarray of shape (m,) or None
        Rows each centre stands for (None: equal).
    n_components : int
        r; components past the m - 1 directions m centred centres can span
        (or past the rank of ``K'_C``) are zero rows of variance 0.

    Returns
    -------
    eigenvalues : (r,) eigenvalues ``lambda_t`` of ``P^1/2 K'_C P^1/2``, descending
        (times l: estimates for the training rows' K').
    A : (r, m) coefficients over the centred centres, ``A K'_C A^T = I``
        (zero rows for eigenvalues <= 0).
    AK : (r, m) ``A K'_C``.
    centering : `kpca.rows.Centering` of the weighted centres.

    `kpca.errors.Degenerate` if the centres have no variance in feature
    space. Cost O(m^3) (one eigendecomposition of an m x m matrix).
    """
    centering = Centering.weighted(K, counts).require_variance()
    q, grand = centering.column_means, centering.grand_mean
    Kc = K - q[:, None] - q[None, :] + grand
    Kc = 0.5 * (Kc + Kc.T)
    m = K.shape[0]
    p = np.full(m, 1.0 / m) if centering.weights is None else centering.weights
    root = np.sqrt(p)
    kept = min(int(n_components), m)
    eigenvalues, A = np.zeros(n_components), np.zeros((n_components, m))
    eigenvalues[:kept], A_tilde = exact_components(root[:, None] * Kc * root[None, :], kept,
                                                   rounding_floor(K) * float(np.max(p)))
    A[:kept] = A_tilde * root[None, :]
    return eigenvalues, A, A @ Kc, centering


def reduced_set_state(name: str, reduced: ReducedSet, rows, n_components: int, equal: bool = False,
                      used: str = "centres") -> ComponentsState:
    """The state of a model over a reduced set: centres, ``A``, ``AK``, the centres' weighted centring,
    m as the ``used`` value named ``used``, and as eigenvalues the variances of all l training rows along the components
    (`supported_eigenvalues`), components ordered by them. ``equal``: the centres stand for equal shares
    (kept as unweighted centring). Cost O(m^2 n + m^3), and a pass of projections, O(l m n)."""
    centres = np.ascontiguousarray(reduced.centres, dtype=np.float64)
    local = centres - centres.mean(axis=0) if rows.kernel.kernel.radial else centres  # as `kpca.rows` computes
    K = kernel_block(local, local, rows.kernel)
    eigenvalues, A, AK, centering = weighted_components(K, None if equal else reduced.counts, n_components)
    state = ComponentsState(solver=name, centres=centres, A=A, AK=AK, eigenvalues=rows.n_rows * eigenvalues,
                            n_rows=rows.n_rows, centering=centering.to_state(), used={used: reduced.size})
    return supported_eigenvalues(state, rows)


def supported_eigenvalues(state: ComponentsState, rows) -> ComponentsState:
    """The state's components turned to the Rayleigh-Ritz components of their span over all l training
    rows, with their variances over those rows as eigenvalues: from one pass of projections, the r x r
    covariance ``G`` of the rows' projections (centred by the data's mean) and its eigendecomposition ``G
    = V diag(mu) V^T``; the components become ``V^T A`` (orthonormal still: they were, in feature space)
    and ``mu`` are their eigenvalues, which by Cauchy interlacing never exceed the rows' K' eigenvalues of
    the same rank. A reduced set's own estimate ``l lambda_t`` could (issue 51: ``subsampled`` above the
    truth by 3 % of lambda_1 on digits). Components without variance stay zero rows of eigenvalue 0.
    Cost: one pass of projections, O(l m n), and O(r^3); memory O(r^2)."""
    model = served_model(state, None, rows.kernel)
    r = model.n_components
    total, second = np.zeros(r), np.zeros((r, r))
    for _, chunk in rows.chunks():
        Y = model.project(np.asarray(chunk, dtype=np.float64))
        total += Y.sum(axis=0)
        second += Y.T @ Y
    G = second - np.outer(total, total) / rows.n_rows
    live = np.flatnonzero(np.asarray(state.eigenvalues) != 0)  # past the rank: stays a zero component
    A, AK = np.zeros_like(np.asarray(state.A)), np.zeros_like(np.asarray(state.AK))
    eigenvalues = np.zeros(r)
    if live.size:
        mu, V = eigh(0.5 * (G[np.ix_(live, live)] + G[np.ix_(live, live)].T))
        mu, V = np.maximum(mu[::-1], 0.0), V[:, ::-1]
        signs = np.sign(V[np.abs(V).argmax(axis=0), np.arange(live.size)])
        V = V * np.where(signs == 0, 1.0, signs)
        A[: live.size] = V.T @ np.asarray(state.A)[live]
        AK[: live.size] = V.T @ np.asarray(state.AK)[live]
        eigenvalues[: live.size] = mu
    return state.replace(A=A, AK=AK, eigenvalues=eigenvalues)


# -- subsampled ------------------------------------------------------------------------------------

def _resolve_subsampled(params: dict, context: FitContext) -> dict:
    return {**params, "size": check_centres("size", params["size"], context)}


def _fit_subsampled(rows, n_components: int, params: dict, context: FitContext, report=None) -> ComponentsState:
    """Exact KPCA on ``size`` uniform rows (their own centring), eigenvalues times l/m. O(m^2 n + m^3)."""
    reduced = paring_estimate(rows, params["size"], params["seed"])
    return reduced_set_state("subsampled", reduced, rows, n_components, equal=True, used="size")


register(Solver("subsampled", "exact kernel PCA on a uniform random subsample of m rows, eigenvalues scaled by "
                              "l/m (the one-shot Nystrom method); "
                              "serves the m rows: O(m n) per projection",
                params=(SIZE, SEED), serves="centres", fit=_fit_subsampled, resolve=_resolve_subsampled))


# -- nystrom-weighted ----------------------------------------------------------------------------------

def _resolve_weighted(params: dict, context: FitContext) -> dict:
    return {**params, "landmarks": check_centres("landmarks", params["landmarks"], context)}


def _fit_weighted(rows, n_components: int, params: dict, context: FitContext, report=None) -> ComponentsState:
    """Density-weighted Nystrom (Zhang & Kwok): k-means centroids and cluster fractions, then
    `weighted_components`. O((kmeans_passes + 1) l m n + m^3)."""
    reduced = kmeans_estimate(rows, params["landmarks"], params["seed"], params["kmeans_passes"])
    return reduced_set_state("nystrom-weighted", reduced, rows, n_components, used="landmarks")


register(Solver("nystrom-weighted", "density-weighted Nystrom (Zhang & Kwok): m k-means centroids weighted by "
                                    "their cluster fractions, the eigenproblem of the weighted centred kernel "
                                    "on them; serves the centroids: O(m n) per projection",
                params=(LANDMARKS, SEED, KMEANS_PASSES_PARAM), serves="centres", fit=_fit_weighted,
                resolve=_resolve_weighted))


# -- rskpca ---------------------------------------------------------------------------------------

def _resolve_rskpca(params: dict, context: FitContext) -> dict:
    out = dict(params)
    r, l, density = context.n_components, context.n_rows, out["density"]
    if density == "shadow":
        if out["centres"] is not None:
            raise ParamError("centres", "the shadow estimate's number of centres follows from ell; centres is "
                                        "for density kmeans, paring or herding")
        if context.kernel is not None and context.kernel.type not in SHADOW_KERNELS:
            shadow_epsilon(context.kernel, out["ell"])  # raises, naming density
    elif out["centres"] is not None:
        out["centres"] = check_centres("centres", out["centres"], context)
    if density == "herding" and l > context.exact_limit:
        raise ParamError("density", f"herding evaluates all l^2 kernel values (the density at every row) and is "
                                    f"limited to the exact limit of {context.exact_limit} rows (this data set has "
                                    f"{l}); choose shadow, kmeans or paring")
    top = min(l, context.exact_limit)
    if out["max_centres"] is not None and not r < out["max_centres"] <= top:  # None: the fit's own (`_fit_rskpca`)
        raise ParamError("max_centres", f"must be between n_components + 1 = {r + 1} and {top}, got "
                                        f"{out['max_centres']}")
    return out


def _shadow(rows, params: dict, n_components: int, max_centres: int, least: int | None = None):
    """``(reduced set, used values)``: the shadow estimate of the rows at ``ell`` with at most ``max_centres``
    centres, and at least ``least`` (default r + 1, as m centres serve at most m - 1 components): where a
    width far above the rows' distances leaves fewer (every row within epsilon of a few centres, issue 51:
    one), epsilon halves until it does not. O(l m n) a try."""
    epsilon = shadow_epsilon(rows.kernel, params["ell"])
    reduced = shadow_estimate(rows, epsilon, max_centres)
    least = min(n_components + 1 if least is None else least, max_centres, rows.n_rows)
    while reduced.size < least and _radius(reduced) > 1e-12 * epsilon:
        reduced = shadow_estimate(rows, _radius(reduced) / 2, max_centres)
    ell = params["ell"] * epsilon / _radius(reduced)
    return reduced, {"ell": ell, "epsilon": reduced.epsilon, "mmd_bound": shadow_mmd_bound(rows.kernel, ell)}


def _radius(reduced: ReducedSet) -> float:
    """The radius epsilon of a shadow estimate's reduced set."""
    assert reduced.epsilon is not None  # shadow_estimate sets it (only other reduced sets leave it None)
    return reduced.epsilon


#: What rskpca's default promises, checked per fit (`_fit_rskpca`): its components capture at least this
#: fraction of the variance (their Rayleigh-Ritz values over all rows) that the components of exact KPCA on
#: as many uniformly drawn rows capture (``subsampled``, seed 004's own baseline).
VARIANCE_TARGET = 0.95


def _fit_rskpca(rows, n_components: int, params: dict, context: FitContext, report=None) -> ComponentsState:
    """Seed 004 Algorithm 1 over the chosen density estimate (module docstring), checked against the
    uniform baseline (`VARIANCE_TARGET`, `_variance_ratio`). With ``max_centres`` left to the fit, the shadow
    estimate starts at `default_max_centres` and doubles it while its components capture less than the
    target, up to ``min(l, exact_limit)``; a model that still does says so, with the figure
    (``solver_note``; ``params_used.variance_ratio`` always). Cost per try: the estimate and the fit over
    its m centres, and the baseline's, each O(l m n + m^3)."""
    top = min(rows.n_rows, context.exact_limit)
    cap = params["max_centres"]
    grow = cap is None and params["density"] == "shadow"
    cap = default_max_centres(n_components, rows.n_rows, context.exact_limit) if cap is None else cap
    while True:  # the default also keeps at least ten centres per component, the landmark solvers' rule
        state = _rskpca_state(rows, n_components, dict(params, max_centres=cap), 10 * n_components if grow else None)
        ratio = _variance_ratio(state, rows, n_components, params["seed"])
        if not grow or ratio >= VARIANCE_TARGET or cap >= top:
            break
        cap = min(top, 2 * cap)
    state.used.update(max_centres=int(cap), variance_ratio=round(ratio, 4))
    if ratio < VARIANCE_TARGET:
        m = int(state.used["centres"])
        state.solver_note = (f"rskpca's {m} centres capture {ratio:.1%} of the variance that exact kernel PCA of "
                                f"{m} uniformly drawn rows captures on these rows (below its {VARIANCE_TARGET:.0%} "
                                "promise): use more centres (max_centres, ell), or nystrom")
    return state


def _variance_ratio(state: ComponentsState, rows, n_components: int, seed: int) -> float:
    """The variance a reduced model's components capture over all rows (the sum of its served Rayleigh-Ritz
    values) over what ``subsampled``'s capture with as many rows and the same seed. O(l m n + m^3)."""
    m = int(state.used["centres"])
    if m >= rows.n_rows:
        return 1.0
    baseline = reduced_set_state("subsampled", paring_estimate(rows, m, seed), rows, n_components, equal=True)
    captured = float(np.sum(baseline.eigenvalues))
    return float(np.sum(state.eigenvalues)) / captured if captured > 0 else 1.0


def _rskpca_state(rows, n_components: int, params: dict, least: int | None = None) -> ComponentsState:
    """One fit of seed 004 Algorithm 1 over the chosen density estimate, at most ``params["max_centres"]``
    centres (a shadow estimate's cap) and at least ``least`` (`_shadow`)."""
    density, used = params["density"], {}
    if density == "shadow":
        reduced, used = _shadow(rows, params, n_components, params["max_centres"], least)
    else:
        m = params["centres"]
        if m is None:  # as in seed 004 §6: the m the shadow estimate keeps (kernels without a width: the rule)
            if rows.kernel.type in SHADOW_KERNELS:
                m = max(_shadow(rows, params, n_components, params["max_centres"])[0].size, n_components + 1)
            else:
                m = default_centres(n_components, rows.n_rows, params["max_centres"])
        m = min(m, rows.n_rows)
        if density == "kmeans":
            reduced = kmeans_estimate(rows, m, params["seed"], params["kmeans_passes"])
        elif density == "paring":
            reduced = paring_estimate(rows, m, params["seed"])
        else:
            reduced = herding_estimate(rows, m)
    state = reduced_set_state("rskpca", reduced, rows, n_components, equal=density == "paring")
    state.used.update(used)
    return state


register(Solver("rskpca", "reduced-set KPCA: kernel PCA over m weighted centres from the shadow density estimate "
                          "(one pass, m from ell) or k-means, KDE paring or kernel herding; serves its m "
                          "weighted centres: O(m n) per projection",
                params=(ELL, DENSITY, CENTRES, MAX_CENTRES, SEED, KMEANS_PASSES_PARAM), serves="centres",
                fit=_fit_rskpca, resolve=_resolve_rskpca))
