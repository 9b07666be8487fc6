"""The Kernel Hebbian Algorithm family (seed 000): ``kha``, ``kha-t``, ``kha-et``, ``kha-smd``, and the
default solver ``ritz`` that shares their start and state.

``kha`` uses a constant gain (eq. 8-10), ``kha-t`` the gain
``eta0 l / (t + l)``, ``kha-et`` per-component gains from the eigenvalue
estimates (eq. 11-14) and ``kha-smd`` adapts them by stochastic
meta-descent (eq. 15-21, Algorithm 1): named, each runs its paper's
update rule, row by row with its gains (``update: "stochastic"``, the
default), from the best start (``init: "auto"``: a warm start where one
is affordable). ``ritz`` is what the service fits by default: the same
warm start, then the deterministic limit of a KHA pass (Rayleigh-Ritz
passes, `kpca.solvers._rayleigh_ritz`) until ``tol``; it takes no gain
(issue 53: the four KHA names ran exactly this, bit for bit). Their state, a
`kpca.solvers._state.KHAState` (checkpoint keys as the fields, ``pass_`` as ``pass``):

==============  ============================================================
field           value
==============  ============================================================
solver          name
A               (r, l) expansion coefficients; components W = A Phi'
AK              (r, l) A K', kept current incrementally (eq. 17-18)
B, BK, rho      (r, l) SMD differential parameters, B K', (r,) log-gains (SMD)
gain            (r,) base gain of the current pass (eq. 12 without l/(t+l))
eigenvalues     (r,) eigenvalue estimates of K' at the start of the pass (eq. 13)
eta0, mu, xi    resolved hyper-parameters
t, pass,        steps taken, passes completed, rows of the current pass done
position        (owned by the driver, `kpca.driver.run_passes`)
seed            permutation of pass p is default_rng([seed, p]).permutation(l)
init            how A_1 was chosen: "random", "subset", "nystrom" or "rskpca" (`start`)
init_size       (``init="subset"`` or ``"nystrom"``) the subset size or landmarks m actually used
centering_*     the centring of the training data (`kpca.rows.Centering.to_state`)
==============  ============================================================

Everything needed to resume bit for bit is in the state. A model serves not
the raw ``A`` but `ritz_components` of it (the orthonormal, variance-ordered
basis of the same span; `kpca.solvers._ritz`).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from kpca import defaults
from kpca.errors import Degenerate, Diverged
from kpca.params import Param, ParamError
from kpca.solvers._blocked import blocked_step_block
from kpca.solvers._extend import REDUCED_INITS, extended_start
from kpca.solvers._rayleigh_ritz import guard_count, measured_residual, rayleigh_ritz_pass
from kpca.solvers._reduced import check_centres
from kpca.solvers._registry import ITERATIVE_PARAMS, Solver, as_state, register
from kpca.solvers._ritz import eigenvalue_estimates, ritz_components
from kpca.solvers._state import KHAState
from kpca.solvers._warm import INITS, check_init, default_init_size, subset_start

_INIT_COLUMNS = 64
# The divergence guard: a state is diverged when a component's squared feature-space norm
# (diag A K' A^T, which KHA drives to 1) is not finite or exceeds NORM_LIMIT times the largest at
# the start (at least 1); the pass then restarts with gains GAIN_REDUCTION times smaller, at most
# MAX_GAIN_REDUCTIONS times. Relative to the start, the guard is as scale-free as the start.
NORM_LIMIT = 1e4
MAX_GAIN_REDUCTIONS = 8
GAIN_REDUCTION = 0.25

ETA0 = Param("eta0", float, None, low=0.0,
             description="initial gain (default: a scale-free rule from the kernel's trace, kpca.defaults; 0 after "
                         "a warm start that is already exact kernel PCA)")
MU = Param("mu", float, None, low=0.0, description="SMD meta-gain (default: scale-free, like eta0)")
XI = Param("xi", float, defaults.XI, low=0.0, high=1.0, description="SMD decay factor")
START_LANDMARKS = 256  # landmarks of the default start (at least 8 n_components): bench/time_to_accuracy.py
INIT = Param("init", str, "auto", choices=(*INITS, *REDUCED_INITS),
             description="start: subset (warm: the leading components within the span of init_size random rows, "
                         "Rayleigh-Ritz on the whole data), random (the paper's sparse random start), nystrom or "
                         "rskpca (that solver's components extended to every row: a reduced fit plus one pass), or "
                         "auto (the default): subset where it is exact kernel PCA (all rows in the subset), else "
                         "nystrom on max(256, 8 n_components) landmarks (streamed, O(m^2) memory at any size)")
UPDATE = Param("update", str, "auto", choices=("auto", "stochastic", "rayleigh-ritz"),
               description="what a pass does: stochastic (auto, the default), the paper's KHA steps row by row with "
                           "the gains; rayleigh-ritz, the deterministic limit of a KHA pass (its update summed over "
                           "the pass: a block power step, made orthonormal; what the default solver ritz runs), which "
                           "also measures the residual of the components served before it, and takes no gain")
GUARDS = Param("guards", int, None, low=0, high=1024,
               description="vectors the rayleigh-ritz passes iterate beside the served ones, so that the served "
                           "converge where the spectrum has no gap after them (default: min(max(n_components, 8), "
                           "32) after a subset or nystrom start, within the start's span; 0: none)")
INIT_SIZE = Param("init_size", int, None, low=1,
                  description="rows in the subset of init=subset, between n_components and the data's rows "
                              "(default min(rows, max(10 n_components, 1000)), capped by memory), or the "
                              "landmarks of init=nystrom (default: the nystrom solver's, or max(256, 8 n_components) "
                              "where init auto chose it); unused by the other starts")


#: The smallest tol at which ``kernel_precision: auto`` takes float32 tiles: their rounding (about 1e-7 per
#: entry) leaves the served excess error near 1e-8, within the 1e-6 that a tol of 1e-3 promises
#: (bench/results/time_to_accuracy.json, "default float32"), not within what a tighter tol promises.
FLOAT32_TOL = 1e-3
#: The largest kernel spread (`kpca.sampled_kernel.kernel_spread`: the kernel's scale over K''s) at which
#: ``auto`` takes float32: K' then has at least 1/100 of the kernel's scale, so float32's 1e-7 relative
#: rounding of a kernel value is at most about 1e-5 of K''s entries (issue 51: a width 30 times the
#: median distance has a spread near 2e3, and float32 could not resolve it).
FLOAT32_SPREAD = 100.0


def auto_precision(params: dict, spread: float | None = None, kernel=None) -> tuple[str, str]:
    """``kernel_precision`` ``auto`` of resolved KHA parameters, and why: float32 for Rayleigh-Ritz passes
    from a Nystrom start with ``tol >= FLOAT32_TOL`` (they take the plain power step over float32 tiles,
    `kpca.solvers._rayleigh_ritz`) of a distance kernel (computed from centred rows, `kpca.rows`: an
    offset does not reach them; a dot-product kernel's products sum its values in float32 too, whose
    eigenvalues then carry about 1e-6 of their size) on data whose kernel ``spread`` is at most
    `FLOAT32_SPREAD` (or not measured yet: before any row is read), float64 for everything else: an exact
    (subset) start, the paper's stochastic passes (`make paper`'s experiments), ``tol`` 0 or a tighter
    tol, a dot-product kernel, a spread float32 cannot resolve. O(1)."""
    if not (params["update"] == "rayleigh-ritz" and params["init"] == "nystrom"
            and (params["tol"] or 0) >= FLOAT32_TOL):
        return "float64", ("auto: float32 runs only the Rayleigh-Ritz passes from a Nystrom start at a tol of 1e-3 "
                           "or more")
    if kernel is not None and not kernel.kernel.radial:
        return "float64", f"auto: float32 runs only distance kernels (from centred rows), not {kernel.type}"
    if spread is not None and not spread <= FLOAT32_SPREAD:
        return "float64", (f"auto: on a sample of the rows the kernel's largest value is {spread:.3g} times the mean "
                           f"diagonal of K' (float32 resolves at most {FLOAT32_SPREAD:g} times)")
    measured = "" if spread is None else (f" (on a sample of the rows the kernel's largest value is {spread:.3g} "
                                          "times the mean diagonal of K')")
    return "float32", f"auto: float32 tiles resolve this kernel matrix at the tol{measured}"


def resolve(params: dict, context, *, gain_scale: float | None) -> dict:
    """The start (``init`` auto: exact where the subset holds every row, else the streamed Nystrom start),
    the passes (``update`` auto: a KHA name's stochastic steps; ``ritz``, which has no ``update``:
    Rayleigh-Ritz passes, with guard vectors and the default ``tol``), the kernel precision, and gains
    from the data: a user's eta0 and mu unchanged, else the scale-free defaults of `kpca.defaults` for the
    solver's ``gain_scale`` (smaller after the warm start; None: a solver without gains); checks
    ``init_size`` against the data. Cost O(1)."""
    try:
        if params["init"] not in REDUCED_INITS:
            check_init(params["init"], params["init_size"], context.n_components, context.n_rows)
    except ValueError as exc:
        field, _, message = str(exc).partition(": ")
        raise ParamError(field, message) from None
    out = dict(params)
    if out["init"] == "nystrom":  # the landmarks' span holds the start, as the subset's does
        out["init_size"] = check_centres("init_size", out["init_size"], context)
    elif out["init"] == "rskpca" and out["init_size"] is not None:
        raise ParamError("init_size", "sets the rows of init 'subset' or the landmarks of init 'nystrom'; "
                                      "init 'rskpca' takes its centres from the shadow estimate")
    r, l = context.n_components, context.n_rows
    if out["init"] == "auto":  # exact where the subset holds every row, else the streamed Nystrom start
        size = default_init_size(r, l) if out["init_size"] is None else out["init_size"]
        out["init"] = "subset" if size >= l else "nystrom"
        if out["init"] == "nystrom":  # the passes finish what a few landmarks start: they cost l m^2
            if out["init_size"] is None:
                out["init_size"] = min(l, context.exact_limit, max(START_LANDMARKS, 8 * r))
            out["init_size"] = check_centres("init_size", out["init_size"], context)
    if out["init"] == "subset" and out["init_size"] is None:
        out["init_size"] = default_init_size(r, l)
    if out.get("update", "rayleigh-ritz") == "auto":  # a KHA name runs its paper's rule; ``ritz`` has no choice
        out["update"] = "stochastic"
    out.setdefault("update", "rayleigh-ritz")
    if out["tol"] is None and out["update"] == "rayleigh-ritz":
        out["tol"] = defaults.RESIDUAL_TOL
    if out["kernel_precision"] == "auto":
        out["kernel_precision"], out["kernel_precision_reason"] = auto_precision(out, context.kernel_spread,
                                                                                 context.kernel)
    if out["update"] != "rayleigh-ritz" or out["init"] not in ("subset", "nystrom"):
        out["guards"] = 0  # only a start that knows the leading directions makes them
    else:
        span = min(l, int(out["init_size"]))
        out["guards"] = guard_count(r, span) if out["guards"] is None else max(0, min(int(out["guards"]), span - r))
    if context.mean_diagonal is not None and gain_scale is not None:
        s, init, m = context.mean_diagonal, out["init"], out["init_size"]
        if out["eta0"] is None:
            out["eta0"] = defaults.default_eta0(gain_scale, s, init, l, m)
        if "mu" in out and out["mu"] is None:
            out["mu"] = defaults.default_mu(s, init, l, m)
    return out


def start(rows, n_components: int, params: dict, *, name: str) -> KHAState:
    """Initial state (Algorithm 1, step 1) over ``rows`` (a row source with its centring set).

    ``init="random"`` (the paper's algorithm): ``A_1`` is Gaussian on a random
    subset S of ``s = min(l, max(64, 4 r))`` columns and zero elsewhere, the
    sparse start that seed 000 suggests: then ``A_1 K' = A_1[:, S] K'[S, :]``
    costs s kernel rows instead of l (step 1e in O(r s l)). It is scaled so
    that the components' mean squared feature-space norm is 1/r, whatever
    the kernel's scale: with the scale-free gains of `kpca.defaults` a kernel
    multiplied by c > 0 gives ``A / sqrt(c)`` at every step, the same
    components and the same excess error (eq. 22). ``init="subset"`` (a warm start, `kpca.solvers._warm`):
    ``A_1`` holds the r leading principal components of the whole data set
    within the span of m random points (m = ``init_size``), at the cost of m
    kernel rows, O(m^2 l + m^3) time and m l memory; with m = l it is exact
    kernel PCA. ``init="nystrom"`` or ``"rskpca"``: that solver's components,
    extended to all rows (`kpca.solvers._extend`; a reduced fit plus one pass
    of kernel rows). ``params`` are resolved (`resolve`); ``name`` is the solver's.
    """
    r, l, seed = int(n_components), int(rows.n_rows), int(params["seed"])
    solver, init = name, params["init"]
    dtype = np.float64
    extra: dict = {"init": init}
    guards = int(params.get("guards") or 0)
    if init == "subset":
        A, AK, m = subset_start(rows.block, r + guards, l, seed, params["init_size"], dtype)
        extra["init_size"] = m
        if m == l:  # exact kernel PCA: its residual is rounding
            extra["residual"] = 0.0
    elif init in REDUCED_INITS:
        A, AK, residual, note = extended_start(init, rows, r + guards, seed, landmarks=params.get("init_size"),
                                               served=r)
        if init == "nystrom":
            extra["init_size"] = int(params["init_size"])
        if residual is not None:
            extra["residual"] = residual
        if note:
            extra["solver_note"] = note
    else:
        rng = np.random.default_rng([seed, 2**31])
        s = min(l, max(_INIT_COLUMNS, 4 * r))
        cols = np.sort(rng.choice(l, size=s, replace=False))
        A = np.zeros((r, l), dtype=dtype)
        A[:, cols] = rng.normal(size=(r, s))
        AK = np.ascontiguousarray(A[:, cols] @ rows.block(cols), dtype=dtype)
        norm2 = float(np.mean(np.einsum("ij,ij->i", AK, A)))  # diag(A K' A^T), scales with the kernel
        if not norm2 > 0 or not np.isfinite(norm2):
            raise Degenerate("the random start has no variance in feature space: the sampled rows are all "
                             "the same point there (all rows equal, or a kernel that maps them to one point)")
        scale = 1.0 / np.sqrt(r * norm2)
        A *= scale
        AK *= scale
    gains = {k: float(params[k]) for k in ("eta0", "mu", "xi") if params.get(k) is not None}
    gains.setdefault("eta0", 0.0)  # unresolved before the centring (`centres_at_start`): set by regain
    norm_limit = NORM_LIMIT * max(1.0, float(np.max(np.einsum("ij,ij->i", AK, A))))
    if guards and A.shape[0] > r:  # iterated beside the served r (`kpca.solvers._rayleigh_ritz`): as many as the
        extra.update(guard_A=A[r:], guard_AK=AK[r:])  # start's span holds beside them
    if A.shape[0] < r:  # the rows span fewer directions than r: the others are served as zero components
        A, AK = (np.vstack([M, np.zeros((r - M.shape[0], l), dtype=M.dtype)]) for M in (A, AK))
    A, AK = A[:r], AK[:r]
    own = getattr(rows, "centering", None)  # a row source over K' itself (bench._stepwise.DenseRows) has none
    centering = {} if own is None else own.to_state()
    state = KHAState(solver=solver, A=A, AK=AK, gain=np.full(r, gains["eta0"]),
                     eigenvalues=eigenvalue_estimates(A, AK), t=0, pass_=0, position=0, seed=seed, n_rows=l,
                     norm_limit=norm_limit, update=params["update"], centering=centering, eta0=gains["eta0"],
                     mu=gains.get("mu"), xi=gains.get("xi"), **extra)
    if solver == "kha-smd":
        state.B = np.zeros_like(A)
        state.BK = np.zeros_like(A)  # B K'; kept like AK so that B k_s = BK[:, p_s]
        state.rho = np.ones(r, dtype=dtype)  # Algorithm 1, step 1b
    return state


def restore(state: KHAState, rows, block_size: int) -> KHAState:
    """``state`` with every array the updates need, computing what a saved state lacks.

    KHA-SMD states keep ``BK = B K'`` (so that the blocked update reads ``B k_s``
    as ``BK[:, p_s]``); one saved before it was kept (checkpoints written
    before 2026-11-26) gets it here from one sweep of the kernel rows
    (``rows`` a row source), ``B K' = sum_c B[:, c] K'[c, :]``. Any other
    state is returned as it is (a checkpoint's entries read as the state,
    `kpca.solvers.as_state`). Cost for such a state: l kernel rows in
    blocks of ``block_size`` plus ``2 r l^2`` flops.
    """
    state = as_state(state, KHAState)
    if not state.smd or state.BK is not None:
        return state
    if state.B is None:
        raise ValueError("state: a kha-smd state keeps B; this one lacks it")
    B, l = state.B, int(state.n_rows)
    BK = np.zeros_like(B)
    for a in range(0, l, block_size):
        idx = np.arange(a, min(a + block_size, l))
        rows.left_product(idx, B[:, idx], BK)
    return state.replace(BK=BK)


def centres_at_start(params: dict) -> bool:
    """Whether the start centres the rows itself: the Nystrom start, whose extension to every row is the
    only full pass and computes the centring from the same kernel tiles (`kpca.solvers._extend`). O(1)."""
    return params["init"] == "nystrom"


def regain(state: KHAState, params: dict) -> KHAState:
    """The state with eta0 (and mu) of ``params`` and the base gains they give (`begin_pass` recomputes
    KHA/et's and KHA-SMD's at the next pass): for a fit continued on appended rows, and for a start
    that centred the rows itself (`centres_at_start`), whose gains needed that centring. O(r)."""
    eta0 = float(params.get("eta0") or 0.0)  # ``ritz`` takes no gain
    state = state.replace(eta0=eta0, gain=np.full(state.coefficients()[0].shape[0], eta0))
    if params.get("mu") is not None:
        state.mu = float(params["mu"])
    return state


def begin_pass(state: KHAState) -> KHAState:
    """Once per pass: re-estimate eigenvalues (eq. 13) and set the base gains (eq. 12).

    KHA and KHA-t keep the scalar gain eta0. Returns a new state. O(r l).
    """
    return with_estimates(state, eigenvalue_estimates(*state.coefficients()))


def with_estimates(state: KHAState, lam: np.ndarray) -> KHAState:
    """A new state with the eigenvalue estimates ``lam`` (eq. 13) and, for KHA/et and KHA-SMD, the base
    gains they give (eq. 12); what `begin_pass` and its sharded form set. O(r)."""
    state = state.replace(eigenvalues=lam)
    if state.solver in ("kha-et", "kha-smd"):
        floor = max(float(lam.max()) * 1e-12, 1e-300)
        state.gain = state.eta0 * np.linalg.norm(lam) / np.maximum(lam, floor)
    return state


def step_block(state: KHAState, rows, indices: np.ndarray) -> KHAState:
    """One KHA-family step per row ``K'[indices, :]``, in order; pure (returns a new state).

    The blocked form (`kpca.solvers._blocked`): per row O(r (r + b)) small
    matrix work, and one GEMM with the rows for the block (2 r l flops per
    row, 4 r l for KHA-SMD). ``rows`` is the (b, l) array of rows, or a row
    source whose kernel tiles are multiplied as they are computed. Equals
    the step-by-step reference (``tests/naive.py``) up to rounding.
    """
    return blocked_step_block(state, rows, indices)


def diverged(state: KHAState) -> bool:
    """True if any component norm ``(A K' A^T)_ii`` is non-finite or above the state's ``norm_limit``
    (NORM_LIMIT for states saved before it was kept). O(r l)."""
    A, AK = state.coefficients()
    return beyond_limit(np.einsum("ij,ij->i", AK, A), state)


def norm_limit(state: KHAState) -> float:
    """The divergence guard's bound: the state's ``norm_limit``, NORM_LIMIT for a state saved before it was kept."""
    return float(NORM_LIMIT if state.norm_limit is None else state.norm_limit)


def beyond_limit(norms: np.ndarray, state: KHAState) -> bool:
    """Whether component norms ``diag(A K' A^T)`` are not finite or above `norm_limit` (`diverged`). O(r)."""
    return bool(not np.all(np.isfinite(norms)) or np.any(np.abs(norms) > norm_limit(state)))


def damped(pass_start: KHAState) -> KHAState:
    """The state at the start of a pass with eta0, mu and the gains GAIN_REDUCTION times smaller;
    `Diverged` after MAX_GAIN_REDUCTIONS. ``gain_reductions`` counts the reductions."""
    pass_start = as_state(pass_start, KHAState)  # the sharded passes hand their coordinator's entries
    reductions = int(pass_start.gain_reductions or 0) + 1
    if reductions > MAX_GAIN_REDUCTIONS:
        raise Diverged(
            f"the fit diverged (component norms became non-finite or exceeded "
            f"{norm_limit(pass_start):.3g}) even after "
            f"reducing the gain {MAX_GAIN_REDUCTIONS} times (eta0 is now {pass_start.eta0:.3g}); "
            "retry with a smaller eta0 (and mu for kha-smd), or leave them out to use the defaults"
        )
    state = pass_start.replace(gain_reductions=reductions, eta0=pass_start.eta0 * GAIN_REDUCTION)
    if state.mu is not None:
        state.mu = state.mu * GAIN_REDUCTION
    state.gain = pass_start.gain * GAIN_REDUCTION
    return state


def served_components(state: KHAState):
    """The Rayleigh-Ritz components of the iterate's span (`kpca.solvers._ritz.ritz_components`)."""
    return ritz_components(*state.coefficients())


USED_KEYS = ("eta0", "mu", "xi", "init", "init_size", "gain_reductions", "update", "kernel_precision",
             "kernel_precision_reason")
RITZ_USED_KEYS = tuple(key for key in USED_KEYS if key not in ("eta0", "mu", "xi", "gain_reductions"))


def used(state: KHAState, keys: tuple[str, ...] = USED_KEYS) -> dict:
    """What the fit settled on besides its resolved parameters: the gains it runs with (after any
    reduction by the divergence guard, `damped`, counted in ``gain_reductions``), the start it
    took, and the precision it ran in where a pass moved it to float64 (`kpca.solvers._rounding`, with
    ``kernel_precision_reason``); those of the fields ``keys`` that are set. O(1)."""
    return {key: getattr(state, key) for key in keys if getattr(state, key) is not None}


def gains(state: KHAState) -> np.ndarray:
    """The per-component gains of the current pass (eq. 12; times ``exp(rho)`` for KHA-SMD, eq. 15). O(r)."""
    return state.gain * (np.exp(state.rho) if state.rho is not None else 1.0)


def _kha_solver(name: str, summary: str, own: tuple[Param, ...], gain_scale: float) -> Solver:
    """Register a solver of the family: its name, summary, own parameters and gain scale
    (`kpca.defaults`, *the gain rule*: chosen on digits by bench/convergence.py)."""
    return register(Solver(
        name, summary, params=(*ITERATIVE_PARAMS, ETA0, *own, INIT, INIT_SIZE, UPDATE, GUARDS), shardable=True,
        clusterable=True, refine=rayleigh_ritz_pass,
        gain_scale=gain_scale, start=partial(start, name=name), centres_at_start=centres_at_start,
        step=step_block, begin_pass=begin_pass, restore=restore, regain=regain, diverged=diverged, damped=damped,
        measure=measured_residual,
        resolve=partial(resolve, gain_scale=gain_scale), components=served_components, used=used, gains=gains,
        state_type=KHAState))


_kha_solver("kha", "Kernel Hebbian Algorithm with a constant gain, row by row from the best start; the baseline "
            "the others improve on", (), 0.05)
_kha_solver("kha-t", "KHA with a gain that decays as eta0 l / (t + l) over the steps t", (), 0.5)
_kha_solver("kha-et", "KHA with per-component gains from the eigenvalue estimates; cheap per step, fast on "
            "well-separated spectra", (), 0.1)
_kha_solver("kha-smd", "KHA with gains adapted by stochastic meta-descent: each gain tuned as the fit runs; the "
            "fewest passes of the paper's algorithms", (MU, XI), 0.05)

register(Solver(
    "ritz", "the default: a warm start (the leading components within the span of all rows where they fit, "
            "else of 256 Nystrom landmarks, streamed), then Rayleigh-Ritz passes (the deterministic limit of a "
            "KHA pass: a block power step with guard vectors and LOBPCG's step) until the served components' "
            "relative residual meets tol; no gains",
    params=(*ITERATIVE_PARAMS, INIT, INIT_SIZE, GUARDS), shardable=True, clusterable=True, refine=rayleigh_ritz_pass,
    start=partial(start, name="ritz"), centres_at_start=centres_at_start, step=step_block, begin_pass=begin_pass,
    restore=restore, regain=regain, diverged=diverged, damped=damped, measure=measured_residual,
    resolve=partial(resolve, gain_scale=None), components=served_components,
    used=partial(used, keys=RITZ_USED_KEYS), gains=lambda state: None, state_type=KHAState))
