"""The centring of kernel rows in feature space (seed 000 eq. 4-5; seed 002 eq. 13): the statistics a
centred row needs (`Centering`) and the centring of a block of raw rows (`center_block`).

    K' = K - M K - (M K)^T + M K M,

with ``M`` the l x l matrix of entries 1/l. All rows of ``M K`` equal the
column means ``m`` of ``K`` and all entries of ``M K M`` equal their mean
``m_bar``, so ``K'[i, j] = K[i, j] - m[i] - m[j] + m_bar``. For a new point x
the same centring gives ``k'(x)_j = k(x, x_j) - mean_i k(x, x_i) - m[j] + m_bar``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from kpca.errors import Degenerate

# trace(K')/l below this fraction of the kernel's own scale is rounding: the rows are one point
_VARIANCE_RTOL = 1e-12


@dataclass(frozen=True)
class Centering:
    """Statistics of the training kernel matrix needed to centre any kernel row.

    Attributes
    ----------
    column_means : ndarray of shape (l,)
        ``m[j] = sum_i w_i K[i, j]`` with the weights ``w`` (default ``1/l`` each).
    grand_mean : float
        ``m_bar = sum_j w_j m[j]``.
    mean_diagonal : float
        ``sum_i w_i K'[i, i]``, the mean squared feature-space norm of the centred
        points; the natural scale of the kernel (see `kpca.defaults`).
    weights : ndarray of shape (l,) or None
        The points' weights (summing to 1 for a reduced set); None for equal
        weights ``1/l``. A reduced set (seed 004) stands for many rows with few
        weighted points, whose mean in feature space is ``mu = sum_i w_i
        Phi(x_i)``: every formula of eq. 5 holds with these weighted means.
    """

    column_means: np.ndarray
    grand_mean: float
    mean_diagonal: float
    weights: np.ndarray | None = None

    @classmethod
    def weighted(cls, K: np.ndarray, weights: np.ndarray | None = None, normalize: bool = True) -> Centering:
        """The centring of the points of a (small) kernel matrix K (m, m) with ``weights`` (None: equal),
        scaled to sum 1 unless ``normalize`` is False: then ``mu = sum_i w_i Phi(x_i)`` as given, e.g.
        the projection of a larger set's mean onto the span of these points (any real weights). O(m^2)."""
        m = K.shape[0]
        if weights is None:
            w = np.full(m, 1.0 / m)
        else:
            w = np.asarray(weights, dtype=np.float64)
            w = w / np.sum(w) if normalize else w
        column_means = K.T @ w
        grand_mean = float(w @ column_means)
        mean_diagonal = float(w @ np.diag(K)) - grand_mean
        return cls(column_means, grand_mean, mean_diagonal, None if weights is None else w)

    def row_means(self, K: np.ndarray) -> np.ndarray:
        """``sum_j w_j K[i, j]`` for raw kernel rows K (b, l) against the points: the row term of eq. 5."""
        return K.mean(axis=1) if self.weights is None else K @ self.weights.astype(K.dtype, copy=False)

    def centre_products(self, products: np.ndarray, Cm: np.ndarray, C1: np.ndarray) -> np.ndarray:
        """``C K'`` in place from the raw ``C K`` (d, columns) over this centring's columns (eq. 5 for a
        product): ``C K - (C m) 1^T - (C 1) m^T + m_bar (C 1) 1^T``, with ``Cm = C m`` and ``C1 = C 1``
        (d,) over all l points (a shard holds only its columns of m). Returns ``products``. O(d columns)."""
        products -= Cm[:, None] + C1[:, None] * self.column_means[None, :] - self.grand_mean * C1[:, None]
        return products

    def to_state(self) -> dict:
        """The centring as the entries of a solver state (a checkpoint holds them beside the solver's)."""
        entries = {"centering_column_means": self.column_means, "centering_grand_mean": float(self.grand_mean),
                   "centering_mean_diagonal": float(self.mean_diagonal)}
        if self.weights is not None:
            entries["centering_weights"] = self.weights
        return entries

    @staticmethod
    def scalars_of(entries) -> tuple[float, float]:
        """``(grand_mean, mean_diagonal)`` of a centring's entries (`to_state`): what a sharded fit's
        coordinator keeps, its shards holding the column means."""
        return float(entries["centering_grand_mean"]), float(entries["centering_mean_diagonal"])

    @staticmethod
    def column_entries(column_means: np.ndarray) -> dict:
        """The entry of `to_state` that holds the column means (l,): what the shards of a sharded fit keep,
        joined back into a state's centring (`kpca.sharded.passes.join_state`)."""
        return {"centering_column_means": column_means}

    def require_variance(self) -> Centering:
        """Itself, or `Degenerate` if the centred rows have no variance in feature space
        (``trace(K')/l`` at rounding level relative to the kernel's mean diagonal and mean), or a negative
        one (an indefinite kernel, said so). O(1)."""
        scale = abs(self.mean_diagonal + self.grand_mean) + abs(self.grand_mean)
        if self.mean_diagonal < -_VARIANCE_RTOL * scale:  # a positive semi-definite K' has no negative trace
            raise Degenerate(f"the kernel is not positive semi-definite on these rows (trace(K')/l = "
                             f"{self.mean_diagonal:.3g} < 0: K' has negative eigenvalues and no feature space "
                             "holds the rows): kernel PCA needs a positive semi-definite kernel; change the "
                             "kernel or its parameters (tanh's gamma and offset)")
        if not self.mean_diagonal > _VARIANCE_RTOL * scale:
            raise Degenerate("the rows have no variance in feature space (trace(K')/l = "
                             f"{self.mean_diagonal:.3g}): all rows are equal, or the kernel maps them to one "
                             "point (check the data, or the kernel's width or scale)")
        return self

    @classmethod
    def from_state(cls, entries) -> Centering:
        """The centring whose entries `to_state` gave (a solver state's ``centering``,
        `kpca.solvers.SolverState`, or a checkpoint's entries, which hold them)."""
        weights = entries.get("centering_weights")
        return cls(np.asarray(entries["centering_column_means"]), float(entries["centering_grand_mean"]),
                   float(entries["centering_mean_diagonal"]), None if weights is None else np.asarray(weights))


def center_block(K: np.ndarray, row_means: np.ndarray, centering: Centering) -> np.ndarray:
    """Centre a block of kernel rows in place (eq. 5): ``K - r[:, None] - m[None, :] + m_bar``.

    Parameters
    ----------
    K : ndarray of shape (b, l)
        Raw kernel rows against the l training points.
    row_means : ndarray of shape (b,)
        ``mean_j K[i, j]`` (for training rows this equals ``m[idx]``).
    """
    cm = centering.column_means
    _center_in_place(K, np.ascontiguousarray(row_means, dtype=K.dtype),
                     cm if cm.dtype == K.dtype else cm.astype(K.dtype), K.dtype.type(centering.grand_mean))
    return K


@numba.njit(nogil=True, cache=True, fastmath=True)
def _center_in_place(K, row_means, column_means, grand_mean):
    """One pass of eq. 5 over a block: ``K[i, j] += m_bar - r_i - m_j``."""
    for i in range(K.shape[0]):
        shift = grand_mean - row_means[i]
        for j in range(K.shape[1]):
            K[i, j] += shift - column_means[j]
