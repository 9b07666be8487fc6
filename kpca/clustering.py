"""Spectral clustering (seed 000 §5.3): NJW on the leading eigenvectors of ``L = D^-1/2 A D^-1/2``.

Seed 000 §5.3 clusters all of USPS with "the spectral clustering method
presented in [13]" (Ng, Jordan and Weiss) from 10 kernel PCs found by KHA,
and scores it by Meila's variation of information against the classes
(`kpca.metrics.variation_of_information`). The method, with l points,
``k`` clusters and an affinity (kernel) ``K``:

1. ``A = K - diag(K)`` (NJW: ``A_ii = 0``), ``D = diag(A 1)``, ``L = D^-1/2 A
   D^-1/2`` (`kpca.affinity.AffinityRows`; K uncentred, no centring of L);
2. ``U`` (l x k): the k leading eigenvectors of L, found by any solver that
   declares itself clusterable (`clustering_solvers`) -- the KHA family
   (seed 000 eq. 8-21, pass by pass), ``exact`` or ``lanczos`` -- on the
   rows of ``M = L + c I``, the positive semi-definite shift of L with the
   same eigenvectors (`kpca.affinity`; c = 0 for a state fitted with the
   self-affinity);
3. ``Y``: the rows of U normalised to unit length;
4. k-means on the rows of Y (scikit-learn's, fixed seed); point i gets the
   cluster of row i.

The eigenvectors come from the solver's served components
(`kpca.solvers.served_components`: Rayleigh-Ritz for the KHA family,
`kpca.solvers._ritz`): coefficients ``A`` (k x l) with ``A M A^T = I``, image
``AK = A M`` and Ritz values ``mu`` of M, so that ``U = AK^T diag(mu)^-1/2``
(at an exact eigenpair ``AK_i = sqrt(mu_i) u_i``) and L's eigenvalues are
``lambda = mu - c``. A new point x is embedded by the Nyström extension of
the eigenvectors of L,

    u_i(x) = (1 / lambda_i) sum_j L(x, x_j) u_i(x_j),
    L(x, x_j) = k(x, x_j) / sqrt(d(x) d_j),   d(x) = sum_j k(x, x_j),

i.e. ``u(x) = diag(sqrt(mu) / lambda) A L(x, :)^T`` (``u(x_j) = M A^T
diag(mu)^-1/2`` and ``L = M - c I`` on the training points); then
normalised and given the nearest k-means centre (`Clustering.predict`, one
pass over the data per block of points, O(l n) per point). A new point is
not a training point: its affinities to all l points count, so a training
row given as a new point is embedded near, not at, its row of U.

Driving a fit (what a worker does): `prepare_clustering` (the degree pass,
the solver's start, `kpca.fitting.prepare_fit`; the state is the solver's
plain dict, carrying the degrees), its ``run`` with any
`kpca.driver.PassHooks`, and `clustering_from_state` whenever labels are
wanted (after each pass: O(k^2 l) plus k-means on l x k). A checkpointed
state resumes as any fit's, from `solver_state` (the state without the
labels `Clustering.to_state` kept beside it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kpca.affinity import AFFINITY_KERNELS, AffinityRows
from kpca.errors import Degenerate
from kpca.fitting import FitRequest, PreparedFit, prepare_fit
from kpca.kernels import KernelSpec
from kpca.params import ParamError
from kpca.solvers import SOLVERS, SolverState, as_state, served_components

N_INIT = 10  # k-means restarts


@dataclass(frozen=True)
class Clustering:
    """A spectral clustering of l training points into k clusters, and what predicting needs.

    Attributes
    ----------
    labels : ndarray of shape (l,)
        Cluster of each training point, 0 .. k-1.
    embedding : ndarray of shape (l, k)
        Y, the rows of the eigenvectors normalised to unit length (NJW step 3).
    centres : ndarray of shape (k, k)
        The k-means centres in the embedding.
    eigenvalues : ndarray of shape (k,)
        Estimates of the k leading eigenvalues of L, descending (1 is the top one's exact value).
    coefficients : ndarray of shape (k, l)
        ``diag(sqrt(mu) / lambda) A``: ``u(x) = coefficients L(x, :)^T`` (module docstring).
    rows : AffinityRows
        The training data's rows of L (with its degrees).
    state : kpca.solvers.SolverState
        The solver state it came from (`to_state` adds its labels and centres).
    """

    labels: np.ndarray
    embedding: np.ndarray
    centres: np.ndarray
    eigenvalues: np.ndarray
    coefficients: np.ndarray
    rows: AffinityRows
    state: SolverState

    @property
    def n_clusters(self) -> int:
        return int(self.centres.shape[0])

    def embed(self, X: np.ndarray) -> np.ndarray:
        """The row-normalised Nyström embedding of new points X (b, n): (b, k). One pass over the data
        (`kpca.affinity.AffinityRows.affinity_product`), ``2 b l (n + k)`` flops, O(b k) memory."""
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.rows.n_features:
            raise ValueError(f"X: expected shape (b, {self.rows.n_features}), got {X.shape}")
        return _unit_rows(self.rows.affinity_product(X, self.coefficients.T))

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Cluster of each new point (b,): the nearest k-means centre to its `embed`. O(l (n + k)) per point."""
        return nearest(self.embed(X), self.centres)

    def to_state(self) -> SolverState:
        """The solver state carrying the clustering's labels and centres beside it (its ``extras``
        ``cluster_labels``, ``cluster_centres``, saved under those keys): `clustering_from_state` rebuilds
        this clustering from it without k-means."""
        return self.state.with_extras(cluster_labels=self.labels, cluster_centres=self.centres)


CLUSTER_KEYS = ("cluster_labels", "cluster_centres")


def kept_labels(state: SolverState) -> np.ndarray | None:
    """The labels a saved clustering carries beside its solver state (`Clustering.to_state`), or None. O(1)."""
    labels = as_state(state).extras.get("cluster_labels")
    return None if labels is None else np.asarray(labels)


def solver_state(state: SolverState) -> SolverState:
    """The solver's own state in a saved clustering (`Clustering.to_state`; a checkpoint's entries are read
    as their solver's state): without its labels and centres, so that passes continue from it and the next
    clustering is computed afresh. O(1)."""
    return as_state(state).without_extras(*CLUSTER_KEYS)


def clustering_solvers() -> tuple[str, ...]:
    """Names of the solvers that declare themselves clusterable (`kpca.solvers.Solver.clusterable`). O(solvers)."""
    return tuple(name for name, solver in SOLVERS.items() if solver.clusterable)


def check_clustering(n_clusters, n_rows: int, kernel: KernelSpec | None = None, solver: str = "ritz",
                     params: dict | None = None) -> None:
    """`kpca.params.ParamError` naming ``n_clusters`` (not an integer in 2 .. l - 1), ``solver`` (not a
    `clustering_solvers`), ``kernel.type`` (values that are not positive affinities) or ``params.init``
    (the rskpca start, whose weighted centres stand for the rows of K; the Nystrom start, which ``auto``
    takes on more rows than its subset holds, extends its components to the rows of L in the degree pass). What a
    request can be checked for before
    any pass; the solver's own parameters are checked by its ``check``. O(1)."""
    if isinstance(n_clusters, bool) or not isinstance(n_clusters, (int, np.integer)):
        raise ParamError("n_clusters", f"must be an integer, got {n_clusters!r}")
    if not 2 <= n_clusters <= n_rows - 1:
        raise ParamError("n_clusters", f"must be between 2 and {n_rows - 1} (the data's {n_rows} rows minus one), "
                                       f"got {n_clusters}")
    if solver not in clustering_solvers():
        raise ParamError("solver", f"spectral clustering takes the eigenvectors of {', '.join(clustering_solvers())}; "
                                   f"got {solver!r}")
    if kernel is not None and kernel.type not in AFFINITY_KERNELS:
        raise ParamError("kernel.type", f"spectral clustering needs positive affinities: use "
                                        f"{' or '.join(AFFINITY_KERNELS)}, not {kernel.type!r}")
    if params and params.get("init") == "rskpca":  # its shadow centres stand for the rows of K, not of L
        raise ParamError("params.init", f"{params['init']!r} is not available for spectral clustering; use "
                                        "'subset', 'nystrom' or 'random'")


def prepare_clustering(rows: AffinityRows, n_clusters: int, solver: str = "ritz", params: dict | None = None,
                       resume: SolverState | None = None, exact_limit: int | None = None) -> PreparedFit:
    """The fit of the k leading eigenvectors of L ready to run (`kpca.fitting.prepare_fit` over the rows
    of L: the degree pass is its centring pass, ``resume`` a checkpointed solver state, `solver_state`);
    ``run`` it, then `clustering_from_state`. ``exact_limit``: the largest l a dense solver may take
    (default: any). `kpca.params.ParamError` as `check_clustering` and the solver's ``check``. Cost:
    the degree pass, ``2 l^2 n`` flops, plus the solver's start (a warm start: m rows of L)."""
    params = dict(params or {})
    check_clustering(n_clusters, rows.n_rows, rows.kernel, solver, params)
    request = FitRequest(solver, int(n_clusters), params, rows.n_rows if exact_limit is None else exact_limit)
    return prepare_fit(rows, request, resume=resume)


def clustering_from_state(state: SolverState, rows: AffinityRows, seed: int = 0, n_init: int = N_INIT) -> Clustering:
    """The NJW clustering of a solver state's components (module docstring, steps 2-4).

    Labels and centres kept in the state (`Clustering.to_state`) are used as they are; otherwise k-means
    (scikit-learn, ``random_state=seed``, ``n_init`` restarts) runs on the embedding. ``rows`` gets the
    state's degrees. `kpca.errors.Degenerate` naming ``n_clusters`` if fewer than k components have
    variance (NJW needs k eigenvectors). Cost O(k^2 l + k^3) for the components, plus k-means, O(n_init
    iterations l k^2).
    """
    state = as_state(state)  # a checkpoint's entries are read as their solver's state
    centering = rows.restore_centering(state.centering)
    A, AK, mu = served_components(state)  # of M = L + c I; past the numerical rank: zero rows with mu = 0
    found = int(np.sum(mu > 0))
    if found < mu.size:
        raise Degenerate(f"the affinity has only {found} directions with variance, fewer than the {mu.size} "
                         f"clusters asked for (points that are all one point in feature space): cluster with "
                         f"n_clusters <= {found}")
    A, AK = np.asarray(A, dtype=np.float64), np.asarray(AK, dtype=np.float64)
    lam = np.where(mu > 0, mu - centering.shift, 0.0)  # the eigenvalues of L
    scale = np.where(mu > 0, 1.0 / np.sqrt(np.where(mu > 0, mu, 1.0)), 0.0)  # a component without variance: 0
    extension = np.where(lam > 0, np.sqrt(np.maximum(mu, 0.0)) / np.where(lam > 0, lam, 1.0), 0.0)
    embedding = _unit_rows(AK.T * scale[None, :])
    if "cluster_centres" in state.extras:
        centres = np.asarray(state.extras["cluster_centres"], dtype=np.float64)
        labels = np.asarray(state.extras["cluster_labels"])
    else:
        # here, not at the top: scikit-learn's import would slow every API and worker start
        from sklearn.cluster import KMeans

        k = A.shape[0]
        centres = KMeans(n_clusters=k, n_init=n_init, random_state=seed).fit(embedding).cluster_centers_
        labels = nearest(embedding, centres)
    return Clustering(labels=labels, embedding=embedding, centres=centres, eigenvalues=lam,
                      coefficients=A * extension[:, None], rows=rows, state=state)


def picture_coordinates(embedding: np.ndarray) -> np.ndarray:
    """Two coordinates per row to draw a clustering by (l, 2): the embedding's (NJW's unit rows, `Clustering`)
    second and third columns, the leading eigenvectors after the top one (which is D^1/2 1 before the rows are
    scaled, the same for every cluster of a connected graph); the first two where there are only two. O(l)."""
    Y = np.asarray(embedding, dtype=np.float64)
    return np.ascontiguousarray(Y[:, 1:3] if Y.shape[1] >= 3 else Y[:, :2])


def nearest(Y: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Index of the nearest centre (k, m) to each row of Y (b, m), Euclidean. O(b k m)."""
    d2 = np.sum(Y * Y, axis=1)[:, None] - 2.0 * Y @ centres.T + np.sum(centres * centres, axis=1)[None, :]
    return np.argmin(d2, axis=1)


def _unit_rows(U: np.ndarray) -> np.ndarray:
    """U with each row divided by its Euclidean norm (zero rows stay zero): NJW step 3."""
    norms = np.linalg.norm(U, axis=1, keepdims=True)
    return np.divide(U, norms, out=np.zeros_like(U), where=norms > 0)
