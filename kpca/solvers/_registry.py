"""The solver registry: a solver is declared once, and every layer reads the declaration.

A `Solver` names its parameters (`kpca.params.Param`: defaults, bounds, a
sentence each), how it starts and steps (iterative solvers, driven pass by
pass by `kpca.driver.run_passes`) or fits in one call (one-shot solvers), and
what a fitted model serves:

* ``"expansion"``: coefficients ``A`` (r x l) over all l training rows, the
  components ``W = A Phi'`` of the centred training data (KHA, exact);
* ``"centres"``: m centres kept in the state (``state["centres"]``, m x n)
  with coefficients over them, so that serving never opens the training
  rows (reduced-set and landmark solvers).

The service's request schema, the workers' fit and serving, the
scikit-learn estimator and the documentation all read `SOLVERS`; a new
solver is its own module plus one `register` call.

A solver's state is a plain dict of numpy arrays and scalars (what
`store.CheckpointStore` saves): ``solver`` (its name), ``n_rows``, the
centring (`kpca.rows.Centering.to_state`), and what the solver keeps.
The driver owns ``pass``, ``position`` and ``t`` of iterative states.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kpca import defaults
from kpca.kernels import KernelSpec
from kpca.model import KernelModel
from kpca.params import Param, ParamError, check_params, with_defaults
from kpca.rows import KernelRows
from kpca.solvers._ritz import rank_cut

SERVES = ("expansion", "centres")

# Parameters many solvers share; a solver lists those it reads in its own `params`.
PASSES = Param("passes", int, defaults.PASSES, low=1, high=10_000,
               description="passes over the data (an iterative fit's length)")
SEED = Param("seed", int, 0, low=0, high=2**63 - 1, description="seed of every random choice of the fit")
BLOCK_SIZE = Param("block_size", int, None, low=1, high=4096,
                   description="rows per block of a pass (default: 1024, or all rows if fewer)")
TOL = Param("tol", float, None, low=0.0,
            description="stop early once the per-pass convergence figure falls below this (0: run every pass; "
                        "default: the solver's)")
KERNEL_PRECISION = Param(
    "kernel_precision", str, "float64", choices=("float64", "float32"),
    description="precision of the kernel tiles (GEMM and exp) and of the solver's product with them; centring "
                "and the solver state stay float64. float32 is faster, at about 1e-7 relative error per kernel "
                "entry")
AUTO_KERNEL_PRECISION = Param(
    "kernel_precision", str, "auto", choices=("auto", "float64", "float32"),
    description="precision of the kernel tiles (GEMM and exp) and of the solver's product with them; centring "
                "and the solver state stay float64. float32 is faster, at about 1e-7 relative error per kernel "
                "entry. auto: float32 for the Rayleigh-Ritz passes from a Nystrom start at a tol of 1e-3 or "
                "more (the default fit of more than 1000 rows) of a distance kernel (gaussian, laplacian, computed "
                "from centred rows) where the data allow it (K' within 1/100 of the kernel's scale on a sample "
                "of the rows: not a width far above the rows' distances), float64 otherwise; params_used says which "
                "ran and why, and a float32 fit that cannot resolve its tol moves to float64")
ITERATIVE_PARAMS = (PASSES, SEED, BLOCK_SIZE, TOL, AUTO_KERNEL_PRECISION)


@dataclass(frozen=True)
class FitContext:
    """What a solver may know of the data when it resolves its parameters.

    Attributes
    ----------
    n_rows : int
        l, rows of the training data.
    n_components : int
        r.
    mean_diagonal : float or None
        ``trace(K') / l`` (`kpca.rows.Centering.mean_diagonal`) once the
        centring pass ran; None when parameters are checked before it (at
        model creation).
    exact_limit : int
        Largest l whose l x l kernel matrix a fit may form (and largest m
        whose m x m matrix a solver over m centres may form); a setting of
        the job (`kpca.defaults.EXACT_LIMIT` unless the service says
        otherwise), not of the solver.
    kernel : kpca.kernels.KernelSpec or None
        The model's kernel, where the caller knows it (its widths may still
        be ``"auto"``): a solver may refuse a parameter the kernel cannot
        serve (the shadow estimate of a kernel without a width). None: not
        known yet; the fit sees it in ``rows.kernel``.
    kernel_spread : float or None
        How far K' is below the kernel's scale (`kpca.sampled_kernel.kernel_spread`), from a sample
        of the rows: what ``kernel_precision`` ``auto`` decides by. None before any row is read.
    """

    n_rows: int
    n_components: int
    mean_diagonal: float | None = None
    exact_limit: int = defaults.EXACT_LIMIT
    kernel: Any = None
    kernel_spread: float | None = None


def _identity(state: dict, *args) -> dict:
    return state


def _never(state: dict) -> bool:
    return False


def stored_components(state: dict):
    """``(A, AK, eigenvalues)`` kept in the state as they are served (one-shot solvers).

    ``AK`` defaults to ``diag(eigenvalues) A``, which holds when the rows of
    ``A`` are eigenvectors of K' scaled to unit feature-space norm (the
    exact solver's, and any solver that diagonalises K' on its span).
    """
    A = np.asarray(state["A"])
    eigenvalues = np.asarray(state["eigenvalues"], dtype=np.float64)
    AK = state.get("AK")
    return A, (eigenvalues[:, None] * A if AK is None else np.asarray(AK)), eigenvalues


USED_PREFIX = "used_"


def used_params(state: Mapping[str, Any]) -> dict:
    """The values a one-shot fit settled on, kept in its state as ``used_<name>``: ``{name: value}``,
    reported beside the resolved parameters in ``params_used``. Cost O(entries of the state)."""
    return {key[len(USED_PREFIX):]: value for key, value in state.items() if key.startswith(USED_PREFIX)}


def _no_gains(state: Mapping[str, Any]) -> None:
    return None


@dataclass(frozen=True)
class Solver:
    """A solver's declaration.

    Attributes
    ----------
    name : str
        What requests call it (``"kha-smd"``).
    summary : str
        One sentence: what it computes and when to choose it.
    params : tuple of Param
        Every parameter it reads (shared ones such as `PASSES` included).
    serves : {"expansion", "centres"}
        See the module docstring.
    dense : bool
        Whether the fit forms the l x l kernel matrix: then it is limited to
        ``context.exact_limit`` rows.
    shardable : bool
        Whether its passes can run over row shards on several workers
        (`kpca.sharded.passes.run_sharded_passes`: the KHA family).
    clusterable : bool
        Whether spectral clustering may take its eigenvectors of L
        (`kpca.clustering`): it fits the leading eigenvectors of any
        positive semi-definite row source and centres the rows itself.
    gain_scale : float or None
        Iterative solvers with a gain: the dimensionless ``eta0 *
        trace(K')/l`` of the default gain (`kpca.defaults`, *the gain
        rule*); None for solvers without one.
    fit : callable, optional
        One-shot solvers: ``fit(rows, n_components, params, context, report=None) -> state``.
        ``rows`` is a `kpca.rows.KernelRows` without centring; the state
        carries its own (`kpca.rows.Centering.to_state`). A fit that takes
        iterations calls ``report(Iteration(...))`` after each; a True answer
        asks it to stop (it raises `kpca.errors.Stopped`). Values the fit
        settles on from the data (a number of centres found by a density
        estimate) go in the state as ``used_<name>`` entries, which
        ``params_used`` reports as ``<name>`` (`used`).
    start : callable, optional
        Iterative solvers: ``start(rows, n_components, params) -> state``
        with ``rows.centering`` set (Algorithm 1, step 1 for KHA), or unset
        where ``centres_at_start(params)`` says the start centres the rows in
        its own pass (then the state's gains are set afterwards, by ``regain``).
    centres_at_start : callable
        ``centres_at_start(params) -> bool`` (default False): see ``start``.
    step : callable, optional
        Iterative solvers: ``step(state, rows, indices) -> state``, one step
        per row of the block, pure.
    begin_pass : callable
        ``begin_pass(state) -> state`` once at the start of every pass.
    refine : callable, optional
        ``refine(state, rows, block_size, tol=None) -> state``: a whole deterministic pass (``tol``, the
        fit's, for a pass that checks its own figure against it), run instead of the
        steps when ``state["update"] == "rayleigh-ritz"`` (the KHA family's Rayleigh-Ritz pass,
        `kpca.solvers._rayleigh_ritz`); it sets ``state["residual"]``, the figure a ``tol`` stops on.
    restore : callable
        ``restore(state, rows, block_size) -> state``: a saved state made
        ready to step (arrays an older checkpoint lacks).
    regain : callable
        ``regain(state, params) -> state``: the state with the gains of
        ``params``, resolved anew for the data it now covers (rows were
        appended: a warm start no longer covers them all).
    diverged, damped : callable
        The driver's divergence guard: ``diverged(state) -> bool`` after
        every block; ``damped(pass_start) -> state`` restarts the pass with
        smaller gains (or raises `kpca.driver.Diverged`).
    resolve : callable
        ``resolve(params, context) -> params`` fills the defaults that depend
        on the data (gains from ``context.mean_diagonal``) and checks values
        against it, raising `kpca.params.ParamError` naming the parameter
        (``"init_size"``; `check` adds the caller's prefix), or what is not
        a parameter as it is (``"solver"`` for data the solver cannot take,
        ``"n_components"``).
    components : callable
        ``components(state) -> (A, AK, eigenvalues)`` that a model serves:
        coefficients (r, l or m), their image ``A K'`` and the variances,
        descending.
    used : callable
        ``used(state) -> dict``: the values the fit settled on that its
        resolved parameters do not say (the gains after a reduction, the
        start actually taken, a number of centres found), reported with them
        as ``params_used``. Default: the state's ``used_<name>`` entries
        (`used_params`).
    gains : callable
        ``gains(state) -> ndarray (r,) or None``: the per-component gains a
        fit's progress reports after each pass (None: the solver has none).
    model : callable, optional
        For a model that is not a kernel expansion (autoencoder KPCA):
        ``model(state, rows, kernel) -> served``, an object with ``project(X)``
        (m, r), ``reconstruct(X)`` (m, n, its own decoder), ``n_components``,
        ``n_features``, ``eigenvalues`` ((r,) or None) and ``figure(X) -> (metric,
        value)``, its convergence figure on training rows X. Default: a
        `kpca.model.KernelModel` of `components`.
    measure : callable, optional
        ``measure(state, rows, block_size) -> state``: the served components' convergence figure
        (``residual``) measured at the end of a fit whose passes measure none (the KHA family's
        stochastic steps, `kpca.solvers._rayleigh_ritz.measured_residual`), so that ``tol`` is judged by
        it (`kpca.fitting.PreparedFit.run`).
    audit : callable, optional
        ``audit(state, rows) -> list[str]``: what a fitted model should say of its own accuracy where it
        is far from what it could be, with the figure (autoencoder KPCA's reconstructions against the
        rows' mean, rskpca's captured variance against an estimate of the best), measured at the end of
        a fit on the training rows (`kpca.fitting.PreparedFit.notes`). Default: nothing.
    """

    name: str
    summary: str
    params: tuple[Param, ...] = ()
    serves: str = "expansion"
    dense: bool = False
    shardable: bool = False
    clusterable: bool = False
    gain_scale: float | None = None
    fit: Callable | None = None
    start: Callable | None = None
    centres_at_start: Callable = _never
    step: Callable | None = None
    begin_pass: Callable = _identity
    refine: Callable | None = None
    restore: Callable = _identity
    regain: Callable = _identity
    diverged: Callable = _never
    damped: Callable | None = None
    resolve: Callable = _identity
    components: Callable = stored_components
    used: Callable = used_params
    gains: Callable = _no_gains
    model: Callable | None = None
    measure: Callable | None = None
    audit: Callable | None = None

    def __post_init__(self):
        if self.serves not in SERVES:
            raise ValueError(f"serves: must be one of {SERVES}, got {self.serves!r}")
        if (self.fit is None) == (self.step is None or self.start is None):
            raise ValueError(f"solver {self.name!r}: declare either fit (one-shot) or start and step (iterative)")

    @property
    def iterative(self) -> bool:
        """Whether the solver runs pass by pass (start and step) rather than in one call."""
        return self.step is not None

    def param(self, name: str) -> Param | None:
        """The declared parameter ``name``, or None."""
        return next((p for p in self.params if p.name == name), None)

    def check(self, params: Mapping[str, Any], context: FitContext, where: str = "params") -> dict:
        """The parameters a user gave, checked (unknown names, types, bounds, and what the data allows).

        Returns the given values converted; defaults are not filled in (so a
        record keeps what was asked). Raises `kpca.params.ParamError` naming
        ``where.<name>`` (``where`` empty: the bare name), ``n_components``
        or ``solver`` (a dense solver on too many rows). Cost O(parameters).
        """
        return self._checked(params, context, where)[0]

    def resolved(self, params: Mapping[str, Any], context: FitContext, where: str = "params") -> dict:
        """Every parameter's value for a fit: the given ones, else the defaults, those that depend on the
        data resolved from ``context`` (what a model reports as ``params_used``). Errors as `check`.
        Cost O(parameters)."""
        return self._checked(params, context, where)[1]

    def _checked(self, params: Mapping[str, Any], context: FitContext, where: str) -> tuple[dict, dict]:
        if not 1 <= context.n_components < context.n_rows:
            raise ParamError("n_components", f"must be between 1 and {context.n_rows - 1}, below the data's "
                                             f"{context.n_rows} rows, got {context.n_components}")
        if self.dense and context.n_rows > context.exact_limit:
            raise ParamError("solver", f"{self.name} forms the l x l kernel matrix and is limited to "
                                       f"{context.exact_limit} rows (this data set has {context.n_rows}); use an "
                                       "iterative solver such as kha-smd")
        given = check_params(self.params, params, where, f"solver {self.name}")
        values = with_defaults(self.params, given)
        if "block_size" in values and values["block_size"] is None:
            values["block_size"] = defaults.default_block_size(context.n_rows)
        try:
            return given, self.resolve(values, context)
        except ParamError as exc:
            field = f"{where}.{exc.field}" if where and self.param(exc.field) is not None else exc.field
            raise ParamError(field, exc.reason) from None


@dataclass(frozen=True)
class Iteration:
    """What a one-shot fit reports after an iteration: ``iteration`` of at most ``iterations``, the
    current eigenvalue estimates (descending), and a convergence figure ``value`` named ``metric``
    (``residual`` for an eigensolver: ``max_i ||K' v_i - lambda_i v_i|| / lambda_i``)."""

    iteration: int
    iterations: int
    eigenvalues: np.ndarray
    metric: str
    value: float | None


SOLVERS: dict[str, Solver] = {}


def register(solver: Solver, replace: bool = False) -> Solver:
    """Add ``solver`` to `SOLVERS` (``replace`` to redefine a name) and return it."""
    if solver.name in SOLVERS and not replace:
        raise ValueError(f"a solver named {solver.name!r} is already registered")
    SOLVERS[solver.name] = solver
    return solver


def get_solver(name: str) -> Solver:
    """The registered solver ``name``, or `kpca.params.ParamError` on ``solver`` listing the known ones."""
    solver = SOLVERS.get(name)
    if solver is None:
        raise ParamError("solver", f"unknown solver {name!r}; choose one of {', '.join(SOLVERS)}")
    return solver


def served_model(state: dict, rows: KernelRows | None = None, kernel: KernelSpec | None = None):
    """The model a solver state serves (`kpca.solvers.Solver.components`).

    A solver with a model of its own (`kpca.solvers.Solver.model`) builds it.
    For a solver that serves ``"expansion"`` the components are expanded
    over ``rows``, the training data (required). For one that serves
    ``"centres"`` they are expanded over the centres kept in the state, so
    the training data is never read: ``rows`` may be None, and ``kernel``
    (default ``rows.kernel``) names the kernel. The centring is the state's
    (`kpca.rows.Centering.to_state`); ``rows`` gets it. Cost: the solver's
    ``components`` (O(r^2 l) for the Ritz components of the KHA family).
    """
    solver = get_solver(state["solver"])
    if solver.model is not None:
        return solver.model(state, rows, kernel if kernel is not None else rows.kernel)
    if solver.serves == "centres":
        rows = KernelRows(np.asarray(state["centres"]), kernel if kernel is not None else rows.kernel)
    elif rows is None:
        raise ValueError(f"rows: a {solver.name} model is expanded over its training rows; pass them")
    if "centering_column_means" in state:
        rows.restore_centering(state)
    A, AK, eigenvalues = served_components(state)
    return KernelModel(rows=rows, A=A, AK=AK, eigenvalues=eigenvalues)


def served_components(state: dict):
    """``(A, AK, eigenvalues)`` a state serves: its solver's ``components``, ordered by variance, with
    every component past the numerical rank a zero row of variance 0 (`kpca.solvers._ritz.rank_cut`),
    whichever solver made them. What `served_model` and spectral clustering read. Cost: the solver's
    ``components`` plus O(r l)."""
    A, AK, eigenvalues = get_solver(state["solver"]).components(state)
    return rank_cut(np.asarray(A), np.asarray(AK), eigenvalues)


def rank_warnings(eigenvalues) -> list[str]:
    """What a user should read about served components without variance (eigenvalues exactly 0, as
    `served_components` serves those past the numerical rank), naming them; [] if there are none.
    O(r)."""
    lam = np.asarray(eigenvalues, dtype=np.float64)
    empty = np.flatnonzero(lam == 0)
    if empty.size == 0:
        return []
    which = f"component {empty[0] + 1}" if empty.size == 1 else f"components {empty[0] + 1} to {empty[-1] + 1}"
    found = lam.size - empty.size
    return [f"{which} ({empty.size} of the {lam.size}) carry no variance: the fit found only {found} directions in "
            f"feature space (the data span no more, or the fit collapsed them); these project every point to 0 and "
            f"their eigenvalues are 0. Fit at most {found} components"]
