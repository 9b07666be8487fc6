"""A scikit-learn estimator over the same solvers: ``KernelHebbianPCA``."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_array, check_is_fitted

from kpca.defaults import default_block_size
from kpca.driver import run_passes
from kpca.kernels import KernelSpec
from kpca.rows import KernelRows
from kpca.solvers import ITERATIVE, check_init, exact_components, init_state, resolve_params, ritz_components
from kpca.streaming import extend_state


class KernelHebbianPCA(TransformerMixin, BaseEstimator):
    """Kernel PCA by the Kernel Hebbian Algorithm family (seed 000), or exactly.

    Parameters
    ----------
    n_components : int, default 8
    kernel : {"gaussian", "laplacian", "polynomial", "linear", "tanh"}, default "gaussian"
    sigma, degree, offset, gamma : kernel parameters (see `kpca.kernels`)
    solver : {"kha", "kha-t", "kha-et", "kha-smd", "exact"}, default "kha-smd"
    passes : int, default 20
    eta0, mu, xi : float or None
        Gains; None uses the scale-free defaults of `kpca.defaults`.
    block_size : int or None
        Kernel rows per block (default `kpca.defaults.default_block_size`). The
        rows are never formed, so memory does not grow with it beyond
        O(block_size^2).
    random_state : int, default 0
    init : {"random", "subset"}, default "random"
        Start of the iterative solvers: the paper's sparse random start, or
        the warm start from the leading components within a random subset's
        span (`kpca.solvers.init_state`, `kpca.solvers._warm`).
    init_size : int or None
        Subset size m for ``init="subset"`` (between n_components and
        n_samples); None uses `kpca.solvers.default_init_size`. Costs m
        kernel rows and m * n_samples memory.

    Attributes
    ----------
    coefficients_ : ndarray of shape (n_components, n_samples)
        Expansion coefficients A; components are ``A Phi'``. For the iterative
        solvers, the Rayleigh-Ritz components of the final iterate's span
        (orthonormal, by decreasing variance; `kpca.solvers.ritz_components`).
    eigenvalues_ : ndarray of shape (n_components,)
        Eigenvalues of K' (exact) or their Rayleigh-Ritz estimates.
    params_used_ : dict
        Hyper-parameters actually used (defaults resolved, gain reductions applied).
    state_ : dict
        The final solver state (iterative solvers).
    """

    def __init__(self, n_components=8, kernel="gaussian", sigma=1.0, degree=2, offset=1.0, gamma=1.0,
                 solver="kha-smd", passes=20, eta0=None, mu=None, xi=None, block_size=None, random_state=0,
                 init="random", init_size=None):
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

    def _kernel_spec(self) -> KernelSpec:
        params = {"gaussian": ["sigma"], "laplacian": ["sigma"], "polynomial": ["degree", "offset", "gamma"],
                  "linear": [], "tanh": ["gamma", "offset"]}.get(self.kernel)
        if params is None:
            return KernelSpec(type=self.kernel)  # raises a clear ValueError
        return KernelSpec.from_dict({"type": self.kernel, **{p: getattr(self, p) for p in params}})

    def fit(self, X, y=None, callback=None):
        """Fit on X of shape (n_samples, n_features); ``callback(state)`` after each pass.

        Cost: the centring pass plus ``passes`` passes of kernel rows,
        ``2 l^2 n`` flops each, and O(r l) per step; ``exact`` is O(l^3).
        """
        X = check_array(X, dtype=[np.float64, np.float32])
        l = X.shape[0]
        if not 1 <= self.n_components < l:
            raise ValueError(f"n_components: must be between 1 and n_samples - 1 = {l - 1}, got {self.n_components}")
        if self.solver != "exact":
            check_init(self.init, self.init_size, self.n_components, l)
        self.rows_ = KernelRows(X, self._kernel_spec(), dtype=np.float64)
        centering = self.rows_.fit_centering()
        if self.solver == "exact":
            self.eigenvalues_, self.coefficients_ = exact_components(self.rows_.dense(), self.n_components)
            self.params_used_ = {}
            self.state_ = None
        else:
            if self.solver not in ITERATIVE:
                resolve_params(self.solver, 1.0)  # raises the ValueError naming the solver
            params = resolve_params(self.solver, centering.mean_diagonal, self.eta0, self.mu, self.xi, self.init,
                                    n_rows=self.rows_.n_rows)
            state = init_state(self.solver, self.n_components, self.rows_.block, l, params, seed=self.random_state,
                               init=self.init, init_size=self.init_size)
            block = self.block_size or default_block_size(l)
            state, _ = run_passes(self.rows_, state, self.passes, block, on_pass=callback)
            self._adopt(self.rows_, state)
        self.n_features_in_ = X.shape[1]
        return self

    def partial_fit(self, X, y=None, callback=None):
        """Append the rows of X to the training data and continue for ``passes`` more passes.

        The first call is `fit`. Later calls keep the learned state: the new
        rows' coefficients start at zero, the centring is updated (seed 002
        appendix A; `kpca.streaming.extend_state`), and passes continue over
        all rows seen so far. Cost: the new rows' kernel rows, then ``passes``
        passes over all rows. ``exact`` refits from scratch.
        """
        if not hasattr(self, "coefficients_"):
            return self.fit(X, callback=callback)
        X = check_array(X, dtype=[np.float64, np.float32])
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but the model was fit with {self.n_features_in_}")
        X_all = np.concatenate([np.asarray(self.rows_.source, dtype=np.float64), X])
        if self.solver == "exact":
            return self.fit(X_all, callback=callback)
        rows = KernelRows(X_all, self._kernel_spec(), dtype=np.float64)
        state, _ = extend_state(self.state_, self.rows_.centering, rows)
        block = self.block_size or default_block_size(rows.n_rows)
        state, _ = run_passes(rows, state, state["pass"] + self.passes, block, on_pass=callback)
        self._adopt(rows, state)
        return self

    def _adopt(self, rows: KernelRows, state: dict) -> None:
        """Set the fitted attributes from an iterative solver's final state."""
        self.rows_, self.state_ = rows, state
        # the served components: Rayleigh-Ritz within the iterate's span (kpca.solvers._ritz)
        self.coefficients_, _, self.eigenvalues_ = ritz_components(state["A"], state["AK"])
        self.params_used_ = {k: state[k] for k in ("eta0", "mu", "xi", "gain_reductions", "init", "init_size")
                             if k in state}

    def transform(self, X):
        """Kernel principal components of X: ``A k'(x)``, shape (n_samples, n_components). O(m l n)."""
        check_is_fitted(self, "coefficients_")
        X = check_array(X, dtype=[np.float64, np.float32])
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but the model was fit with {self.n_features_in_}")
        return self.rows_.transform_block(X) @ self.coefficients_.T
