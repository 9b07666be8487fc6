"""scikit-learn's ``KernelPCA``, over the project's kernels and solvers: change one import.

``from kpca import KernelPCA`` takes the place of ``from sklearn.decomposition import KernelPCA``: the same
constructor (keyword-only past ``n_components``), defaults, attributes (``eigenvalues_``, ``eigenvectors_``,
``X_fit_``, ``gamma_``, ``dual_coef_``, ``X_transformed_fit_``), errors and tags; scikit-learn's own
test file for its class runs against this one in CI (tests/sklearn_upstream). Where the kernel matrix comes
from:

* ``linear``, ``rbf``, ``poly``, ``sigmoid`` and ``cosine`` of dense data: the project's kernel tiles
  (`kpca.rows.KernelRows`; ``rbf`` is the Gaussian with ``sigma = 1 / sqrt(2 gamma)``, ``cosine`` the linear
  kernel of the rows scaled to unit norm), so the matrix-free solvers never form it;
* ``precomputed``, a callable, sparse data, or parameters the tiles do not take (``poly`` of a degree that
  is not a whole number from 1 to 64 or of a negative ``coef0``, ``gamma = 0``): the matrix itself, from
  `sklearn.metrics.pairwise_kernels` as scikit-learn computes it.

How the eigenpairs of the centred matrix K' (eq. 5) are found (``eigen_solver``):

============  ====================================================================================
``dense``     K' formed, its leading eigenpairs (`kpca._dense.leading_eigh`, as the ``exact``
              solver: LAPACK, or ARPACK checked against it for few components of many rows)
``arpack``    the ``lanczos`` solver (LOBPCG, one pass over the kernel rows per iteration, to ``tol``)
``randomized``  the ``ritz`` solver (the project's default fit: a warm start, then Rayleigh-Ritz passes,
              ``iterated_power`` passes at most)
``auto``      ``dense`` up to `DENSE_ROWS` rows, ``ritz`` (to its own tolerance) above
a solver      any solver of `kpca.solvers.SOLVERS` that serves an expansion over all training rows
name          (``exact``, ``lanczos``, ``ritz``, the KHA family), with ``tol``, ``max_iter`` and
              ``random_state`` passed where it declares them
============  ====================================================================================

``arpack`` and ``randomized`` run ``dense`` up to `MATRIX_FREE_ROWS` rows (scikit-learn's own ``auto`` goes
dense there), and every solver name does for a kernel given as a matrix (it is in memory already) or for
``n_components=None`` (every component: the whole decomposition). They run in float64, as scikit-learn's do;
``auto`` above `DENSE_ROWS` lets the project choose float32 tiles where its rounding check allows
(`kpca.fitting`).

Beyond scikit-learn: X may be a ``zarr.Array``, a dask array or an ``np.memmap`` (`kpca.out_of_core`), read a
block of rows at a time by the fit (the tile kernels and the matrix-free solvers: memory O(r l) plus
blocks, where scikit-learn forms the 8 l^2 bytes of K) and by ``transform``. With a kernel given as a matrix
or a callable, or ``fit_inverse_transform``, such an X is read into memory, as scikit-learn reads it.

Deliberate differences from scikit-learn, each for a reason a user would want:

* the eigenvalues are computed in float64 for float32 data (outputs are float32): the number of
  components kept does not depend on the input's precision (scikit-learn's issue #18146);
* an eigenvalue counts as zero below `RELATIVE_RANK_TOL` of the largest (scikit-learn: 1e-12, or 2e-7 in
  float32) and a negative one is significant beyond 1e-5 of the largest *or of K''s rounding level*, so a
  constant offset's rounding is not reported as "significant negative eigenvalues";
* ``randomized`` on a kernel with large negative eigenvalues returns the leading (largest) ones, as
  ``dense`` does, instead of raising because its power iteration ranked them by magnitude
  (scikit-learn's test ``test_precomputed_kernel_not_psd[randomized]`` expects that error; it is marked
  as this documented difference in tests/sklearn_upstream);
* the learned inverse (``fit_inverse_transform``) regresses X less its mean and adds the mean back
  (``mean_``): it reconstructs the data's mean, which scikit-learn's map, without an intercept, loses
  (scikit-learn's issue #16654: with the linear kernel its reconstruction is off by the mean);
* a ``random_state`` of None is seed 0: the same data gives the same components every time;
* a non-symmetric precomputed K' is symmetrised, ``(K' + K'^T) / 2``, before its eigenpairs are taken
  (scikit-learn reads its lower triangle).
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
import scipy.linalg
import scipy.sparse
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.preprocessing import normalize
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data

from kpca._dense import leading_eigh
from kpca.centering import Centering, center_block
from kpca.driver import PassHooks
from kpca.fitting import FitRequest, prepare_fit
from kpca.kernels import KernelSpec
from kpca.out_of_core import UnitRows, checked_source, column_mean, is_out_of_core, row_blocks
from kpca.psd import psd_eigenvalues, rounding_level
from kpca.rows import KernelRows
from kpca.solvers import SOLVERS, SolverState, get_solver, rank_warnings, served_components

#: scikit-learn's solver names and the project's solver each runs above `MATRIX_FREE_ROWS` rows
SKLEARN_SOLVERS = {"arpack": "lanczos", "randomized": "ritz"}
MATRIX_FREE_ROWS = 200  # up to these rows the dense eigendecomposition answers every solver name
DENSE_ROWS = 4000  # ``auto``: K' formed up to these rows (128 MB), the matrix-free ``ritz`` above
BLOCK_ROWS = 2048  # rows of new points whose kernel rows are formed at once by `transform`
_TILE_KERNELS = ("linear", "rbf", "poly", "sigmoid", "cosine")


def _seed(random_state) -> int:
    """An integer seed from scikit-learn's ``random_state``: the int itself, 0 for None (deterministic),
    a draw from a ``RandomState``."""
    if random_state is None:
        return 0
    if isinstance(random_state, Integral):
        return int(random_state)
    return int(check_random_state(random_state).randint(np.iinfo(np.int32).max))


class KernelPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Kernel principal component analysis with scikit-learn's interface (module docstring).

    Parameters
    ----------
    n_components : int or None, default None
        Components kept; None keeps every component of nonzero eigenvalue. At most the rows.
    kernel : {"linear", "poly", "rbf", "sigmoid", "cosine", "precomputed"} or callable, default "linear"
    gamma : float or None
        ``rbf``, ``poly``, ``sigmoid`` scale; None is ``1 / n_features`` (``gamma_``).
    degree : float, default 3
    coef0 : float, default 1
    kernel_params : dict or None
        Arguments of a callable kernel.
    alpha : float, default 1.0
        Ridge of the learned inverse map (``fit_inverse_transform``).
    fit_inverse_transform : bool, default False
        Learn the pre-image map (kernel ridge regression of X on its projections, Bakir et al. 2004).
    eigen_solver : str, default "auto"
        scikit-learn's ``auto``, ``dense``, ``arpack``, ``randomized``, or a solver of `kpca.solvers.SOLVERS`
        by name (module table).
    tol : float, default 0
        Tolerance of the iterative solvers (0: each solver's own).
    max_iter : int or None
        Iterations (``lanczos``) or passes (the iterative solvers) at most; None: the solver's.
    iterated_power : int or "auto"
        ``randomized``'s passes at most.
    remove_zero_eig : bool, default False
        Drop the components of zero eigenvalue (always, when ``n_components`` is None).
    random_state : int, RandomState or None
        Seed of the iterative solvers' starts (module note on None).
    copy_X : bool, default True
        Keep a copy of X (``X_fit_``); False keeps the caller's array.
    n_jobs : int or None
        Passed to `sklearn.metrics.pairwise_kernels` for the kernels computed as a matrix.

    Attributes
    ----------
    eigenvalues_ : ndarray (n_components,)
        Eigenvalues of the centred kernel matrix, descending.
    eigenvectors_ : ndarray (n_samples, n_components)
        Its unit eigenvectors, each one's largest-magnitude entry positive (deterministic signs).
    gamma_ : float
    X_fit_ : the training data (or kernel matrix)
    dual_coef_, X_transformed_fit_, mean_ : the learned inverse map (``fit_inverse_transform``; ``mean_``, its
        intercept, is the module's deliberate difference)
    solver_ : str
        What found the eigenpairs: ``"dense"`` or the project solver's name.
    warnings_ : list of str
        What a project solver said of its fit (a tolerance not met within ``max_iter``, its audit of the
        components), each also issued by ``fit`` as a `sklearn.exceptions.ConvergenceWarning`; and components
        asked for past the numerical rank, which carry no variance (eigenvalue 0, projecting every point to 0;
        `kpca.solvers.rank_warnings`), issued as a `UserWarning` (scikit-learn's class says nothing of them).
    """

    _state: SolverState | None = None  # a matrix-free solver's last state (`partial_fit` resumes it)
    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "kernel": [StrOptions({*_TILE_KERNELS, "precomputed"}), callable],
        "gamma": [Interval(Real, 0, None, closed="left"), None],
        "degree": [Interval(Real, 0, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "kernel_params": [dict, None],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "fit_inverse_transform": ["boolean"],
        "eigen_solver": [StrOptions({"auto", "dense", *SKLEARN_SOLVERS, *SOLVERS})],
        "tol": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left"), None],
        "iterated_power": [Interval(Integral, 0, None, closed="left"), StrOptions({"auto"})],
        "remove_zero_eig": ["boolean"],
        "random_state": ["random_state"],
        "copy_X": ["boolean"],
        "n_jobs": [None, Integral],
    }

    def __init__(self, n_components=None, *, kernel="linear", gamma=None, degree=3, coef0=1, kernel_params=None,
                 alpha=1.0, fit_inverse_transform=False, eigen_solver="auto", tol=0, max_iter=None,
                 iterated_power="auto", remove_zero_eig=False, random_state=None, copy_X=True, n_jobs=None):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.alpha = alpha
        self.fit_inverse_transform = fit_inverse_transform
        self.eigen_solver = eigen_solver
        self.tol = tol
        self.max_iter = max_iter
        self.iterated_power = iterated_power
        self.remove_zero_eig = remove_zero_eig
        self.random_state = random_state
        self.copy_X = copy_X
        self.n_jobs = n_jobs

    # -- kernels ------------------------------------------------------------------------------------------
    def _tile_spec(self, X) -> KernelSpec | None:
        """The project kernel that computes this kernel from X in tiles, or None where the matrix is needed
        (module docstring)."""
        if scipy.sparse.issparse(X) or not isinstance(self.kernel, str) or self.kernel not in _TILE_KERNELS:
            return None
        if self.kernel in ("linear", "cosine"):
            return KernelSpec("linear")
        gamma = float(self._gamma(X.shape[1]))
        if gamma <= 0:
            return None
        if self.kernel == "rbf":
            return KernelSpec("gaussian", sigma=float(1.0 / np.sqrt(2.0 * gamma)))
        if self.kernel == "sigmoid":
            return KernelSpec("tanh", gamma=gamma, offset=float(self.coef0))
        whole = float(self.degree) == int(self.degree) and 1 <= int(self.degree) <= 64
        if not whole or self.coef0 < 0:
            return None
        return KernelSpec("polynomial", degree=int(self.degree), offset=float(self.coef0), gamma=gamma)

    def _gamma(self, n_features: int):
        """``gamma_``: ``gamma``, or ``1 / n_features`` where it is None (scikit-learn's default)."""
        return 1 / n_features if self.gamma is None else self.gamma

    def _points(self, X):
        """X as the tiles see it: rows scaled to unit norm for ``cosine`` (as they are read, for an
        out-of-core X)."""
        if self.kernel != "cosine":
            return X
        return UnitRows(X) if is_out_of_core(X) else normalize(X)

    @staticmethod
    def _kernel_rows(X: np.ndarray, spec: KernelSpec) -> KernelRows:
        """The project's kernel rows of X. For the linear kernel in coordinates centred on X's mean: the
        centred matrix K' is the same in any origin (eq. 5 removes the terms an origin adds), and a constant
        offset of the data no longer cancels catastrophically in it (radial kernels are centred so by
        `kpca.rows.default_origin`). O(l n)."""
        if spec.type != "linear":
            return KernelRows(X, spec, dtype=np.float64)
        origin = column_mean(X)
        return KernelRows(X, spec, dtype=np.float64, origin=origin)

    def _get_kernel(self, X, Y=None) -> np.ndarray:
        """The kernel matrix K(X, Y) as scikit-learn computes it (`sklearn.metrics.pairwise_kernels`)."""
        if callable(self.kernel):
            params = self.kernel_params or {}
        else:
            params = {"gamma": self.gamma_, "degree": self.degree, "coef0": self.coef0}
        return pairwise_kernels(X, Y, metric=self.kernel, filter_params=True, n_jobs=self.n_jobs, **params)

    def _matrix(self, X, Y=None) -> np.ndarray:
        """The raw kernel matrix K(X, Y) in float64, the caller's to change: a copy of X for ``precomputed``
        (dense), else `_get_kernel`'s."""
        if self.kernel != "precomputed":
            return np.asarray(self._get_kernel(X, Y), dtype=np.float64)
        return np.array(X.toarray() if scipy.sparse.issparse(X) else X, dtype=np.float64)  # a copy, centred in place

    def _centred_rows(self, X) -> np.ndarray:
        """Centred kernel rows k'(x) (b, l) of new points X (eq. 5, the training centring). O(b l n)."""
        if self._rows is not None:
            return self._rows.transform_block(np.asarray(self._points(X), dtype=np.float64))
        K = self._matrix(X, self.X_fit_)
        return center_block(K, self._centering.row_means(K), self._centering)

    # -- fit ----------------------------------------------------------------------------------------------
    def _solver(self, n_rows: int) -> str:
        """``"dense"`` or the project solver that finds the eigenpairs (module table)."""
        name = self.eigen_solver
        if name in ("dense", "exact") or self._rows is None or self.n_components is None:
            return "dense"
        if name == "auto":
            return "dense" if n_rows <= DENSE_ROWS else "ritz"
        if name in SKLEARN_SOLVERS:
            return "dense" if n_rows <= MATRIX_FREE_ROWS else SKLEARN_SOLVERS[name]
        return name

    @staticmethod
    def _dense_eigenpairs(Kc: np.ndarray, r: int, symmetric: bool, rounding: float) -> tuple[np.ndarray, np.ndarray]:
        """The r leading eigenpairs of K' (symmetrised unless ``symmetric``: a kernel's, up to rounding),
        eigenvalues checked against its ``rounding`` level (`psd_eigenvalues`, `rounding_level`). O(l^2 r) to
        O(l^3)."""
        if not symmetric:
            Kc = 0.5 * (Kc + Kc.T)
        w, V = leading_eigh(Kc, r)
        return psd_eigenvalues(w, rounding), V

    def _iterative_eigenpairs(self, name: str, r: int, resume=None) -> tuple[np.ndarray, np.ndarray]:
        """The r leading eigenpairs by a project solver over the kernel rows (`kpca.fitting.prepare_fit`),
        from its start or resuming an iterative solver's ``resume`` state for as many passes more:
        eigenvectors ``A^T sqrt(lambda)`` of its served expansion. The solver's cost."""
        solver = get_solver(name)
        if solver.model is not None or solver.serves != "expansion" or solver.dense:
            raise ValueError(f"eigen_solver: {name!r} does not serve eigenvectors over the training rows; choose "
                             f"'auto', 'dense', 'arpack', 'randomized', 'lanczos', 'ritz' or a KHA solver (or fit "
                             f"kpca.KernelHebbianPCA)")
        declared = {p.name for p in solver.params}
        params: dict = {"seed": _seed(self.random_state)} if "seed" in declared else {}
        if self.tol and "tol" in declared:
            params["tol"] = float(self.tol)
        if self.max_iter is not None:
            params.update({k: int(self.max_iter) for k in ("max_iter", "passes") if k in declared})
        if name == "ritz" and self.eigen_solver == "randomized" and self.iterated_power != "auto":
            params["passes"] = max(1, int(self.iterated_power))
        if self.eigen_solver in SKLEARN_SOLVERS and "kernel_precision" in declared:
            params["kernel_precision"] = "float64"  # as scikit-learn's solvers compute
        rows = self._rows
        assert rows is not None  # `_solver` names a project solver only where the tiles compute the kernel
        prepared = prepare_fit(rows, FitRequest(name, r, params, exact_limit=rows.n_rows), resume=resume, where="")
        more = None if resume is None else int(resume.pass_ or 0) + int(prepared.params["passes"])
        state, _ = prepared.run(rows, PassHooks(), passes=more)
        rows.use_precision(np.float64)
        self._state = state
        self.warnings_ = prepared.notes(state, rows)  # a tol not met, the solver's audit: said, never silent
        for message in self.warnings_:
            warnings.warn(message, ConvergenceWarning, stacklevel=4)
        A, _, w = served_components(state)
        w = psd_eigenvalues(w)
        return w, np.asarray(A).T * np.sqrt(w)

    def _fit_eigenpairs(self, X) -> None:
        """``eigenvalues_``, ``eigenvectors_`` and what `transform` needs (the rows or the centring)."""
        spec = self._tile_spec(X)
        l = X.shape[0]
        r = l if self.n_components is None else min(l, int(self.n_components))
        self._rows = None if spec is None else self._kernel_rows(self._points(X), spec)
        self.solver_, self.warnings_, self._state = self._solver(l), [], None
        if self.solver_ == "dense":
            # K formed once (the tiles', or the matrix), centred in place (eq. 5); the rows keep its centring
            K = self._matrix(X) if self._rows is None else self._rows.raw_block(self._points(np.asarray(X)))
            self._centering, rounding = Centering.weighted(K), rounding_level(K)
            Kc = center_block(K, self._centering.row_means(K), self._centering)
            if self._rows is not None:
                self._rows.centering = self._centering
            w, V = self._dense_eigenpairs(Kc, r, symmetric=self._rows is not None, rounding=rounding)
        else:
            w, V = self._iterative_eigenpairs(self.solver_, r)
        self._set_eigenpairs(w, V)

    def _set_eigenpairs(self, w: np.ndarray, V: np.ndarray) -> None:
        """``eigenvalues_`` and ``eigenvectors_``: descending, each vector's largest-magnitude entry positive,
        the zero ones dropped where asked. O(l r)."""
        signs = np.sign(V[np.abs(V).argmax(axis=0), np.arange(V.shape[1])])  # largest-magnitude entry positive
        V = V * np.where(signs == 0, 1.0, signs)
        order = np.argsort(w, kind="stable")[::-1]
        w, V = w[order], V[:, order]
        if self.remove_zero_eig or self.n_components is None:
            V, w = V[:, w > 0], w[w > 0]
        self.eigenvalues_, self.eigenvectors_ = w, np.ascontiguousarray(V)
        for message in rank_warnings(w):  # components asked for past the numerical rank: said (UserWarning)
            self.warnings_.append(message)
            warnings.warn(message, UserWarning, stacklevel=4)

    def _fit_inverse_transform(self, X_transformed, X) -> None:
        """The learned pre-image map, kernel ridge regression of X on the training projections Z (Bakir et
        al. 2004, as scikit-learn's) with the data's mean as its intercept: ``mean_`` and ``dual_coef_ =
        (K(Z, Z) + alpha I)^-1 (X - mean_)``. O(l^3)."""
        if scipy.sparse.issparse(X):
            raise NotImplementedError("Inverse transform not implemented for sparse matrices!")
        n = X_transformed.shape[0]
        K = self._get_kernel(X_transformed)
        K.flat[:: n + 1] += self.alpha
        self.mean_ = np.asarray(X, dtype=np.float64).mean(axis=0).astype(X.dtype)
        self.dual_coef_ = scipy.linalg.solve(K, X - self.mean_, assume_a="pos", overwrite_a=True)
        self.X_transformed_fit_ = X_transformed

    def fit(self, X, y=None):
        """Fit on X (n_samples, n_features), or on a kernel matrix (n_samples, n_samples) for
        ``kernel="precomputed"``. An X of zarr, dask or an ``np.memmap`` (`kpca.out_of_core`) is read a block
        of rows at a time and kept as it is (``X_fit_``; ``copy_X`` does not copy it): memory O(r l) plus
        blocks with the matrix-free solvers. Cost: the kernel and the solver's (module table)."""
        self._validate_params()
        if self.fit_inverse_transform and self.kernel == "precomputed":
            raise ValueError("Cannot fit_inverse_transform with a precomputed kernel.")
        if self._streams(X):
            self.n_features_in_ = checked_source(X)[1]
        else:
            X = validate_data(self, X, accept_sparse="csr", copy=self.copy_X, dtype=[np.float64, np.float32])
        self.gamma_ = self._gamma(X.shape[1])
        self._fit_eigenpairs(X)
        if self.fit_inverse_transform:
            self._fit_inverse_transform(self._training_projections(X.dtype), X)
        self.X_fit_ = X
        return self

    @available_if(lambda self: self.kernel != "precomputed")  # rows of a kernel matrix cannot be appended
    def partial_fit(self, X, y=None):
        """Add the rows of X to the training data (scikit-learn's issues #18013 and #15895: its class has
        none); the first call is `fit`. A matrix-free iterative fit (``ritz``, the KHA family) resumes from its
        last state: the new rows' coefficients start at zero, the centring is extended (seed 002 appendix A,
        `kpca.streaming.extend_state`) and its passes continue over all rows to its tolerance. Any other fit
        (dense, ``lanczos``, a callable kernel's, sparse data's) is made again on all rows. Rows in memory
        only; there is none for ``kernel="precomputed"``. Cost: the resumed passes, or a whole fit."""
        if not hasattr(self, "eigenvalues_"):
            return self.fit(X)
        if is_out_of_core(X) or is_out_of_core(self.X_fit_):
            raise ValueError("X: partial_fit appends rows in memory; for data read in blocks (zarr, dask, memmap) "
                             "append them to the array and call fit")
        X = validate_data(self, X, accept_sparse="csr", reset=False, dtype=[np.float64, np.float32])
        if scipy.sparse.issparse(X) or scipy.sparse.issparse(self.X_fit_):
            return self.fit(scipy.sparse.vstack([self.X_fit_, X], format="csr"))
        X_all = np.concatenate([self.X_fit_, X])
        state, rows = self._state, self._rows
        if state is None or rows is None or not get_solver(state.solver).iterative or \
                self._solver(X_all.shape[0]) != state.solver:
            return self.fit(X_all)
        self._rows = KernelRows(self._points(X_all), rows.kernel, dtype=np.float64, origin=rows.origin)
        r = min(X_all.shape[0], int(self.n_components))  # an iterative fit has n_components (`_solver`)
        self._set_eigenpairs(*self._iterative_eigenpairs(state.solver, r, resume=state))
        if self.fit_inverse_transform:
            self._fit_inverse_transform(self._training_projections(X_all.dtype), X_all)
        self.X_fit_ = X_all
        return self

    def _streams(self, X) -> bool:
        """Whether the fit reads X a block of rows at a time: an out-of-core X (`kpca.out_of_core`) with a
        kernel the tiles compute and no learned inverse (an l x l solve over X in memory); any other X is
        read into memory, as scikit-learn reads it."""
        return is_out_of_core(X) and not self.fit_inverse_transform and self._tile_spec(X) is not None

    def _training_projections(self, dtype) -> np.ndarray:
        """The training rows' components ``V sqrt(lambda)`` in the data's precision. O(l r)."""
        return (self.eigenvectors_ * np.sqrt(self.eigenvalues_)).astype(dtype, copy=False)

    def fit_transform(self, X, y=None, **params):
        """`fit`, then the training rows' components ``V sqrt(lambda)`` (n_samples, n_components)."""
        self.fit(X, **params)
        return self._training_projections(self.X_fit_.dtype)

    def transform(self, X):
        """Components of X: ``k'(x) V / sqrt(lambda)`` (zero for a zero eigenvalue), (n_samples,
        n_components), in X's precision. O(n_samples l n), `BLOCK_ROWS` rows of kernel at a time (an
        out-of-core X, `kpca.out_of_core`, read a block at a time)."""
        check_is_fitted(self)
        if is_out_of_core(X):
            checked_source(X, self.n_features_in_)
            precision = np.float32 if X.dtype == np.float32 else np.float64
            blocks = row_blocks(X, precision)
        else:
            X = validate_data(self, X, accept_sparse="csr", reset=False, dtype=[np.float64, np.float32])
            precision = X.dtype
            blocks = ((a, X[a : a + BLOCK_ROWS]) for a in range(0, X.shape[0], BLOCK_ROWS))
        nonzero = self.eigenvalues_ > 0
        alphas = np.zeros_like(self.eigenvectors_)
        alphas[:, nonzero] = self.eigenvectors_[:, nonzero] / np.sqrt(self.eigenvalues_[nonzero])
        out = np.empty((X.shape[0], alphas.shape[1]), dtype=precision)
        for a, block in blocks:
            out[a : a + block.shape[0]] = self._centred_rows(block) @ alphas
        return out

    def inverse_transform(self, X):
        """Pre-images of components X by the learned map: ``mean_ + K(X, Z) dual_coef_``
        (``fit_inverse_transform``). O(n_samples l (r + n))."""
        if not self.fit_inverse_transform:
            raise NotFittedError("The fit_inverse_transform parameter was not set to True when instantiating and "
                                 "hence the inverse transform is not available.")
        check_is_fitted(self)
        return np.dot(self._get_kernel(X, self.X_transformed_fit_), self.dual_coef_) + self.mean_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.input_tags.pairwise = self.kernel == "precomputed"
        return tags

    @property
    def _n_features_out(self) -> int:
        """Components served: `get_feature_names_out` names them kernelpca0, 1, ..."""
        return self.eigenvalues_.shape[0]


__all__ = ["KernelPCA", "SKLEARN_SOLVERS"]
