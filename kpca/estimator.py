"""A scikit-learn estimator over the same solvers: ``KernelHebbianPCA``.

Kernels by the project's names (`kpca.kernels.KERNELS`: ``gaussian`` with
``sigma``, ``laplacian``, ``polynomial`` with ``degree, offset, gamma``,
``linear``, ``tanh``) or by scikit-learn's, mapped as follows; as in
`sklearn.decomposition.KernelPCA`, ``gamma=None`` is ``1 / n_features`` and
``coef0=None`` is 1:

===========  ==========================================  ===============================================
sklearn      k(x, y)                                     project kernel
===========  ==========================================  ===============================================
``rbf``      exp(-gamma ||x - y||^2)                     ``gaussian``, sigma = 1 / sqrt(2 gamma)
``poly``     (gamma <x, y> + coef0)^degree (degree 3)    ``polynomial``, offset = coef0
``sigmoid``  tanh(gamma <x, y> + coef0)                  ``tanh``, offset = coef0
``linear``   <x, y>                                      ``linear``
===========  ==========================================  ===============================================
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from kpca.array_rows import ArrayRows, namespace
from kpca.driver import PassHooks
from kpca.fitting import FitRequest, PreparedFit, prepare_fit
from kpca.kernels import KERNELS, KernelSpec
from kpca.out_of_core import checked_source, is_out_of_core, row_blocks
from kpca.params import ParamError
from kpca.preimage import reconstruct_components
from kpca.rows import KernelRows
from kpca.solvers import SolverState, get_solver, rank_warnings, served_model

# the estimator's arguments that carry solver parameters, by parameter name
_SOLVER_ARGUMENTS = {"passes": "passes", "seed": "random_state", "block_size": "block_size", "eta0": "eta0",
                     "mu": "mu", "xi": "xi", "init": "init", "init_size": "init_size"}
# scikit-learn's kernel names and the project's kernel each means (module table)
_SKLEARN_KERNELS = {"rbf": "gaussian", "poly": "polynomial", "sigmoid": "tanh"}


class KernelHebbianPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Kernel PCA by any solver of `kpca.solvers.SOLVERS` (by default ``ritz``: a warm start and Rayleigh-Ritz
    passes; the KHA family of seed 000 by name).

    Parameters
    ----------
    n_components : int, default 8
        The only argument that may be given by position (scikit-learn's convention: the others are
        keyword-only).
    kernel : str, default "gaussian"
        A kernel of `kpca.kernels.KERNELS`, or scikit-learn's ``"rbf"``,
        ``"poly"``, ``"sigmoid"`` (module table).
    sigma, degree, offset, gamma : kernel parameters (see `kpca.kernels`); each
        kernel reads its own, None takes the table's default. ``sigma="auto"``
        (the default) is the median distance between the rows of a fixed-seed
        sample of X (`kpca.kernels.median_distance`); the value used is in
        ``kernel_``. For ``"rbf"``, ``gamma`` (default ``1 / n_features``)
        sets ``sigma = 1 / sqrt(2 gamma)``.
    coef0 : float or None
        scikit-learn's name for ``offset`` (``"poly"``, ``"sigmoid"``; default 1);
        give one of the two.
    solver : str, default "ritz"
        A solver of `kpca.solvers.SOLVERS`: by default ``ritz`` (a warm start and Rayleigh-Ritz passes to
        ``tol``); ``kha``, ``kha-t``, ``kha-et``, ``kha-smd`` run seed 000's update rules with their gains.
    passes : int, default 20
    eta0, mu, xi : float or None
        Gains; None uses the scale-free defaults of `kpca.defaults`.
    block_size : int or None
        Kernel rows per block (default `kpca.defaults.default_block_size`). The
        rows are never formed, so memory does not grow with it beyond
        O(block_size^2).
    random_state : int, default 0
    init : {"auto", "subset", "random"}, default "auto"
        Start of the iterative solvers: the warm start from the leading
        components within a random subset's span (`kpca.solvers._warm`), the
        paper's sparse random start, or auto: warm where its block of kernel
        rows fits the memory budget.
    init_size : int or None
        Subset size m for ``init="subset"`` (between n_components and
        n_samples); None uses `kpca.solvers.default_init_size`.
    solver_params : dict or None
        Any parameter the chosen solver declares, by its name (``{"ell": 4,
        "density": "kmeans"}`` for ``rskpca``, ``{"tol": 1e-10, "max_iter":
        200}`` for ``lanczos``), merged over the arguments above; a name the
        solver does not declare is a `ParamError` naming it. The estimator
        fits in one process (sharded fits are the service's placement).

    inverse_method : str, default "auto"
        Pre-image method of `inverse_transform` (`kpca.preimage.METHODS`;
        "auto" as the service's reconstruct: the model's decoder, else fixed
        point for the Gaussian kernel, else gradient).
    inverse_params : dict or None
        Options of that method (``{"n_iter": 50}``).
    device : {"auto", "cpu", "gpu"}, default "auto"
        Where the fit's full passes run (`kpca.array_rows`): a CUDA GPU through CuPy (``gpu``, or
        ``auto`` where one is visible), else this machine's cores (numba tiles).

    Arguments above that the chosen solver does not declare are ignored.

    Attributes
    ----------
    coefficients_ : ndarray of shape (n_components, n_samples) or None
        Expansion coefficients A of the served components ``A Phi'`` (for the
        KHA family the Rayleigh-Ritz components of the final iterate's span,
        `kpca.solvers.ritz_components`; over the m centres for the solvers
        that keep centres); None for ``akpca`` and ``ds-akpca``, whose
        encoder is not an expansion (their model is ``model_``).
    model_ : the served model: ``project``, and ``reconstruct`` for the
        autoencoder solvers (their decoder, seed 003 §4).
    eigenvalues_ : ndarray of shape (n_components,)
        Eigenvalues of K' (exact) or their estimates, descending; 0 for a
        component past the numerical rank (a zero row of ``coefficients_``,
        projecting every point to 0), which ``warnings_`` names.
    warnings_ : list of str
        What a user should know of the fitted components (those without
        variance, `kpca.solvers.rank_warnings`; what the solver says of the
        fit and a tol its passes did not meet, `kpca.fitting.PreparedFit.notes`);
        each is also issued as a
        `UserWarning` by ``fit``.
    params_used_ : dict
        Parameters actually used (defaults resolved, gain reductions applied).
    kernel_ : dict
        The kernel used, ``"auto"`` parameters resolved.
    state_ : kpca.solvers.SolverState
        The final solver state (its family's record, `kpca.solvers._state`).
    """

    def __init__(self, n_components=8, *, kernel="gaussian", sigma="auto", degree=None, offset=None, gamma=None,
                 solver="ritz", passes=20, eta0=None, mu=None, xi=None, block_size=None, random_state=0,
                 init="auto", init_size=None, solver_params=None, coef0=None, inverse_method="auto",
                 inverse_params=None, device="auto"):
        self.n_components = n_components
        self.kernel = kernel
        self.sigma = sigma
        self.degree = degree
        self.offset = offset
        self.gamma = gamma
        self.solver = solver
        self.passes = passes
        self.eta0 = eta0
        self.mu = mu
        self.xi = xi
        self.block_size = block_size
        self.random_state = random_state
        self.init = init
        self.init_size = init_size
        self.solver_params = solver_params
        self.coef0 = coef0
        self.inverse_method = inverse_method
        self.inverse_params = inverse_params
        self.device = device

    def _kernel_spec(self, n_features: int) -> KernelSpec:
        """The `KernelSpec` the arguments name, scikit-learn's names mapped (module table)."""
        if self.coef0 is not None and self.offset is not None:
            raise ParamError("coef0", "coef0 is scikit-learn's name for offset: give one of the two")
        values = {"sigma": self.sigma, "degree": self.degree, "gamma": self.gamma,
                  "offset": self.offset if self.coef0 is None else self.coef0}
        kernel = self.kernel
        if kernel in _SKLEARN_KERNELS or kernel == "linear":
            gamma = 1.0 / n_features if self.gamma is None else self.gamma
            if not (isinstance(gamma, (int, float, np.number)) and np.isfinite(gamma) and gamma > 0):
                raise ParamError("gamma", f"must be a finite number > 0, got {gamma!r}")
            values["gamma"] = float(gamma)
            values["offset"] = 1.0 if values["offset"] is None else values["offset"]
            values["degree"] = 3 if self.degree is None else self.degree
            if kernel == "rbf" and self.gamma is not None:
                values["sigma"] = float(1.0 / np.sqrt(2.0 * gamma))
            elif kernel == "rbf":
                values["sigma"] = float(np.sqrt(n_features / 2.0))
            kernel = _SKLEARN_KERNELS.get(kernel, kernel)
        declared = KERNELS[kernel].params if kernel in KERNELS else ()
        given = {p.name: values[p.name] for p in declared if values[p.name] is not None}
        return KernelSpec(kernel, **given)  # an unknown kernel raises a ParamError naming it

    def _rows(self, X, kernel: KernelSpec) -> KernelRows:
        """The kernel rows of X (float64; a fit sets its ``kernel_precision`` on them, `kpca.fitting.prepare_fit`):
        on ``device``'s array namespace where it has one (a GPU, `kpca.array_rows`), else the numba tiles."""
        xp = namespace(self.device)
        return KernelRows(X, kernel, dtype=np.float64) if xp is None else ArrayRows(X, kernel, xp, dtype=np.float64)

    def _request(self, solver, n_rows: int) -> FitRequest:
        """The fit the arguments ask for: the chosen solver's parameters from the arguments that carry
        them, ``solver_params`` merged over them; every l may form its l x l matrix (one process)."""
        given = {}
        for param in solver.params:
            argument = _SOLVER_ARGUMENTS.get(param.name)
            if argument is not None and getattr(self, argument) is not None:
                given[param.name] = getattr(self, argument)
        return FitRequest(solver.name, int(self.n_components), {**given, **(self.solver_params or {})},
                          exact_limit=n_rows)

    def fit(self, X, y=None, callback=None):
        """Fit on X of shape (n_samples, n_features); ``callback(state)`` after each pass. An X of zarr, dask
        or an ``np.memmap`` (`kpca.out_of_core`) is read a block of rows at a time, never copied whole:
        memory O(r l) plus blocks for the iterative solvers.

        Cost: the centring pass plus ``passes`` passes of kernel rows,
        ``2 l^2 n`` flops each, and O(r l) per step; ``exact`` is O(l^3).
        """
        if is_out_of_core(X):  # read a block of rows at a time, kept as it is (kpca.out_of_core)
            self.n_features_in_ = checked_source(X)[1]
        else:
            X = validate_data(self, X, dtype=[np.float64, np.float32], copy=True)  # a copy: the fit's own rows
        if X.shape[0] < 2:
            raise ValueError(f"X: n_samples = {X.shape[0]}; kernel PCA needs at least 2 samples")
        rows = self._rows(X, self._kernel_spec(X.shape[1]))  # the fit sets its kernel precision on them
        prepared = prepare_fit(rows, self._request(get_solver(self.solver), X.shape[0]), where="")
        state, _ = prepared.run(rows, PassHooks(on_pass=callback))
        self._adopt(rows, state, prepared)
        return self

    def partial_fit(self, X, y=None, callback=None):
        """Append the rows of X to the training data and continue for ``passes`` more passes.

        The first call is `fit`. Later calls keep the learned state: the new
        rows' coefficients start at zero, the centring is updated (seed 002
        appendix A; `kpca.streaming.extend_state`), and passes continue over
        all rows seen so far. Cost: the new rows' kernel rows, then ``passes``
        passes over all rows. A one-shot solver refits from scratch.
        """
        if not hasattr(self, "coefficients_"):
            return self.fit(X, callback=callback)
        if is_out_of_core(X) or is_out_of_core(self.rows_.source):
            raise ValueError("X: partial_fit appends rows in memory; for data read in blocks (zarr, dask, memmap) "
                             "append them to the array and call fit")
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        X_all = np.concatenate([np.asarray(self.rows_.source, dtype=np.float64), X])
        solver = get_solver(self.state_.solver)
        if not solver.iterative or solver.model is not None:
            return self.fit(X_all, callback=callback)  # one-shot, or a state that does not grow with the rows
        rows = self._rows(X_all, self.rows_.kernel)  # the fitted width
        prepared = prepare_fit(rows, self._request(solver, rows.n_rows), resume=self.state_, where="")
        state, _ = prepared.run(rows, PassHooks(on_pass=callback), passes=self.state_.pass_ + prepared.params["passes"])
        self._adopt(rows, state, prepared)
        return self

    def _adopt(self, rows: KernelRows, state: SolverState, prepared: PreparedFit) -> None:
        """Set the fitted attributes from a solver's final state; rows fitted in float32 are served in
        float64 (the same kernel and centring), as the service serves."""
        if hasattr(rows, "use_precision"):
            rows.use_precision(np.float64)
        self.rows_, self.state_, self._params = rows, state, prepared.params
        model = served_model(state, rows)
        self.model_ = model
        # a model of its own (autoencoder KPCA) has no expansion over the rows: coefficients_ None
        self.coefficients_, self.eigenvalues_ = getattr(model, "A", None), model.eigenvalues
        self.kernel_ = rows.kernel.to_dict()
        self.params_used_ = prepared.used(state)
        self.warnings_ = [] if model.eigenvalues is None else rank_warnings(model.eigenvalues)
        self.warnings_ += prepared.notes(state, rows)
        for message in self.warnings_:
            warnings.warn(message, UserWarning, stacklevel=3)

    def transform(self, X):
        """Kernel principal components of X: ``A k'(x)``, shape (n_samples, n_components). O(m l n)."""
        check_is_fitted(self, "model_")
        if is_out_of_core(X):  # a block of rows at a time (kpca.out_of_core)
            checked_source(X, self.n_features_in_)
            return np.concatenate([self.model_.project(block) for _, block in row_blocks(X)])
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        return self.model_.project(X)

    def inverse_transform(self, X):
        """Pre-images of components X, shape (n_samples, n_components) -> (n_samples, n_features).

        By ``inverse_method`` (`kpca.preimage.reconstruct_components`, "auto"
        as the service's reconstruct), not scikit-learn's learned ridge map
        (``inverse_method="learned"`` is that). Cost: the method's, e.g. for
        fixed point O(n_iter restarts l n) per point.
        """
        check_is_fitted(self, "model_")
        X = check_array(X, dtype=[np.float64, np.float32])
        return reconstruct_components(self.model_, X, method=self.inverse_method, **(self.inverse_params or {}))

    @property
    def _n_features_out(self) -> int:
        """Components served: `get_feature_names_out` names them kernelhebbianpca0, 1, ..."""
        return self.model_.n_components


__all__ = ["KernelHebbianPCA", "ParamError"]
