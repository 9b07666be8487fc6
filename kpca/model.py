"""A fitted kernel PCA model as it is served: projection onto its components, and the expansion of a
projection in feature space that every pre-image method (`kpca.preimage`) starts from.

Notation (defined once). Training points (or a reduced set's centres)
``x_1..x_l`` in R^n (``rows.source``), kernel ``k``, feature map ``Phi``,
kernel matrix ``K`` (l x l, never formed), its column means ``m`` (l,) and
their mean ``m_bar`` (`kpca.rows.Centering`), centred kernel matrix
``K' = K - 1 m^T - m 1^T + m_bar 1 1^T`` (seed 000 eq. 5). A model has ``r``
components ``W = A Phi'`` with expansion coefficients ``A`` (r x l) and keeps
``AK = A K'`` (r x l). For a point x:

* components ``beta = A k'(x)`` (r,), with ``k'(x)`` the centred kernel row;
* the projection plus the mean ``mu = sum_i w_i Phi(x_i)`` (weights ``w_i = 1/l``
  unless the centring has its own, a reduced set's: `kpca.rows.Centering`) is
  ``Psi(x) = P Phi'(x) + mu = sum_i gamma_i Phi(x_i)`` with
  ``alpha = A^T beta`` and ``gamma = alpha + (1 - sum_j alpha_j) w``
  (``P Phi'(x) = sum_i alpha_i (Phi(x_i) - mu)``; adding mu gives gamma).

Maintenance note (no O(l^2) work). Write ``K = K' + 1 m^T + m 1^T - m_bar 1 1^T``
and ``K' alpha = K' A^T beta = (A K')^T beta = AK^T beta`` (K' symmetric), so

    K alpha = AK^T beta + (m . alpha) 1 + (sum alpha) m - m_bar (sum alpha) 1,
    K w     = m,
    K gamma = K alpha + c m,            c = 1 - sum alpha,
    ||Psi||^2 = gamma^T K gamma = gamma . (K gamma),

all O(r l) per point, and ``||Psi(x) - Phi(x_i)||^2 = ||Psi||^2 - 2 (K gamma)_i
+ K_ii`` for all i costs O(r l) more once the O(l n) diagonal of K is known.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from kpca.kernels import KernelSpec, kernel_diagonal
from kpca.params import check_points
from kpca.rows import Centering, KernelRows

_BLOCK_ENTRIES = 2**22  # entries of one (rows x l) working array, about 32 MiB in float64


class Target(NamedTuple):
    """Psi for a block of b points: ``gamma`` (b, l), ``k_gamma = K gamma`` (b, l), ``norm2 = ||Psi||^2`` (b,)."""

    gamma: np.ndarray
    k_gamma: np.ndarray
    norm2: np.ndarray


@dataclass
class KernelModel:
    """A trained kernel PCA model, as projection and every pre-image method need it.

    Parameters
    ----------
    rows : KernelRows
        The points the components are expanded over (training data, or a
        reduced set's centres) and the kernel, with ``rows.centering`` set.
    A : ndarray of shape (r, l)
        Expansion coefficients; components ``W = A Phi'``.
    AK : ndarray of shape (r, l)
        ``A K'``.
    eigenvalues : ndarray of shape (r,), optional
        Variance along each component (descending).

    Notes
    -----
    Costs for m points: `project` O(m l (n + r)); `target` O(m l (n + r)) and
    `distances` O(m l) more, plus, once, O(l n) for the diagonal of K. Work is
    done in blocks of points so that memory stays O(block * l).
    """

    rows: KernelRows
    A: np.ndarray
    AK: np.ndarray
    eigenvalues: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.rows.centering is None:
            raise ValueError("rows: centering is not set; call rows.fit_centering() or set rows.centering")
        self.A = np.ascontiguousarray(self.A, dtype=np.float64)
        self.AK = np.ascontiguousarray(self.AK, dtype=np.float64)
        l = self.rows.n_rows
        if self.A.ndim != 2 or self.A.shape[1] != l:
            raise ValueError(f"A: expected shape (r, {l}), got {self.A.shape}")
        if self.AK.shape != self.A.shape:
            raise ValueError(f"AK: expected shape {self.A.shape} like A, got {self.AK.shape}")
        self._diagonal: np.ndarray | None = None

    def _centering(self) -> Centering:
        """The rows' centring, which `__post_init__` requires set; ValueError if it was unset since."""
        if self.rows.centering is None:
            raise ValueError("rows: centering is not set; call rows.fit_centering() or set rows.centering")
        return self.rows.centering

    # -- sizes ---------------------------------------------------------------
    @property
    def kernel(self) -> KernelSpec:
        return self.rows.kernel

    @property
    def n_components(self) -> int:
        return self.A.shape[0]

    @property
    def n_features(self) -> int:
        return self.rows.n_features

    @property
    def training_diagonal(self) -> np.ndarray:
        """``K_ii = k(x_i, x_i)`` for all points of the expansion, shape (l,). One pass, O(l n), cached."""
        if self._diagonal is None:
            self._diagonal = np.concatenate(
                [kernel_diagonal(np.asarray(Y, dtype=np.float64), self.kernel) for _, Y in self.rows.chunks()])
        return self._diagonal

    def block_rows(self, factor: int = 1) -> int:
        """Points per block so that a (block * factor, l) array has about `_BLOCK_ENTRIES` entries."""
        return max(1, _BLOCK_ENTRIES // (self.rows.n_rows * max(1, factor)))

    def map_blocks(self, X: np.ndarray, block_fn, width: int) -> np.ndarray:
        """``block_fn`` applied to the rows of X in blocks of `block_rows` points, results stacked:
        shape (m, width). Memory O(block * l) whatever m."""
        out = np.empty((X.shape[0], width))
        step = self.block_rows()
        for a in range(0, X.shape[0], step):
            out[a : a + step] = block_fn(X[a : a + step])
        return out

    def check_points(self, X, name: str = "X") -> np.ndarray:
        """X as a C-contiguous float64 array of shape (m, n); ValueError naming ``name`` otherwise."""
        return check_points(X, self.n_features, name)

    def check_components(self, B, n_points: int | None = None) -> np.ndarray | None:
        """B (projections, shape (m, r)) as C-contiguous float64, None kept; ValueError naming
        ``components`` for another shape, another m than ``n_points``, or non-finite values."""
        if B is None:
            return None
        B = np.ascontiguousarray(B, dtype=np.float64)
        m = B.shape[0] if B.ndim == 2 and n_points is None else n_points
        if B.shape != (m, self.n_components):
            raise ValueError(f"components: expected shape ({m}, {self.n_components}), got {B.shape}")
        if not np.isfinite(B).all():
            raise ValueError("components: values must be finite")
        return B

    # -- projection and expansion -------------------------------------------
    def project(self, X) -> np.ndarray:
        """Components ``beta = A k'(x)`` of the rows of X.

        Parameters
        ----------
        X : ndarray of shape (m, n)

        Returns
        -------
        ndarray of shape (m, r). Cost O(m l (n + r)), memory O(block * l).
        """
        return self.map_blocks(self.check_points(X), self._project_block, self.n_components)

    def _project_block(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(self.rows.transform_block(X), dtype=np.float64) @ self.A.T

    @property
    def weights(self) -> np.ndarray:
        """The points' weights w (l,), summing to 1 (module docstring)."""
        w = self._centering().weights
        return np.full(self.rows.n_rows, 1.0 / self.rows.n_rows) if w is None else w

    def input_space_components(self, count: int | None = None) -> np.ndarray:
        """The leading components drawn in input space: ``v_k = sum_i A_ki (x_i - x_bar)``.

        A kernel component ``W_k = sum_i A_ki Phi'(x_i)`` has no point of input
        space of its own; ``v_k`` is the same expansion with the feature map
        replaced by the identity (``x_bar = sum_i w_i x_i``, the weighted mean).
        For the linear kernel it is exactly the k-th linear principal direction
        (unit length, up to sign); for a Gaussian kernel of growing
        width the centred kernel approaches the linear one (up to a factor), so
        ``v_k`` approaches the linear principal direction, which is how seed
        002 (Fig. 4, §4.2) shows the components of image patches.

        Parameters
        ----------
        count : int, optional
            Components to draw, ``1 <= count <= r`` (default r).

        Returns
        -------
        ndarray of shape (count, n). Cost: one pass over the l rows, O(count l n).
        """
        count = self.n_components if count is None else int(count)
        if not 1 <= count <= self.n_components:
            raise ValueError(f"count: must lie in [1, {self.n_components}], got {count}")
        A, w = self.A[:count], self.weights
        total = np.zeros((count, self.n_features))
        mean = np.zeros(self.n_features)
        for start, Y in self.rows.chunks():
            Y = np.asarray(Y, dtype=np.float64)
            stop = start + Y.shape[0]
            total += A[:, start:stop] @ Y
            mean += w[start:stop] @ Y
        return total - A.sum(axis=1)[:, None] * mean[None, :]

    def target_from_components(self, B: np.ndarray) -> Target:
        """gamma, ``K gamma`` and ``gamma^T K gamma`` for rows of B (module note). Cost O(m r l)."""
        B = np.asarray(B, dtype=np.float64)
        c = self._centering()
        m = np.asarray(c.column_means, dtype=np.float64)
        alpha = B @ self.A
        sum_alpha = alpha.sum(axis=1)
        shift = 1.0 - sum_alpha
        gamma = alpha + shift[:, None] * self.weights[None, :]
        k_alpha = B @ self.AK  # K' alpha
        k_alpha += (alpha @ m - c.grand_mean * sum_alpha)[:, None]
        k_alpha += sum_alpha[:, None] * m[None, :]
        k_gamma = k_alpha + shift[:, None] * m[None, :]  # + shift * K w
        norm2 = np.einsum("ij,ij->i", gamma, k_gamma)
        return Target(gamma, k_gamma, norm2)

    def target(self, X: np.ndarray) -> Target:
        """`Target` of the projections of the rows of X (a block of points). Cost O(m l (n + r))."""
        return self.target_from_components(self._project_block(X))

    def distances(self, target: Target) -> np.ndarray:
        """``||Psi - Phi(x_i)||^2`` (b, l) for a target, clipped at 0. Cost O(b l)."""
        d = target.norm2[:, None] - 2.0 * target.k_gamma + self.training_diagonal[None, :]
        return np.maximum(d, 0.0, out=d)
