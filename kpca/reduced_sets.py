"""Reduced-set density estimates (seed 004): m weighted centres that stand for the l training rows.

A reduced set density estimate (RSDE, seed 004 eq. 9-10) replaces the
kernel density estimate ``p_hat(x) = 1/l sum_i k(x_i, x)`` of the rows by
``p_tilde(x) = 1/l sum_j w_j k(c_j, x)`` over m << l centres ``c_j`` with
weights ``w_j`` (here: counts, the rows each centre stands for, summing to
l). Reduced-set KPCA (`kpca.solvers._reduced`, seed 004 Algorithm 1) then
works on the m x m weighted kernel matrix alone. Every estimate reads the
data through `kpca.rows.KernelRows.chunks` (out of core):

* `shadow_estimate`, the shadow density estimate (ShDE, seed 004 §4,
  Algorithm 2): ONE streaming pass, O(m l n). Rows are taken in order; a
  row within ``epsilon`` of a centre joins the first such centre (in the
  order the centres were made), otherwise it becomes a new centre. This is
  Algorithm 2 exactly ("let c be the first element of X, S its shadow,
  remove S"): a row can only be absorbed by a centre that came before it,
  and by the first of those whose shadow holds it. The radius is
  ``epsilon = sigma / ell`` (eq. 17) with sigma the width of seed 004 eq.
  19, ``k(x, y) = phi(||x - y||^p / sigma^p)``, ``phi(s) = exp(-s)``
  (`shadow_epsilon`). m follows from ell;
* `kmeans_estimate`: k-means centroids with their cluster sizes (seed 004
  §6 after [20]); scikit-learn's ``MiniBatchKMeans`` fed chunk by chunk;
* `paring_estimate`: KDE paring as seed 004 §6 describes it: m rows drawn
  uniformly, each standing for l/m rows, O(m);
* `herding_estimate`: kernel herding (Chen, Welling, Smola 2010; seed 004
  [5]) over the rows as candidates, each pick standing for l/m rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from kpca.kernels import KernelSpec, squared_norms
from kpca.params import ParamError

SHADOW_KERNELS = {"gaussian": np.sqrt(2.0), "laplacian": 1.0}
"""Radial kernels with a width, and the factor from their ``sigma`` to the width of seed 004 eq. 19:
``exp(-||x - y||^2 / (2 sigma^2)) = exp(-||x - y||^2 / (sqrt(2) sigma)^2)``; the Laplacian's is sigma."""

COARSEN = 1.25  # a shadow estimate over max_centres grows epsilon by this factor and merges its centres
BLOCK_ENTRIES = 2**20  # entries of one (rows x centres) distance block, 8 MiB
KMEANS_INIT_ROWS = 1000  # k-means++ runs on a sample of at least this many rows (all if fewer), at least 5 m


@dataclass(frozen=True)
class ReducedSet:
    """m centres standing for l rows.

    Attributes
    ----------
    centres : ndarray of shape (m, n), float64
    counts : ndarray of shape (m,), float64
        Rows each centre stands for (the weights ``w_j`` of seed 004 eq. 9), summing to l.
    epsilon : float or None
        The shadow radius in effect at the end (`shadow_estimate` only).
    """

    centres: np.ndarray
    counts: np.ndarray
    epsilon: float | None = None

    @property
    def size(self) -> int:
        """m, the number of centres."""
        return int(self.centres.shape[0])


def shadow_epsilon(kernel: KernelSpec, ell: float, field: str = "density") -> float:
    """Seed 004 eq. 17: ``epsilon = sigma / ell``, sigma the kernel's width in the form of eq. 19.

    The Gaussian kernel here is ``exp(-d^2 / (2 sigma^2))``, which is eq. 19
    with width ``sqrt(2) sigma`` (p = 2); the Laplacian ``exp(-d / sigma)`` is
    eq. 19 with width sigma (p = 1). So, as in the paper, the kernel between
    a row and its centre is at least ``phi(1 / ell^p)``: ``exp(-1 / ell^2)``
    (Gaussian) or ``exp(-1 / ell)`` (Laplacian), the quantity that bounds the
    estimate's error (Theorems 5.1-5.4). Kernels without a width
    (polynomial, linear, tanh) have no shadow: `ParamError` naming ``field``.
    Cost O(1).
    """
    factor = SHADOW_KERNELS.get(kernel.type)
    if factor is None:
        raise ParamError(field, "the shadow estimate needs a radial kernel with a width "
                                f"({', '.join(SHADOW_KERNELS)}), not {kernel.type}: "
                                "choose density kmeans, paring or herding")
    sigma = kernel.require_resolved().sigma
    return float(factor * sigma / ell)


