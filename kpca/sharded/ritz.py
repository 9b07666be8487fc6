"""The shards' half of the default fit's Rayleigh-Ritz passes (`kpca.sharded.passes.sharded_rayleigh_ritz_pass`,
`kpca.solvers._rayleigh_ritz`): what a `kpca.sharded.shards.Shard` does to its columns in such a pass
(`RitzShard`) and the calls of a `kpca.sharded.shards.ShardGroup` that reach it (`RitzGroup`).

A pass over shards holding ``[A; G; B]`` (the r served components, the g guard vectors, KHA-SMD's B;
k = r + g rows iterated):

1. `RitzShard.to_projections`: the k rows become the Ritz components' projections Z (coefficients X kept);
2. `RitzShard.coefficients` / `RitzShard.add_images`, message by message: ``ZK = Z K'`` (one pass of
   kernel rows, the segments' points and coefficients sent to every shard);
3. the residuals' squared norms (`RitzShard.residuals`, a k-vector reduction); then either the power step
   (`RitzShard.rotate`, a k x k rotation from the k x k Gram reductions) or LOBPCG's step: the basis
   ``[X; W; P]`` formed on each shard from the norms the coordinator sends (`RitzShard.step_grams`,
   returning its Gram matrices' parts), and its rotation with the next previous step
   (`RitzShard.step_rotate`).

Every message is O(k^2) numbers, or a segment's points and coefficients; nothing l-sized. The group
asks its shards through `kpca.sharded.messages.Shards` (``self.shards``), each call a `shard_call` of a
`RitzShard` method.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from kpca.rows import KernelRows
from kpca.sharded.messages import OwnedColumns, OwnedPoints, OwnedSample, SampledParts, Shards, shard_call, summed
from kpca.solvers._rayleigh_ritz import step_basis
from kpca.solvers._rounding import Sample

__all__ = ["RitzShard", "RitzGroup"]


class RitzShard:
    """A `kpca.sharded.shards.Shard`'s Rayleigh-Ritz methods (module docstring): they read and write its ``Z``,
    ``ZK`` (d, size), ``rows`` and ``units``, and keep ``previous`` (LOBPCG's previous step ``(P, PK)``
    on the own columns, or None) across passes."""

    # what `kpca.sharded.shards.Shard` holds and answers, which these methods use
    rows: KernelRows
    first: int
    units: list[slice]
    Z: np.ndarray
    ZK: np.ndarray
    _coefficients: np.ndarray | None = None  # a pass's Ritz coefficients X (k, size)
    _basis: tuple[np.ndarray, np.ndarray] | None = None  # LOBPCG's [X; W; P] and its image, within a pass
    previous: tuple[np.ndarray, np.ndarray] | None = None

    def owned(self, indices: np.ndarray) -> np.ndarray:
        """Positions in ``indices`` (global rows) of the rows this shard owns (`Shard.owned`)."""
        raise NotImplementedError

    def points(self, indices: np.ndarray) -> OwnedPoints:
        """The owned rows of ``indices`` and their points (`Shard.points`)."""
        raise NotImplementedError

    def to_projections(self, V: np.ndarray) -> None:
        """A Rayleigh-Ritz pass's first step on the own columns (`kpca.solvers._rayleigh_ritz`): the k
        iterated rows' coefficients become the Ritz components' projections ``V^T AK`` (V (k, k)), their
        coefficients ``V^T A`` are kept for `residuals`, and their images are cleared, to be added by
        `add_images`. SMD's B and BK are left as they are. O(k^2 size)."""
        k = V.shape[0]
        self.Z = self.Z.copy()
        self.ZK = self.ZK.copy()
        self._coefficients = V.T @ self.Z[:k]
        self.Z[:k] = V.T @ self.ZK[:k]
        self.ZK[:k] = 0.0

    def residuals(self, mu: np.ndarray) -> list[np.ndarray]:
        """This shard's parts of the squared residuals ``(z_i K' - mu_i z_i) . (z_i - mu_i x_i)`` of the
        first ``r = mu.size`` Ritz components of `to_projections` (x_i their coefficients, z_i their
        projections, ``z_i K'`` added by `add_images`), one (r,) per reduction unit: the form of
        `kpca.solvers._rayleigh_ritz.residual` whose rounding is relative to the residual. O(r size)."""
        r = mu.size
        Z, ZK, X = self.Z[:r], self.ZK[:r], self._coefficients[:r]
        return [np.einsum("ij,ij->i", ZK[:, u] - mu[:, None] * Z[:, u], Z[:, u] - mu[:, None] * X[:, u])
                for u in self.units]

    def coefficients(self, indices: np.ndarray, r: int) -> OwnedColumns:
        """The owned rows of ``indices`` with A's columns there (r, k) (as `gather`, with the
        coefficients instead of their images)."""
        pos, X, xn = self.points(indices)
        local = indices[pos] - self.first
        return OwnedColumns(pos, self.Z[:r, local], X, xn, self.rows.centering.column_means[local])

    def add_images(self, points: np.ndarray, sqnorms: np.ndarray | None, column_means: np.ndarray,
                   C: np.ndarray) -> None:
        """``AK[:, own] += C K'[p, own]`` for a segment's points p (C (r, s)): a Rayleigh-Ritz pass's
        second step, segment by segment. Cost ``2 s size (n + r)``."""
        c = self.rows.centering
        row_shift = (c.grand_mean - column_means).astype(self.rows.dtype)
        r = C.shape[0]
        images = np.ascontiguousarray(self.ZK[:r])
        self.rows.points_left_product(points, sqnorms, row_shift, np.ascontiguousarray(C, dtype=self.rows.dtype),
                                      images)
        self.ZK[:r] = images

    def previous_norms(self) -> list[np.ndarray]:
        """This shard's parts of the previous step's squared norms ``diag(P K' P^T)`` (p,), one per
        reduction unit. O(p size)."""
        P, PK = self.previous
        return [np.einsum("ij,ij->i", PK[:, u], P[:, u]) for u in self.units]

    def step_grams(self, mu: np.ndarray, residual_rows, previous_rows) -> list[np.ndarray]:
        """LOBPCG's basis ``B = [X; W; P]`` on the own columns after a Rayleigh-Ritz pass's images
        (`kpca.solvers._rayleigh_ritz.step_basis`, the rows kept and their norms given), kept for
        `step_rotate`; returns its parts of ``[BK BK^T, BK B^T, BK X^T]`` (m, 2m + k), one per
        reduction unit. O(m^2 size)."""
        k = mu.size
        X = self._coefficients
        B, BK = self._basis = step_basis(X, self.Z[:k], self.ZK[:k], mu, residual_rows, self.previous, previous_rows)
        return [np.concatenate([BK[:, u] @ BK[:, u].T, BK[:, u] @ B[:, u].T, BK[:, u] @ X[:, u].T], axis=1)
                for u in self.units]

    def step_rotate(self, V: np.ndarray, D: np.ndarray) -> None:
        """LOBPCG's step on the own columns: the k iterated rows become ``V^T B`` (V (m, k)) and the
        previous step ``D^T B`` (D (m, p); none for p = 0), with their images. O(m k size)."""
        B, BK = self._basis
        k = V.shape[1]
        self.Z, self.ZK = self.Z.copy(), self.ZK.copy()
        self.Z[:k], self.ZK[:k] = V.T @ B, V.T @ BK
        self.previous = (D.T @ B, D.T @ BK) if D.shape[1] else None
        self._basis = None

    def rotate(self, V: np.ndarray) -> None:
        """``A := V^T A`` and ``AK := V^T AK`` on the own columns' first k rows (V (k, k)): the
        Rayleigh-Ritz components of their span, as `kpca.solvers._ritz.ritz_components` makes them.
        O(k^2 size)."""
        k = V.shape[0]
        self.Z = self.Z.copy()
        self.ZK = self.ZK.copy()
        self.Z[:k] = V.T @ self.Z[:k]
        self.ZK[:k] = V.T @ self.ZK[:k]

    def previous_columns(self) -> tuple[np.ndarray, np.ndarray]:
        """``(P, PK)``: this shard's part of LOBPCG's previous step."""
        return self.previous

    def sample_points(self, S: np.ndarray) -> OwnedSample:
        """The sampled global rows S this shard owns: positions, float64 points, the fit's column means,
        the points read from its source in float64 local coordinates (the group's shared origin): what a
        float32 pass's check computes exact kernel rows of (`kpca.solvers._rounding`). O(s n)."""
        pos = self.owned(S)
        local = S[pos] - self.first
        return OwnedSample(pos, self.rows.float64_points(local), np.asarray(self.rows.centering.column_means[local]))

    def sampled_parts(self, points: np.ndarray, S: np.ndarray, column_means: np.ndarray, grand_mean: float,
                      k: int) -> SampledParts:
        """This shard's parts of a float32 pass's check (`kpca.solvers._rounding.Sample`) for its first k
        rows, on its own columns: ``(Z K')[:, S]`` and ``(X K')[:, S]`` from float64 kernel rows of the
        sampled points (fit's centring: ``column_means`` at S, the shards' ``grand_mean``), the raw rows'
        sums (for the exact column means at S), the owned columns of S's Z, ZK and X, and ``z . x``, ``zk .
        x`` and the rows' sums. Cost ``2 s size (n + 2 k)`` flops and a read of its rows in float64."""
        K = self.rows.float64_kernel(points)  # raw (s, size)
        sums = K.sum(axis=1)
        m = np.asarray(self.rows.centering.column_means, dtype=np.float64)
        K += (grand_mean - column_means)[:, None] - m[None, :]
        Z, ZK, X = (np.asarray(M[:k], dtype=np.float64) for M in (self.Z, self.ZK, self._coefficients))
        pos = self.owned(S)
        local = S[pos] - self.first
        return SampledParts(exact=np.vstack([Z, X]) @ K.T, row_sums=sums, positions=pos, Z=Z[:, local],
                            ZK=ZK[:, local], X=X[:, local], zx=np.einsum("ij,ij->i", Z, X),
                            kx=np.einsum("ij,ij->i", ZK, X), z_sum=Z.sum(axis=1), x_sum=X.sum(axis=1),
                            k_sum=ZK.sum(axis=1))


