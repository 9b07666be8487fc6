"""One way to prepare and run a fit, whoever asks for it: the estimator, spectral clustering, and the
workers' one-process and sharded jobs all call `prepare_fit`.

A fit is asked for as a `FitRequest` (solver, r, the parameters a user gave, and the exact limit
of the job that runs it). Preparing it over a row source (`kpca.rows.KernelRows`,
`kpca.affinity.AffinityRows`) is, in this order:

1. check the given parameters against the solver's declaration and the data's size
   (`kpca.solvers.Solver.check`), before any row is read;
2. resolve the kernel's ``"auto"`` widths from the data (`kpca.rows.KernelRows.resolve_kernel`), and measure
   how far K' is below the kernel's scale on a sample (`kpca.sampled_kernel.kernel_spread`), for a
   ``kernel_precision: auto`` to decide by;
3. for an iterative solver: centre the rows (the centring pass, or the caller's, e.g. a sharded
   one), or take the centring of the checkpoint it resumes from, extending the checkpoint to rows
   appended since (seed 002 appendix A, `kpca.streaming.extend_state`);
4. resolve the parameters that depend on the data (`kpca.solvers.Solver.resolved`: the gains from
   ``trace(K')/l``, ``kernel_precision`` ``auto``), and set the rows' precision to the resolved one
   (before the centring pass of a new fit, so that the centring, the start and the passes all run in it);
5. start (`kpca.solvers.Solver.start`: Algorithm 1, step 1 for KHA), or give a grown checkpoint the
   gains of a start that knows nothing of the new rows (`kpca.solvers.Solver.regain`).

`PreparedFit.run` then runs the passes (`kpca.driver.run_passes`) or the one-shot fit; a sharded job
runs the same prepared state through `kpca.sharded.passes.run_sharded_passes` instead. `PreparedFit.used`
is what a fit reports as ``params_used``: the resolved parameters, what the solver settled on
(`kpca.solvers.Solver.used`) and the rows it fits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kpca import defaults
from kpca.driver import PassHooks, run_passes
from kpca.rows import Centering
from kpca.sampled_kernel import kernel_spread, negative_share
from kpca.solvers import FitContext, IterativeState, Solver, SolverState, as_state, get_solver
from kpca.streaming import extend_state

__all__ = ["FitRequest", "PreparedFit", "prepare_fit"]


@dataclass(frozen=True)
class FitRequest:
    """What a fit is asked for, before any data is read.

    Attributes
    ----------
    solver : str
        A solver of `kpca.solvers.SOLVERS`.
    n_components : int
        r.
    params : mapping
        The parameters the user gave (checked or not); defaults are filled in by `prepare_fit`.
    exact_limit : int
        Largest l whose l x l kernel matrix the job may form (a dense solver's limit, and the
        exact convergence figure's); a setting of the job, not of the solver.
    """

    solver: str
    n_components: int
    params: Mapping[str, Any] = field(default_factory=dict)
    exact_limit: int = defaults.EXACT_LIMIT

    def context(self, n_rows: int, kernel=None, mean_diagonal: float | None = None,
                kernel_spread: float | None = None) -> FitContext:
        """What the solver may know of data with ``n_rows`` rows (`kpca.solvers.FitContext`). O(1)."""
        return FitContext(n_rows=int(n_rows), n_components=int(self.n_components), mean_diagonal=mean_diagonal,
                          exact_limit=int(self.exact_limit), kernel=kernel, kernel_spread=kernel_spread)

    def checked_params(self, n_rows: int, kernel=None, where: str = "params") -> dict:
        """The given parameters checked against the solver and data of ``n_rows`` rows (unknown names,
        types, bounds, r below the rows, a dense solver's limit), converted, defaults NOT filled in:
        what a record keeps as asked. `kpca.params.ParamError` naming ``where.<name>``,
        ``n_components`` or ``solver``. Cost O(parameters)."""
        return get_solver(self.solver).check(self.params, self.context(n_rows, kernel), where)

    def kernel_precision(self, n_rows: int, where: str = "params", kernel_spread: float | None = None) -> str:
        """The precision the fit's kernel tiles compute in over data of ``n_rows`` rows: its resolved
        ``kernel_precision`` (``auto`` resolved by the solver, `kpca.solvers._kha.auto_precision`, from the
        rows' ``kernel_spread`` where it is known), float64 for a solver without the parameter: what the
        shards of a sharded fit open their rows in, and what the service checks a kernel's range in, before
        any row is read (`prepare_fit` sets it on the coordinator's rows itself). Errors as
        `checked_params`. Cost O(parameters)."""
        solver = get_solver(self.solver)
        if solver.param("kernel_precision") is None:
            return "float64"
        context = self.context(n_rows, kernel_spread=kernel_spread)
        return solver.resolved(self.params, context, where)["kernel_precision"]


@dataclass(frozen=True)
class PreparedFit:
    """A fit ready to run over the rows it was prepared on (`prepare_fit`).

    Attributes
    ----------
    solver : kpca.solvers.Solver
    request : FitRequest
    params : dict
        Every parameter's value, defaults and data-dependent values resolved.
    context : kpca.solvers.FitContext
        The data as the solver saw it (rows, r, ``trace(K')/l``, the resolved kernel).
    state : kpca.solvers.IterativeState or None
        Iterative solvers: the state the passes start from (a new start or the resumed checkpoint);
        None for one-shot solvers.
    started : bool
        Whether ``state`` is a new start (not a resumed checkpoint).
    data_notes : tuple of str
        What preparing the fit found of the data that a user should read with the model (an indefinite
        kernel on a sample of the rows, `kernel_notes`).
    """

    solver: Solver
    request: FitRequest
    params: dict
    context: FitContext
    state: IterativeState | None = None
    started: bool = False
    data_notes: tuple[str, ...] = ()

    def run(self, rows, hooks: PassHooks | None = None, passes: int | None = None,
            report: Callable | None = None) -> tuple[SolverState, bool]:
        """Run the fit over ``rows``: ``(state, stopped)``.

        Iterative solvers run passes ``state.pass_ .. passes - 1`` (default ``params["passes"]``;
        `kpca.driver.run_passes` with ``hooks`` and the fit's ``tol``: the state comes back marked
        ``converged`` where it stopped on it), then, where the passes measure no figure (stochastic
        steps), the solver's ``measure`` gives the served components theirs (one pass more); ``stopped``
        is True when a hook asked to stop.
        One-shot solvers fit in one call, with ``report`` after each iteration (a True answer raises
        `kpca.errors.Stopped`); an expansion over the rows leaves its centring on ``rows``. Cost: the
        solver's.
        """
        if self.solver.iterative:
            if self.state is None:
                raise ValueError("state: an iterative fit runs from a start state; prepare it with prepare_fit")
            state, stopped = run_passes(rows, self.state, self.params["passes"] if passes is None else passes,
                                        self.params["block_size"], hooks, tol=self.params.get("tol"))
            if not stopped and self.solver.measure is not None and not state.refines:
                state = self.solver.measure(state, rows, self.params["block_size"])  # the served figure
            return state, stopped
        fit = self.solver.fit
        assert fit is not None  # a solver that is not iterative is one-shot: Solver.__post_init__ requires its fit
        # a plugin's fit may return its state as the checkpoint's plain entries: read it as its family's record
        fitted = as_state(fit(rows, self.context.n_components, self.params, self.context, report=report))
        if self.solver.serves == "expansion" and fitted.centering:
            rows.restore_centering(fitted.centering)
        return fitted, False

    def unmet_tol(self, state: SolverState) -> list[str]:
        """The warning of an iterative fit that ended its passes with its convergence figure (the relative
        residual, `kpca.solvers._rayleigh_ritz`) still above its ``tol``: a request that names an accuracy
        gets it or is told why not; the paper's stochastic passes, which run every pass unless given a tol,
        are judged by the default one (`kpca.defaults.RESIDUAL_TOL`) at their end; a one-shot solver that
        iterates to a tol (``lanczos``) and stopped at its ``max_iter`` before it is told so too. Empty when it
        converged, has no such figure or is asked to run every pass (``tol`` 0). O(1)."""
        state = as_state(state)
        tol, residual, named = self.params.get("tol"), state.residual, "params.tol"
        if tol is None and self.solver.measure is not None and not state.refines:
            tol, named = defaults.RESIDUAL_TOL, "the default tol"  # stochastic passes run them all; judged at the end
        if not self.solver.iterative:  # a one-shot solver that iterates to a tol (lanczos) reports converged
            if tol and state.converged is False and residual is not None:
                return [f"{named} {tol:g} not met in {int(getattr(state, 'iterations', 0) or 0)} iterations "
                        f"(relative residual {float(residual):.3g}): fit again with a larger max_iter, or ask for a "
                        "larger tol"]
            return []
        if not tol or state.converged:
            return []
        if residual is None:
            passes = int(state.pass_ or 0)
            if state.refines:
                return [f"{named} {tol:g} not met in {passes} passes (the last pass moved the fit to float64 and "
                        "measured no residual): resume the fit with more passes"]
            if self.solver.measure is None:
                return []
            return [f"{named} {tol:g} not checked: the stochastic passes of a fit over several workers measure no "
                    "residual of the served components (one process measures it at the end)"]
        if float(residual) <= tol:  # met (a stochastic fit's figure, measured at its end)
            return []
        return [f"{named} {tol:g} not met in {int(state.pass_ or 0)} passes (relative residual "
                f"{float(residual):.3g}): resume the fit with more passes, or ask for a larger tol"]

    def notes(self, state: SolverState, rows=None) -> list[str]:
        """What a fit says of itself besides its components' rank (`kpca.solvers.rank_warnings`): what
        preparing it found of the data (`data_notes`), the solver's own note (``solver_note`` in the
        state), a tol not met (`unmet_tol`), and, given the training ``rows``, the solver's audit of the
        fitted model's accuracy (`kpca.solvers.Solver.audit`). What the estimator's ``warnings_`` and a
        model's ``warnings`` hold. O(1), plus the audit's cost."""
        state = as_state(state)
        own = [line for line in str(state.solver_note or "").split("\n") if line]
        audited = [] if rows is None or self.solver.audit is None else self.solver.audit(state, rows)
        return list(self.data_notes) + own + self.unmet_tol(state) + audited

    def used(self, state: SolverState | None) -> dict:
        """``params_used`` of the fit at ``state``: the resolved parameters, what the solver settled on
        (`kpca.solvers.Solver.used`; nothing before a one-shot fit has a state, ``state`` None) and
        ``n_rows``, the rows it fits; None values left out. O(parameters)."""
        settled = {} if state is None else self.solver.used(as_state(state))
        used = {**self.params, **settled, "n_rows": self.context.n_rows}
        return {key: value for key, value in used.items() if value is not None}


def _in_precision(rows, params: dict) -> dict:
    """The rows set to compute in the fit's resolved ``kernel_precision`` (`kpca.rows.KernelRows.use_precision`)
    where they can, and ``params`` with the precision they compute in: what ``params_used`` reports is
    what ran (affinity rows, a dense matrix stay float64). O(1), O(l) when the precision changes."""
    asked = params.get("kernel_precision")
    if asked is None or not hasattr(rows, "use_precision"):
        return params
    rows.use_precision(asked)
    ran = str(rows.compute_dtype)
    if ran == asked:
        return {**params, "kernel_precision": ran}
    return {**params, "kernel_precision": ran, "kernel_precision_reason": f"these rows compute in {ran} only"}


def kernel_notes(rows) -> tuple[str, ...]:
    """What a fit says of a kernel that is not positive semi-definite by its kind (tanh) where a sample of
    the rows shows negative eigenvalues of K' (`kpca.sampled_kernel.negative_share`): kernel PCA then
    serves the leading positive eigenpairs, as scikit-learn's KernelPCA does. Cost: the sample's
    ``O(m^2 n + m^3)``, only for such kernels."""
    if rows.kernel.kernel.definite or not hasattr(rows, "sample"):
        return ()
    share = negative_share(rows)
    if share <= 0:
        return ()
    return (f"the {rows.kernel.type} kernel is not positive semi-definite on these rows (on a sample, K' has a "
            f"negative eigenvalue {share:.3g} times its largest): the model serves the leading positive "
            "eigenpairs, as if the kernel were its positive part",)


def _measures_spread(solver: Solver, rows) -> bool:
    """Whether ``kernel_precision: auto`` needs the rows' kernel spread: a solver with an ``auto``
    precision, over rows that can be computed in float32 (`kpca.rows.KernelRows`)."""
    param = solver.param("kernel_precision")
    return param is not None and param.default == "auto" and hasattr(rows, "sample") and \
        hasattr(rows, "use_precision")


def _fit_centering(rows) -> Centering:
    return rows.fit_centering()


def prepare_fit(rows, request: FitRequest, *, resume: IterativeState | Mapping[str, Any] | None = None,
                centre: Callable[[Any], Centering] = _fit_centering, where: str = "params") -> PreparedFit:
    """A fit of ``request`` over ``rows`` ready to run (module docstring, steps 1-5).

    Parameters
    ----------
    rows : row source
        `kpca.rows.KernelRows` (or `kpca.affinity.AffinityRows`) over the training data; its kernel
        is resolved and its centring set here.
    request : FitRequest
    resume : kpca.solvers.IterativeState or a checkpoint's entries, optional
        A checkpointed state of the same fit (iterative solvers) to continue from (entries are read as
        their solver's state, `kpca.solvers.as_state`: the migration of checkpoints saved as dicts); on
        rows appended since (``state.n_rows`` below the rows') it is extended to them.
    centre : callable
        ``centre(rows) -> Centering``, the centring pass of a new iterative fit (default
        ``rows.fit_centering()``; a sharded job passes its sharded pass).
    where : str
        Prefix of the parameters' names in errors (``"params"``: ``params.eta0``; ``""``: bare).

    Raises `kpca.params.ParamError` naming the field at fault before any row is read;
    `kpca.errors.Degenerate` if the rows have no variance in feature space. Cost: the kernel's
    resolution and spread (samples, ``O(m^2 n)``), the centring pass (``2 l^2 n`` flops) or the new
    rows' kernel rows of a grown checkpoint, and the solver's start (a warm start: m kernel rows).
    """
    solver = get_solver(request.solver)
    request.checked_params(rows.n_rows, rows.kernel, where)
    rows.resolve_kernel()
    spread = kernel_spread(rows) if _measures_spread(solver, rows) else None
    context = request.context(rows.n_rows, rows.kernel, kernel_spread=spread)
    notes = kernel_notes(rows)
    if not solver.iterative:
        return PreparedFit(solver, request, _in_precision(rows, solver.resolved(request.params, context, where)),
                           context, data_notes=notes)
    if solver.start is None:
        raise ValueError(f"solver {solver.name!r}: an iterative solver declares its start")
    start = solver.start
    given, grown = dict(request.params), False
    state: IterativeState | None = None
    if resume is not None:
        state = as_state(resume, IterativeState).replace(converged=None)  # judged anew, on this tol
        # a resumed fit goes on as it went (its update, if the solver has one); a fit that float32 could not
        # resolve stays in float64
        for name, value in state.resumed_params().items():
            if name != "update" or solver.param("update") is not None:
                given.setdefault(name, value)
    if state is None:
        early = _in_precision(rows, solver.resolved(given, context, where))  # what the start needs
        if centre is _fit_centering and solver.centres_at_start(early):  # one pass for both
            rows.centering = None
            state = start(rows, context.n_components, early)
            rows.centering.require_variance()
            context = dataclasses.replace(context, mean_diagonal=rows.centering.mean_diagonal)
            params = _in_precision(rows, solver.resolved(given, context, where))
            return PreparedFit(solver, request, params, context, solver.regain(state, params), True, notes)
        rows.centering = centre(rows).require_variance()
    elif int(state.n_rows) != rows.n_rows:
        state, _ = extend_state(state, Centering.from_state(state.centering), rows)
        state.residual = None  # measured on the old rows
        grown = True
        if not state.refines:  # the gains of a start that knows nothing of the new rows;
            given["init"] = "random"  # Rayleigh-Ritz passes go on from the fitted subspace, guard vectors too
    else:
        rows.restore_centering(state.centering)
    context = dataclasses.replace(context, mean_diagonal=rows.centering.mean_diagonal)
    params = _in_precision(rows, solver.resolved(given, context, where))
    if state is None:
        return PreparedFit(solver, request, params, context, start(rows, context.n_components, params), True,
                           notes)
    if grown:
        state = solver.regain(state, params)
    return PreparedFit(solver, request, params, context, state, data_notes=notes)