def shadow_mmd_bound(kernel: KernelSpec, ell: float) -> float:
    """Seed 004 eq. 21: the shadow estimate's maximum mean discrepancy from the data's kernel density
    estimate is at most ``sqrt(2 (kappa - phi(1 / ell^p)))``, ``kappa = phi(0) = 1`` for the kernels
    with a shadow (`SHADOW_KERNELS`; p = 2 Gaussian, p = 1 Laplacian, in the form of eq. 19). In the
    kernel's own units (the RKHS norm of a difference of mean embeddings, at most 2); eq. 23 bounds the
    kernel operator's error by twice it. `ParamError` naming ``density`` for other kernels. O(1)."""
    shadow_epsilon(kernel, ell)  # the kernel has a shadow, or ParamError
    p = 2.0 if kernel.type == "gaussian" else 1.0
    return float(np.sqrt(2.0 * (1.0 - np.exp(-(1.0 / ell) ** p))))


@numba.njit(nogil=True, cache=True)
def _shadow_new(X, labels, centres, n_centres, first_new, eps2):
    """The rows of X that no earlier centre took (``labels < 0``), in order: each joins the first centre
    made in this block (index >= first_new) within sqrt(eps2), else becomes centre ``n_centres``
    (written into ``centres``). Returns the new number of centres. Cost O(b m_new n)."""
    n = X.shape[1]
    for i in range(X.shape[0]):
        if labels[i] >= 0:
            continue
        found = -1
        for j in range(first_new, n_centres):
            d = 0.0
            for k in range(n):
                t = X[i, k] - centres[j, k]
                d += t * t
                if d >= eps2:
                    break
            if d < eps2:
                found = j
                break
        if found < 0:
            centres[n_centres, :] = X[i, :]
            found = n_centres
            n_centres += 1
        labels[i] = found
    return n_centres


