"""Solvers, one registry: `SOLVERS` maps each name to its declaration (`Solver`).

Built in: the KHA family (seed 000; `kpca.solvers._kha`: ``kha``, ``kha-t``,
``kha-et``, ``kha-smd``), iterative; ``exact`` (`kpca.solvers._exact`) and
``lanczos`` (`kpca.solvers._lanczos`), one-shot, the exact leading
eigenpairs; one-shot solvers over m centres (seed 004; serving O(m n) per
point): ``subsampled``, ``nystrom-weighted``, ``rskpca``
(`kpca.solvers._reduced`) and ``nystrom`` (`kpca.solvers._nystrom`);
autoencoder KPCA (seed 003; ``akpca`` in `kpca.solvers._akpca`,
``ds-akpca`` in `kpca.solvers._ds_akpca`), iterative, serving models of
their own (`kpca.solvers._autoencoder`). A new solver is one module that
calls `register`; see `kpca.solvers._registry` for what a declaration holds.
"""

from kpca.errors import Degenerate, Diverged, Stopped
from kpca.solvers import (  # noqa: F401 - importing them registers akpca and ds-akpca  # noqa: F401, E401 - register subsampled, nystrom-weighted, rskpca, nystrom
    _akpca,
    _ds_akpca,
    _kha,  # noqa: F401 - importing _kha registers the KHA family
    _lanczos,  # noqa: F401 - importing _lanczos registers lanczos
    _nystrom,
    _reduced,
)
from kpca.solvers._exact import exact_components  # importing _exact registers exact
from kpca.solvers._registry import (
    ITERATIVE_PARAMS,
    KERNEL_PRECISION,
    SOLVERS,
    FitContext,
    Iteration,
    Solver,
    as_state,
    get_solver,
    rank_warnings,
    register,
    served_components,
    served_model,
    stored_components,
    used_params,
)
from kpca.solvers._ritz import eigenvalue_estimates, ritz_components
from kpca.solvers._state import AutoencoderState, ComponentsState, IterativeState, KHAState, SolverState
from kpca.solvers._warm import INITS, default_init_size

__all__ = ["SolverState", "IterativeState", "KHAState", "AutoencoderState", "ComponentsState", "as_state",
           "SOLVERS", "Solver", "FitContext", "Iteration", "register", "get_solver", "stored_components",
           "used_params", "served_model", "served_components", "rank_warnings", "ITERATIVE_PARAMS",
           "KERNEL_PRECISION", "Diverged", "Degenerate", "Stopped", "exact_components", "ritz_components",
           "eigenvalue_estimates", "INITS", "default_init_size"]
