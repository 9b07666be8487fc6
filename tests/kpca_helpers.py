"""What the kpca tests share and the product does not need: a one-call spectral clustering over the
product's steps, a measure of how orthonormal components are, a model's expansion of a projection, and the
BLAS threads in effect."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kpca._threads import _controller_
from kpca.affinity import AffinityRows
from kpca.clustering import N_INIT, Clustering, clustering_from_state, prepare_clustering
from kpca.driver import PassHooks
from kpca.kernels import KernelSpec
from kpca.model import KernelModel
from kpca.solvers import SOLVERS


def orthonormality_error(A: np.ndarray, AK: np.ndarray) -> float:
    """``||A K' A^T - I||_F``: how far the components are from orthonormal in feature space. O(r^2 l)."""
    G = AK @ A.T
    return float(np.linalg.norm(G - np.eye(G.shape[0])))


def feature_expansion(model: KernelModel, X) -> np.ndarray:
    """Coefficients gamma of ``Psi(x) = P Phi'(x) + mu = sum_i gamma_i Phi(x_i)`` for the rows of X (m, n):
    ``gamma = alpha + (1 - sum alpha) w``, ``alpha = A^T beta`` (`kpca.model`'s notation), computed apart
    from `KernelModel.target`'s. Shape (m, l); O(m l (n + r))."""
    alpha = model.project(X) @ model.A
    return alpha + (1.0 - alpha.sum(axis=1))[:, None] * model.weights[None, :]


def blas_threads() -> int:
    """The BLAS threads in effect now (the largest of the process's BLAS libraries). O(libraries)."""
    return max((int(library.num_threads) for library in _controller_().select(user_api="blas").lib_controllers),
               default=1)


def affinity_rows(rows_or_X, kernel: KernelSpec | dict | None = None) -> AffinityRows:
    """``rows_or_X`` if it is an `AffinityRows`, else the rows of L over the array X (l, n) with ``kernel``
    (a `KernelSpec` or its dict; default a Gaussian of width ``"auto"``, the median distance of a
    sample). O(l n)."""
    if isinstance(rows_or_X, AffinityRows):
        return rows_or_X
    if kernel is None:
        kernel = KernelSpec("gaussian", sigma="auto")
    elif not isinstance(kernel, KernelSpec):
        kernel = KernelSpec.from_dict(kernel)
    return AffinityRows(np.asarray(rows_or_X), kernel)


def spectral_clustering(rows_or_X, n_clusters: int, kernel: KernelSpec | dict | None = None, solver: str = "ritz",
                        params: dict | None = None, seed: int = 0, on_pass: Callable | None = None,
                        n_init: int = N_INIT) -> Clustering:
    """Spectral clustering of the rows (seed 000 §5.3; `kpca.clustering`'s docstring) into ``n_clusters``.

    ``rows_or_X`` is an `AffinityRows` (out of core: any chunked source) or an array (l, n), with
    ``kernel`` (default Gaussian, width ``"auto"``). ``seed`` seeds the solver (unless ``params`` name
    one) and k-means. An iterative solver runs ``params["passes"]`` passes; ``on_pass(clustering)``, if
    given, gets the `Clustering` of every pass (``clustering.state["pass"]``). Cost: the degree pass,
    the solver's (a KHA pass: ``2 l^2 (n + d)`` flops), and k-means per reported clustering.
    """
    rows = affinity_rows(rows_or_X, kernel)
    params = dict(params or {})
    declared = SOLVERS.get(solver)
    if declared is not None and declared.param("seed") is not None:
        params.setdefault("seed", int(seed))
    prepared = prepare_clustering(rows, n_clusters, solver, params)
    hooks = None
    if on_pass is not None:
        hooks = PassHooks(on_pass=lambda s: on_pass(clustering_from_state(s, rows, seed, n_init)))
    state, _ = prepared.run(rows, hooks)
    return clustering_from_state(state, rows, seed, n_init)