class RitzGroup:
    """A `kpca.sharded.shards.ShardGroup`'s calls of the `RitzShard` methods (module docstring), through its
    ``shards``; ``previous_rows`` counts the rows of LOBPCG's previous step the shards hold."""

    # what `kpca.sharded.shards.ShardGroup` holds, which these methods use
    shards: Shards
    n_components: int
    n_rows: int
    grand_mean: float | None
    bytes_in: int
    bytes_out: int
    previous_rows = 0

    def residuals(self, mu: np.ndarray) -> np.ndarray:
        """The squared residuals of a Rayleigh-Ritz pass's first ``mu.size`` components (`Shard.residuals`),
        summed over the shards in order."""
        return summed(self.shards.each(shard_call(RitzShard.residuals, np.asarray(mu, dtype=np.float64))))

    def to_projections(self, V: np.ndarray) -> None:
        """Every shard's coefficients to the projections ``V^T AK``, images cleared (`Shard.to_projections`)."""
        self.shards.each(shard_call(RitzShard.to_projections, V))
        self.bytes_out += V.nbytes * len(self.shards)

    def coefficients(self, indices: np.ndarray, rows: int | None = None) -> tuple:
        """``(Z[:rows, indices] (rows, s), x, |x|^2, m)`` gathered from the shards that own the rows
        (``rows`` default r: A's columns)."""
        r = self.n_components if rows is None else int(rows)
        C = points = sqnorms = means = None
        for pos, Cs, X, xn, m in self.shards.each(shard_call(RitzShard.coefficients, indices, r)):
            if C is None:
                C, points = np.empty((r, indices.size)), np.empty((indices.size, X.shape[1]), X.dtype)
                sqnorms, means = (None if xn is None else np.empty(indices.size, xn.dtype)), np.empty(indices.size)
            C[:, pos], points[pos], means[pos] = Cs, X, m
            if xn is not None:
                sqnorms[pos] = xn
            self.bytes_in += Cs.nbytes + X.nbytes + m.nbytes + (0 if xn is None else xn.nbytes)
        return C, points, sqnorms, means

    def add_images(self, points: np.ndarray, sqnorms, column_means: np.ndarray, C: np.ndarray) -> None:
        """Every shard adds ``C K'[p, own]`` to its images (`Shard.add_images`)."""
        self.shards.each(shard_call(RitzShard.add_images, points, sqnorms, column_means, C))
        self.bytes_out += (points.nbytes + column_means.nbytes + C.nbytes
                           + (0 if sqnorms is None else sqnorms.nbytes)) * len(self.shards)

    def rounding_sample(self, S: np.ndarray, k: int) -> Sample:
        """`kpca.solvers._rounding.Sample` of a float32 Rayleigh-Ritz pass's first k rows at the sampled
        global columns S: their float64 points gathered from their shards, every shard's parts
        (`Shard.sampled_parts`) summed. O(s n + k s) numbers each way per shard."""
        points, means = None, np.empty(S.size)
        for pos, P, m in self.shards.each(shard_call(RitzShard.sample_points, S)):
            if points is None:
                points = np.empty((S.size, P.shape[1]))
            points[pos], means[pos] = P, m
        parts = self.shards.each(shard_call(RitzShard.sampled_parts, points, S, means, float(self.grand_mean),
                                            int(k)))
        Z, ZK, X = (np.empty((k, S.size)) for _ in range(3))
        for part in parts:
            Z[:, part.positions], ZK[:, part.positions], X[:, part.positions] = part.Z, part.ZK, part.X
        exact, row_sums = _added(part.exact for part in parts), _added(part.row_sums for part in parts)
        self.bytes_out += (points.nbytes + means.nbytes) * len(self.shards)
        return Sample(self.n_rows, Z, ZK, X, exact[:k], exact[k:], means - row_sums / self.n_rows,
                      _added(part.zx for part in parts), _added(part.kx for part in parts),
                      _added(part.z_sum for part in parts), _added(part.x_sum for part in parts),
                      _added(part.k_sum for part in parts))

    def rotate(self, V: np.ndarray) -> None:
        """Every shard's columns rotated by ``V`` (`Shard.rotate`)."""
        self.shards.each(shard_call(RitzShard.rotate, V))
        self.bytes_out += V.nbytes * len(self.shards)

    def previous_columns(self) -> tuple[np.ndarray, np.ndarray]:
        """LOBPCG's previous step ``(P, PK)`` of all l columns, from the shards in order (`previous_rows` > 0).
        O(p l) received."""
        parts = self.shards.each(shard_call(RitzShard.previous_columns))
        return np.concatenate([p[0] for p in parts], axis=-1), np.concatenate([p[1] for p in parts], axis=-1)

    def previous_norms(self) -> np.ndarray:
        """The squared norms ``diag(P K' P^T)`` of LOBPCG's previous step (`RitzShard.previous_norms`),
        summed over the shards in order."""
        return summed(self.shards.each(shard_call(RitzShard.previous_norms)))

    def step_grams(self, mu: np.ndarray, residual_rows, previous_rows) -> np.ndarray:
        """LOBPCG's basis formed on every shard and its Gram matrices ``[BK BK^T, BK B^T, BK X^T]``
        (`RitzShard.step_grams`), summed over the shards in order."""
        return summed(self.shards.each(shard_call(RitzShard.step_grams, mu, residual_rows, previous_rows)))

    def step_rotate(self, V: np.ndarray, D: np.ndarray) -> None:
        """LOBPCG's step on every shard's columns (`RitzShard.step_rotate`)."""
        self.shards.each(shard_call(RitzShard.step_rotate, V, D))


def _added(arrays: Iterable[np.ndarray]) -> np.ndarray:
    """The shards' arrays added in shard order, as ``sum`` adds them (``0 + a_0 + a_1 + ...``)."""
    return np.asarray(sum(arrays))