class ShadowSet:
    """Algorithm 2 of seed 004, fed block by block: the centres so far, their counts and epsilon.

    Parameters
    ----------
    epsilon : float
        Shadow radius (`shadow_epsilon`).
    n_features : int
    max_centres : int or None
        If the estimate would keep more centres, epsilon grows by `COARSEN`
        and the centres so far are merged by Algorithm 2 itself (each centre
        a row weighted by its count), until they are at most ``max_centres``;
        later rows use the larger epsilon. Each row then lies within the sum
        of the radii used of its centre. None: no bound (m can reach l).

    Cost of `add`: O(b m n) for b rows against m centres (a GEMM against the
    centres of earlier blocks, a jitted loop within the block); memory
    O(m n) plus a block of at most `BLOCK_ENTRIES` distances.
    """

    def __init__(self, epsilon: float, n_features: int, max_centres: int | None = None):
        if not epsilon > 0:
            raise ValueError(f"epsilon: must be > 0, got {epsilon!r}")
        self.epsilon = float(epsilon)
        self.max_centres = max_centres
        self._centres = np.empty((64, int(n_features)))
        self._norms = np.empty(64)
        self._counts = np.zeros(64)
        self.size = 0

    @property
    def centres(self) -> np.ndarray:
        """The centres so far, (m, n), in the order they were made (a view)."""
        return self._centres[: self.size]

    @property
    def counts(self) -> np.ndarray:
        """Rows each centre stands for so far, (m,) (a view)."""
        return self._counts[: self.size]

    def add(self, X: np.ndarray, weights: np.ndarray | None = None) -> None:
        """Take the rows of X (b, n), in order, each standing for ``weights[i]`` rows (default 1)."""
        X = np.ascontiguousarray(X, dtype=np.float64)
        w = np.ones(X.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
        a = 0
        while a < X.shape[0]:
            step = max(16, BLOCK_ENTRIES // max(self.size, 1))
            self._add_block(X[a : a + step], w[a : a + step])
            a += step
            while self.max_centres is not None and self.size > self.max_centres:
                self._coarsen()

    def _add_block(self, X: np.ndarray, w: np.ndarray) -> None:
        m, b = self.size, X.shape[0]
        eps2 = self.epsilon**2
        labels = np.full(b, -1, dtype=np.int64)
        if m:  # the first earlier centre within epsilon (argmax of a boolean row: its first True)
            d2 = squared_norms(X)[:, None] + self._norms[None, :m] - 2.0 * (X @ self._centres[:m].T)
            within = d2 < eps2
            taken = within.any(axis=1)
            labels[taken] = within[taken].argmax(axis=1)
        self._reserve(m + b)
        self.size = _shadow_new(X, labels, self._centres, m, m, eps2)
        self._norms[m : self.size] = squared_norms(self._centres[m : self.size])
        self._counts[: self.size] += np.bincount(labels, weights=w, minlength=self.size)

    def _reserve(self, rows: int) -> None:
        if rows > self._centres.shape[0]:
            cap = max(rows, 2 * self._centres.shape[0])
            for name in ("_centres", "_norms", "_counts"):
                old = getattr(self, name)
                new = np.zeros((cap, *old.shape[1:]))
                new[: old.shape[0]] = old
                setattr(self, name, new)

    def _coarsen(self) -> None:
        """epsilon times `COARSEN`, and Algorithm 2 over the centres so far (weighted by their counts)."""
        centres, counts = self.centres.copy(), self.counts.copy()
        self.epsilon *= COARSEN
        self.size = 0
        self._counts[:] = 0.0
        limit, self.max_centres = self.max_centres, None  # merging never adds centres
        self.add(centres, counts)
        self.max_centres = limit

    def result(self) -> ReducedSet:
        """The estimate so far as a `ReducedSet` (copies), with the epsilon in effect. O(m n)."""
        return ReducedSet(self.centres.copy(), self.counts.copy(), self.epsilon)


def shadow_estimate(rows, epsilon: float, max_centres: int | None = None) -> ReducedSet:
    """The shadow density estimate (seed 004 Algorithm 2) of all rows, in one streaming pass.

    ``rows`` is a `kpca.rows.KernelRows` (or anything with ``chunks()`` and
    ``n_features``); rows are taken in the source's order. Centres are rows
    of the data, pairwise at least ``epsilon`` apart (the final epsilon, see
    `ShadowSet` on ``max_centres``); counts sum to l. Cost O(l m n) time,
    O(m n) memory, one read of every chunk.
    """
    shadow = ShadowSet(epsilon, rows.n_features, max_centres)
    for _, Y in rows.chunks(local=True):  # distances from local coordinates (`kpca.rows`): no offset to cancel
        shadow.add(Y)
    found = shadow.result()
    return ReducedSet(np.asarray(rows.from_local(found.centres), dtype=np.float64), found.counts, found.epsilon)


def uniform_subset(n_rows: int, size: int, seed: int) -> np.ndarray:
    """``size`` distinct row indices in [0, l), uniformly at random, sorted (the subsample of
    ``subsampled`` and ``paring``, the landmarks of ``nystrom``). Cost O(l)."""
    rng = np.random.default_rng([seed, 4])
    return np.sort(rng.choice(int(n_rows), size=int(size), replace=False))


def paring_estimate(rows, n_centres: int, seed: int) -> ReducedSet:
    """KDE paring as seed 004 §6 describes it ("subsamples from the original dataset and computes the
    estimate from the reduced set, at an O(m) cost"): m rows drawn uniformly without replacement, each
    standing for l/m rows. Reduced-set KPCA over it is subsampled KPCA (`uniform_subset`, same seed).
    Cost: the m rows' reads."""
    S = uniform_subset(rows.n_rows, n_centres, seed)
    return ReducedSet(np.asarray(rows.take(S), dtype=np.float64), np.full(S.size, rows.n_rows / S.size))


def nearest_centres(Y: np.ndarray, centres: np.ndarray, centre_norms: np.ndarray) -> np.ndarray:
    """Index of the nearest centre (Euclidean) of every row of Y, shape (b,), in blocks of at most
    `BLOCK_ENTRIES` distances. Cost O(b m n)."""
    out = np.empty(Y.shape[0], dtype=np.int64)
    step = max(1, BLOCK_ENTRIES // max(centres.shape[0], 1))
    for a in range(0, Y.shape[0], step):
        out[a : a + step] = np.argmin(centre_norms[None, :] - 2.0 * (Y[a : a + step] @ centres.T), axis=1)
    return out


def kmeans_estimate(rows, n_centres: int, seed: int, passes: int) -> ReducedSet:
    """k-means centroids with their cluster sizes as counts (the RSDE of seed 004 §6 after [20]).

    scikit-learn's ``MiniBatchKMeans`` (k-means++ start on a fixed-seed
    sample of ``max(KMEANS_INIT_ROWS, 5 m)`` rows), fed the data chunk by chunk
    with ``partial_fit`` for ``passes`` passes in batches of ``max(2 m, 1024)``
    rows (each ``partial_fit`` needs at least m rows), so memory is O(m n)
    plus a batch, whatever l. A last pass assigns every row to its nearest
    centroid and replaces each centroid by the mean of its rows (one Lloyd
    step), so that the centres are exactly the means of the clusters they
    count; empty clusters are dropped. ``KMeans`` would hold the whole array
    in memory and iterate over it up to 300 times. Cost O(l m n) per pass,
    ``passes + 1`` passes.
    """
    from sklearn.cluster import MiniBatchKMeans, kmeans_plusplus  # scikit-learn's import is slow: only here

    m = int(n_centres)
    rng = np.random.default_rng([seed, 5])
    # distances from local coordinates (`kpca.rows`), the centroids back in the data's at the end
    sample = rows.to_local(rows.sample(max(KMEANS_INIT_ROWS, 5 * m), seed), np.float64)
    start, _ = kmeans_plusplus(sample, m, random_state=int(rng.integers(2**31)))
    batch = max(2 * m, 1024)
    km = MiniBatchKMeans(m, init=start, n_init=1, batch_size=batch, random_state=int(rng.integers(2**31)))
    held: list[np.ndarray] = []
    for _ in range(int(passes)):
        for _, Y in rows.chunks(local=True):
            held.append(np.asarray(Y, dtype=np.float64))
            if sum(h.shape[0] for h in held) >= batch:
                km.partial_fit(np.concatenate(held))
                held = []
        if sum(h.shape[0] for h in held) >= m:  # the pass's remainder; fewer than m rows wait for the next
            km.partial_fit(np.concatenate(held))
            held = []
    centres = np.asarray(km.cluster_centers_, dtype=np.float64)
    norms = squared_norms(centres)
    sums = np.zeros_like(centres)
    counts = np.zeros(m)
    for _, Y in rows.chunks(local=True):
        Y = np.asarray(Y, dtype=np.float64)
        labels = nearest_centres(Y, centres, norms)
        np.add.at(sums, labels, Y)
        counts += np.bincount(labels, minlength=m)
    kept = counts > 0
    return ReducedSet(np.asarray(rows.from_local(sums[kept] / counts[kept, None]), dtype=np.float64), counts[kept])


def herding_estimate(rows, n_centres: int) -> ReducedSet:
    """Kernel herding over the rows (Chen, Welling, Smola 2010): m greedy picks, each standing for l/m rows.

    Pick t+1 maximises ``p_hat(x_i) - 1/(t+1) sum_{s <= t} k(x_i, x_s)`` over
    the rows x_i, ``p_hat(x_i) = mean_j k(x_i, x_j)`` the kernel density
    estimate at the row (the column means of K, `kpca.rows.KernelRows.fit_centering`,
    which sets ``rows.centering``). A row picked twice counts twice.
    Cost O(l^2 n) for the density (one pass per block of rows, the cost the
    seed quotes as O(n^2 m)) plus one kernel row, O(l n), per pick; memory O(l).
    """
    l, m = rows.n_rows, int(n_centres)
    density = np.asarray((rows.centering or rows.fit_centering()).column_means, dtype=np.float64)
    herded = np.zeros(l)
    picks = np.zeros(l)
    for t in range(m):
        i = int(np.argmax(density - herded / (t + 1)))
        picks[i] += 1.0
        herded += np.asarray(rows.raw_block(rows.take(np.array([i]))), dtype=np.float64)[0]
    chosen = np.flatnonzero(picks)
    return ReducedSet(np.asarray(rows.take(chosen), dtype=np.float64), picks[chosen] * (l / picks.sum()))
