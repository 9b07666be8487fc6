"""Rows of NJW's normalised affinity ``L = D^-1/2 A D^-1/2`` on demand, for spectral clustering.

Spectral clustering (seed 000 §5.3, after Ng, Jordan and Weiss [13]) takes
the leading eigenvectors of ``L``, where ``A`` is the affinity matrix of the
l training points: the *uncentred* kernel matrix K with its diagonal set to
0, ``A_ij = k(x_i, x_j)`` for i != j and ``A_ii = 0`` (NJW's step 1), and
``D = diag(d)`` holds its row sums (degrees) ``d_i = sum_{j != i} K[i, j]``.

*What the solvers see.* L is not positive semi-definite (its trace is 0;
its spectrum lies in [-1, 1], that of the stochastic matrix ``D^-1 A``),
and the KHA family and the served components (`kpca.solvers._ritz`) need a
positive semi-definite matrix, whose leading eigenvectors they find as
those of a covariance. `AffinityRows` therefore serves

    M = L + c I,     c = min(1, max_i k(x_i, x_i) / d_i),

which has L's eigenvectors and eigenvalues ``lambda + c``, and is positive
semi-definite: ``L + diag(k / d) = D^-1/2 K D^-1/2`` is (K is), and ``c I``
is at least that diagonal (and ``c = 1`` at least ``-lambda_min(L)``).
The shift is the smallest such bound that the degree pass gives; it is kept
in the state (``affinity_shift``) and taken off again where eigenvalues
are reported and new points embedded (`kpca.clustering`). Every solver
and the pass driver (`kpca.driver.run_passes`) read the rows of M where
they read centred kernel rows, through the same methods (``block``,
``square``, ``left_product``, ``dense``, ``chunks``, ``n_rows``,
``fit_centering``).

Design. ``M[i, j] = s_i K[i, j] s_j`` for i != j, ``M[i, i] = c``, with
``s = d^-1/2``: a kernel tile is the uncentred one scaled on both sides,
so the tile machinery of `kpca.kernels` is reused unchanged (its additive
shifts, which fold eq. 5 into the tiles, are not used), the scaling is
applied around it and the diagonal replaced:

* ``block(p) = diag(s_p) K[p, :] diag(s)`` with the entries ``(i, p_i)``
  set to c, and ``square(p)`` likewise, one O(b l) sweep over the rows the
  tiles wrote;
* ``left_product(p, C, out, T, start)``: ``C M[p, :] = ((C diag(s_p))
  K[p, :]) diag(s) + C diag(c - s_p^2 k_p)`` on the columns p (``k_p`` the
  kernel's diagonal at the block's points), i.e. the fused tile product
  with the left factor's columns scaled, into a (d, l) buffer whose columns
  are then scaled by s, corrected on the block's own columns and added to
  ``T start``: the rows are still never formed, memory O(d l).

*Clusterings fitted before NJW's A_ii = 0* (states without
``affinity_shift``) kept ``A_ii = k(x_i, x_i)``, i.e. L of the kernel
matrix itself, positive semi-definite with no shift; such a state is
restored as it was made (``self_affinity``), so that it serves and resumes
exactly. NJW removes the self-affinity, which otherwise weighs every
point's own cluster membership by ``k(x, x) / d_i``, most for the points of
low degree (outliers, sparse clusters).

*Centring is the identity.* NJW uses the eigenvectors of L itself (the top
one is ``D^1/2 1``, eigenvalue 1, and it is kept among the k); centring in
feature space would remove it and change the embedding. The solvers'
"centring pass" (``fit_centering``, which exact and lanczos call and which
the iterative start expects to have run) is therefore the *degree pass*: one
streaming pass of ``1^T K`` over the chunks, ``2 l^2 n`` flops and O(l)
memory -- the same pass KernelRows uses for its column means. It returns an
`AffinityCentering`: zero means (so anything that applies eq. 5 applies
nothing) and ``mean_diagonal = mean_i k(x_i, x_i) / d_i``, the scale the
default gains are set from (`kpca.defaults`), carrying the degrees and the
shift so that every solver state (``to_state``) holds what resuming and
predicting need. That scale is the trace over l of ``L + diag(k / d) =
D^-1/2 K D^-1/2``, the affinity's structured part, not of M (``c``): the
shift adds the same variance c to every direction and nothing the
components learn, and gains set from c (up to ``max_i 1 / d_i``, an
outlier's) are too small (on three separated blobs, KHA-SMD from a random
start still mixes them after 20 passes with those, and separates them in 4
with these).

New points (`AffinityRows.transform_block`, `AffinityRows.affinity_product`)
are not training points: ``L(x, x_j) = k(x, x_j) / sqrt(d(x) d_j)`` with
all l affinities in ``d(x) = sum_j k(x, x_j)`` (NJW's out-of-sample
extension by Nyström), no shift.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kpca.errors import Degenerate
from kpca.kernels import kernel_block_into, kernel_diagonal, kernel_left_product_into, squared_norms
from kpca.rows import Centering, KernelRows

AFFINITY_KERNELS = ("gaussian", "laplacian")  # kernels whose values are positive: affinities


@dataclass(frozen=True)
class AffinityCentering(Centering):
    """The "centring" of M: the identity (zero means), with the degrees and the shift (module docstring).

    Attributes
    ----------
    degrees : ndarray of shape (l,)
        ``d_i = sum_{j != i} k(x_i, x_j)`` (with ``j = i`` where ``self_affinity``), all positive.
    shift : float
        c, M's diagonal; 0 where ``self_affinity``.
    self_affinity : bool
        A state fitted before NJW's ``A_ii = 0`` (module docstring): M is ``D^-1/2 K D^-1/2``.
    mean_diagonal : float
        ``mean_i k(x_i, x_i) / d_i``, the gains' scale (module docstring).
    """

    degrees: np.ndarray | None = None
    shift: float = 0.0
    self_affinity: bool = False

    @classmethod
    def of_degrees(cls, degrees: np.ndarray, diagonal: np.ndarray) -> AffinityCentering:
        """The centring of M from the degrees (l,) of A and the kernel's diagonal ``k(x_i, x_i)`` (l,):
        ``c = min(1, max_i k(x_i, x_i) / d_i)`` and the gains' scale ``mean_i k(x_i, x_i) / d_i``;
        `Degenerate` if a degree is not positive and finite (an affinity must be). O(l)."""
        degrees = np.asarray(degrees, dtype=np.float64)
        if not np.all(np.isfinite(degrees)) or not np.all(degrees > 0):
            raise Degenerate("some points have no positive affinity to the data (degree <= 0 or not finite): "
                             f"spectral clustering needs a kernel with positive values ({', '.join(AFFINITY_KERNELS)})")
        ratio = np.asarray(diagonal, dtype=np.float64) / degrees
        return cls(np.zeros(degrees.size), 0.0, float(np.mean(ratio)), None, degrees, float(min(1.0, ratio.max())))

    def to_state(self) -> dict:
        """The entries of `Centering.to_state` plus ``affinity_degrees`` and (NJW) ``affinity_shift``."""
        extra = {} if self.self_affinity else {"affinity_shift": self.shift}
        return {**super().to_state(), "affinity_degrees": self.degrees, **extra}

    @classmethod
    def from_state(cls, entries) -> AffinityCentering:
        """The centring whose entries `to_state` gave (a solver state's ``centering``; without
        ``affinity_shift``: a state with the self-affinity, module docstring)."""
        base = Centering.from_state(entries)
        legacy = "affinity_shift" not in entries
        return cls(base.column_means, base.grand_mean, base.mean_diagonal, None,
                   np.asarray(entries["affinity_degrees"], dtype=np.float64),
                   0.0 if legacy else float(entries["affinity_shift"]), legacy)


class AffinityRows(KernelRows):
    """Rows of ``M = L + c I``, ``L = D^-1/2 A D^-1/2`` (module docstring) from any row source, chunk by chunk.

    Same parameters as `kpca.rows.KernelRows`. ``fit_centering`` (the degree
    pass) or setting ``centering`` to an `AffinityCentering` (a saved state's)
    must come before any row is asked for. Costs as KernelRows', plus O(b l)
    for the scaling of a block and O(d l) for that of a left product.
    """

    centering: AffinityCentering | None

    def use_precision(self, dtype) -> None:
        """Affinity rows stay float64 (their degrees scale every entry): a fit's ``kernel_precision`` is not
        applied, and `kpca.fitting.prepare_fit` reports float64."""

    @property
    def degrees(self) -> np.ndarray:
        """``d`` (l,), the training points' degrees."""
        degrees = self._require_centering().degrees
        if degrees is None:  # of_degrees and from_state always set them; a centring made by hand may not
            raise ValueError("centering: the affinity centring has no degrees")
        return degrees

    def _require_centering(self) -> AffinityCentering:
        """The degrees and shift (`fit_centering` or `restore_centering` sets them); RuntimeError before,
        TypeError for a plain `kpca.rows.Centering` set by hand."""
        centering = super()._require_centering()
        if not isinstance(centering, AffinityCentering):
            raise TypeError(f"centering: affinity rows need an AffinityCentering, got a {type(centering).__name__}")
        return centering

    def _scales(self) -> np.ndarray:
        """``s = d^-1/2`` (l,) in the rows' dtype."""
        return (1.0 / np.sqrt(self.degrees)).astype(self.dtype)

    def restore_centering(self, entries) -> AffinityCentering:
        """Set and return the degrees whose entries (`AffinityCentering.to_state`) a solver state carries
        (`kpca.solvers.SolverState.centering`). O(l)."""
        self.centering = AffinityCentering.from_state(entries)
        return self.centering

    def fit_centering(self, block_size: int = 1024) -> AffinityCentering:
        """The degree pass: ``d = K 1 - diag(K)`` by `KernelRows.fit_centering`'s column sums (K is
        symmetric), and the shift c. Sets and returns ``centering``. Cost ``2 l^2 n`` flops, O(l) memory
        besides one block of data rows."""
        column_sums = super().fit_centering(block_size).column_means * self.n_rows
        self.centering = None  # not the centring of eq. 5, whatever follows
        diagonal = np.concatenate([kernel_diagonal(np.asarray(Y, dtype=np.float64), self.kernel)
                                   for _, Y in self.chunks()])
        self.centering = AffinityCentering.of_degrees(column_sums - diagonal, diagonal)  # A_ii = 0
        return self.centering

    def fit_centering_times(self, C: np.ndarray, block_size: int = 1024) -> np.ndarray:
        """The degree pass (`fit_centering`), then ``C M`` (d, l) for C (d, l), float64, in a second pass:
        M's scaling needs every degree before its first row, so the two cannot share a pass as
        `KernelRows.fit_centering_times` does. Cost ``2 l^2 (2 n + d)`` flops, O(d l) memory."""
        self.fit_centering(block_size)
        return self.times(C, block_size)

    def _diagonal_fix(self, indices: np.ndarray, X: np.ndarray) -> np.ndarray | None:
        """What to add to the scaled kernel's diagonal entries ``s_i^2 k(x_i, x_i)`` of the points
        ``indices`` (rows X) to make them M's: ``c - s_i^2 k(x_i, x_i)`` (b,); None for a state with the
        self-affinity, whose M keeps them. O(b n)."""
        c = self._require_centering()
        if c.self_affinity:
            return None
        return c.shift - self._scales()[indices] ** 2 * kernel_diagonal(np.asarray(X, dtype=np.float64), self.kernel)

    def block(self, indices: np.ndarray) -> np.ndarray:
        """``M[indices, :]`` of shape (b, l). Cost one pass, ``2 b l n`` flops + O(b l)."""
        indices = np.asarray(indices)
        s = self._scales()
        X = self.take_local(indices)
        K = self.local_block(X, None if self._sqnorms is None else self._sqnorms[indices])
        K *= s[indices, None]
        K *= s[None, :]
        fix = self._diagonal_fix(indices, X)
        if fix is not None:
            K[np.arange(indices.size), indices] += fix.astype(K.dtype)
        return K

    def square(self, indices: np.ndarray) -> np.ndarray:
        """``M[indices][:, indices]`` of shape (b, b) from the b points alone. Cost ``2 b^2 n`` flops."""
        indices = np.asarray(indices)
        X = self.take_local(indices)
        xn = None if self._sqnorms is None else self._sqnorms[indices]
        s = self._scales()[indices]
        out = kernel_block_into(np.empty((indices.size, indices.size), dtype=self.dtype), 0, X, X, self.kernel, xn, xn)
        out *= s[:, None]
        out *= s[None, :]
        fix = self._diagonal_fix(indices, X)
        if fix is not None:
            out[np.arange(indices.size), np.arange(indices.size)] += fix.astype(out.dtype)  # indices are distinct
        return out

    def left_product(self, indices: np.ndarray, C: np.ndarray, out: np.ndarray, T: np.ndarray | None = None,
                     start: np.ndarray | None = None) -> np.ndarray:
        """``out = T start + C M[indices, :]`` (default ``out += C M[indices, :]``) without forming the rows:
        ``(C diag(s_p)) K[p, :]`` tile by tile (`kpca.kernels.kernel_left_product_into`) into a (d, l)
        buffer, then its columns scaled by s and the block's own columns corrected to M's diagonal.
        Cost ``2 b l (n + d)`` flops + O(d l); memory O(d l)."""
        indices = np.asarray(indices)
        s = self._scales()
        C = np.ascontiguousarray(C, dtype=self.dtype)
        if out.shape != (C.shape[0], self.n_rows) or C.shape[1] != indices.size:
            raise ValueError(f"out, C: expected shapes ({C.shape[0]}, {self.n_rows}) and ({C.shape[0]}, "
                             f"{indices.size}), got {out.shape} and {C.shape}")
        X = self.take_local(indices)
        xn = None if self._sqnorms is None else self._sqnorms[indices]
        product = np.zeros(out.shape, dtype=out.dtype)
        scaled = np.ascontiguousarray(C * s[indices][None, :])
        for first, Y, yn in self._chunks_with_norms():
            kernel_left_product_into(product, first, scaled, X, Y, self.kernel, xn, yn)
        product *= s[None, :]
        fix = self._diagonal_fix(indices, X)
        if fix is not None:  # indices are distinct
            product[:, indices] += (C * fix[None, :]).astype(product.dtype)
        start = out if start is None else start
        if T is None and start is out:
            out += product
        else:
            np.add(start if T is None else T @ start, product, out=out)
        return out

    def transform_block(self, X: np.ndarray) -> np.ndarray:
        """``L(x, x_j) = k(x, x_j) / sqrt(d(x) d_j)`` (b, l) for new points, ``d(x) = sum_j k(x, x_j)``
        (rows of a point with no affinity, d(x) = 0, are 0). Cost one pass, ``2 b l n`` flops."""
        K = self.raw_block(X)
        dx = K.sum(axis=1, dtype=np.float64)
        K *= self._scales()[None, :]
        K *= _inverse_root(dx).astype(K.dtype)[:, None]
        return K

    def affinity_product(self, X: np.ndarray, M: np.ndarray) -> np.ndarray:
        """``L(X, data) M`` (b, d) for new points X (b, n) and M (l, d), and nothing of size b l: the rows
        ``[(diag(s) M)^T; 1^T] K(data, X)`` are accumulated data chunk by data chunk with the fused tile
        product (the new points' degrees ``d(x)`` are the last row), then divided by ``sqrt(d(x))``.
        Cost one pass, ``2 b l (n + d)`` flops; memory O(b d) besides the tiles."""
        X = self.to_local(X)
        s = 1.0 / np.sqrt(self.degrees)
        C = np.vstack([(np.asarray(M, dtype=np.float64) * s[:, None]).T, np.ones((1, self.n_rows))])
        acc = np.zeros((C.shape[0], X.shape[0]))
        xn = None if self._sqnorms is None else squared_norms(X)
        for first, Y, yn in self._chunks_with_norms():
            kernel_left_product_into(acc, 0, np.ascontiguousarray(C[:, first : first + Y.shape[0]]), Y, X,
                                     self.kernel, yn, xn)
        return (acc[:-1] * _inverse_root(acc[-1])[None, :]).T


def _inverse_root(d: np.ndarray) -> np.ndarray:
    """``d^-1/2`` where d > 0, else 0."""
    return np.divide(1.0, np.sqrt(np.maximum(d, 0.0)), out=np.zeros(d.shape), where=d > 0)

