"""Sharded passes of the KHA family: the rows split into contiguous shards, each keeping its columns of
the solver state, with only small messages between the shards and a coordinator (docs/scaling.md).

A `Shard` owns rows ``first .. stop-1`` of the data (a `kpca.rows.KernelRows` over its own rows) and
the same columns of ``Z = [A; G; B]`` and ``ZK = [AK; GK; BK]`` (d x size) and of the centring's column
means ``m``: A the r served components, G the g guard vectors that Rayleigh-Ritz passes iterate beside
them (`kpca.solvers._rayleigh_ritz`; g = 0 for the stochastic passes), B KHA-SMD's r rows (none for the
rest of the family), so d = r + g (+ r). A `ShardGroup` is the coordinator's view of the shards, in a fixed
order: it gathers columns and points from the shards that own them, broadcasts segment updates, and
sums the shards' partial products in shard order (deterministic; with a reduction unit, `Shard`, in
global order of units, so that the result does not depend on the split). This module runs every shard in
this process (`LocalShards`); the dask layer puts each `Shard` on its own worker
(`workers.shards.ActorShards`): the group asks either through `kpca.sharded.messages.Shards`, each
message a `kpca.sharded.messages.ShardCall` of a `Shard` method. The coordinator's numerics are
`kpca.sharded.kha_step`; the passes, the centring and the start over a group are `kpca.sharded.passes`;
a shard's part of the default fit's Rayleigh-Ritz passes is `kpca.sharded.ritz`.

Per segment of s rows (normally a block of b), with n features, the messages are:

========================  ==============================  ======================================
message                   shard -> coordinator            coordinator -> every shard
========================  ==============================  ======================================
`ShardGroup.gather`       its columns of ZK[:, p] (d x k),
                          x_p, |x_p|^2, m[p] (k x n, k, k)
`ShardGroup.products`     Z_s AK_s^T (d x r), SMD only
`ShardGroup.apply`                                        `SegmentUpdate`: Tc (d x d), Cc (d x s),
                                                          p, x_p, |x_p|^2, m[p] (s x n, 3 s)
once per block / pass     diag(A K' A^T) (r); row norms
                          of A, AK (2 r)
========================  ==============================  ======================================

(k the segment's rows in that shard, sum k = s): O(r s + s n) per shard, independent of l.
"""

from __future__ import annotations

from typing import Iterator, Sequence, TypeVar

import numpy as np

from kpca.kernels import KernelSpec, kernel_block_into
from kpca.rows import Centering, KernelRows, default_origin
from kpca.sharded.kha_step import SHARDED_KEYS, STATE_COLUMNS
from kpca.sharded.messages import (Gathered, OwnedColumns, OwnedPoints, SegmentUpdate, ShardCall, Shards, shard_call,
                                   summed)
from kpca.sharded.ritz import RitzGroup, RitzShard
from kpca.solvers._blocked import scatter_add

__all__ = ["Gathered", "Shard", "LocalShards", "ShardGroup", "shard_bounds", "make_group", "state_rows",
           "SegmentUpdate", "SHARDED_KEYS", "STATE_COLUMNS"]

R = TypeVar("R")


def shard_bounds(n_rows: int, sizes) -> list[tuple[int, int]]:
    """Contiguous ``(first, stop)`` row ranges: ``sizes`` an int (that many shards, sizes differing by
    at most one) or the shards' sizes (summing to ``n_rows``)."""
    if np.isscalar(sizes):
        k = int(sizes)
        if not 1 <= k <= n_rows:
            raise ValueError(f"shards: expected 1 to {n_rows} shards, got {k}")
        sizes = [n_rows // k + (1 if i < n_rows % k else 0) for i in range(k)]
    sizes = [int(s) for s in sizes]
    if sum(sizes) != n_rows or min(sizes) < 1:
        raise ValueError(f"shards: sizes {sizes} must be positive and sum to the {n_rows} rows")
    stops = np.cumsum(sizes)
    return [(int(stop - size), int(stop)) for size, stop in zip(sizes, stops)]


class Shard(RitzShard):
    """Rows ``first .. first + size - 1`` of the data and their columns of the state.

    Parameters
    ----------
    rows : KernelRows
        Over this shard's rows only (its centring, once set, holds their column means).
    first : int
        The global index of its first row.
    unit_rows : int, optional
        The reduction unit: partial sums are returned per block of ``unit_rows`` rows (global rows
        ``u * unit_rows ..``; ``first`` must be a multiple), so that their sum in global order does
        not depend on how the rows are split into shards. Default: one part for the whole shard.
    """

    def __init__(self, rows: KernelRows, first: int, unit_rows: int | None = None):
        self.rows, self.first = rows, int(first)
        self.size = rows.n_rows
        self.stop = self.first + self.size
        if unit_rows is not None and self.first % int(unit_rows):
            raise ValueError(f"shards: a shard starts at row {self.first}, not a multiple of the reduction "
                             f"unit of {unit_rows} rows")
        self.units = [slice(0, self.size)] if unit_rows is None else [
            slice(a - self.first, min(a + int(unit_rows), self.stop) - self.first)
            for a in range(self.first, self.stop, int(unit_rows))]
        self.Z: np.ndarray | None = None  # (d, size): [A; G; B] columns
        self.ZK: np.ndarray | None = None  # (d, size): [AK; GK; BK] columns
        self._kept: tuple[np.ndarray, np.ndarray] | None = None
        self._sums: np.ndarray | None = None  # the centring pass's column sums (and raw products)
        self._raw: np.ndarray | None = None  # its raw products C K, kept by `centre` for `centred_products`

    def owned(self, indices: np.ndarray) -> np.ndarray:
        """Positions in ``indices`` (global rows) of the rows this shard owns, in order."""
        return np.flatnonzero((indices >= self.first) & (indices < self.stop))

    def points(self, indices: np.ndarray) -> OwnedPoints:
        """The rows of ``indices`` this shard owns: positions, x, |x|^2."""
        pos = self.owned(indices)
        X, xn = self.rows.points(indices[pos] - self.first)
        return OwnedPoints(pos, X, xn)

    def gather(self, indices: np.ndarray) -> OwnedColumns:
        """The owned rows of ``indices`` with ZK's columns there: positions, ZK columns (d, k), x (k, n),
        |x|^2 (k,), m (k,)."""
        pos, X, xn = self.points(indices)
        local = indices[pos] - self.first
        return OwnedColumns(pos, self.ZK[:, local], X, xn, self.rows.centering.column_means[local])

    def apply(self, update: SegmentUpdate) -> None:
        """Materialise a segment on this shard's columns (`kpca.solvers._blocked.Segment.apply`):
        ``ZK = T ZK + C K'[p, cols]`` (kernel tiles of the segment's points against the own rows) and
        ``Z = T Z`` plus C's columns scattered into the owned rows of p. Cost ``2 d s size (n + d)``."""
        c = self.rows.centering
        row_shift = (c.grand_mean - update.column_means).astype(self.rows.dtype)
        C = np.ascontiguousarray(update.C, dtype=self.rows.dtype)
        self.ZK = self.rows.points_left_product(update.points, update.sqnorms, row_shift, C,
                                                np.empty_like(self.ZK), T=update.T, start=self.ZK)
        Z = update.T @ self.Z
        pos = self.owned(update.indices)
        local = update.indices[pos] - self.first
        scatter_add(Z, local, update.C[:, pos], np.unique(local).size == local.size)
        self.Z = Z

    def products(self, r: int) -> list[np.ndarray]:
        """This shard's parts of ``Z AK^T`` (d, r), one per reduction unit."""
        return [self.Z[:, u] @ self.ZK[:r, u].T for u in self.units]

    def norms(self, r: int) -> list[np.ndarray]:
        """This shard's parts of ``diag(A K' A^T)`` (r,), one per reduction unit."""
        return [np.einsum("ij,ij->i", self.ZK[:r, u], self.Z[:r, u]) for u in self.units]

    def squared_norms(self, r: int) -> list[np.ndarray]:
        """This shard's parts of the squared row norms of A and AK, (2, r), one per reduction unit."""
        return [np.stack([np.einsum("ij,ij->i", self.Z[:r, u], self.Z[:r, u]),
                          np.einsum("ij,ij->i", self.ZK[:r, u], self.ZK[:r, u])]) for u in self.units]

    def grams(self, r: int) -> list[np.ndarray]:
        """This shard's parts of ``[AK AK^T, AK A^T]`` (2, r, r), one per reduction unit: what the
        Rayleigh-Ritz eigenvalues of the served components need (`kpca.solvers._ritz.ritz_values`)."""
        return [np.stack([self.ZK[:r, u] @ self.ZK[:r, u].T, self.ZK[:r, u] @ self.Z[:r, u].T]) for u in self.units]

    def zero(self, d: int) -> None:
        """Start from zero columns (d, size); a `SegmentUpdate` with ``T = 0`` then sets a sparse start."""
        self.Z, self.ZK = np.zeros((d, self.size)), np.zeros((d, self.size))

    def set_columns(self, Z: np.ndarray, ZK: np.ndarray, column_means: np.ndarray, grand_mean: float,
                    mean_diagonal: float) -> None:
        """Take this shard's columns of a state (``Z``, ``ZK`` (d, size)) and of the centring."""
        self.Z, self.ZK = np.ascontiguousarray(Z), np.ascontiguousarray(ZK)
        self.previous = None
        self.set_centering(Centering(np.ascontiguousarray(column_means), float(grand_mean), float(mean_diagonal)))

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(Z, ZK, column means)``: this shard's part of the state (O(d size) to send)."""
        return self.Z, self.ZK, self.rows.centering.column_means

    def keep(self) -> None:
        """Remember the columns (the state at the start of a pass, for the divergence guard)."""
        self._kept = (self.Z, self.ZK)  # apply never writes into these arrays: no copy needed

    def rollback(self) -> None:
        """Go back to the columns last kept."""
        self.Z, self.ZK = self._kept

    def add_column_sums(self, X: np.ndarray, xn: np.ndarray | None, C: np.ndarray | None = None) -> None:
        """Add ``1^T K(X, own rows)`` (raw kernel) to this shard's column sums (the centring pass), and with
        C (d, b) the raw products ``C K(X, own rows)`` beside them, from the same tiles
        (`kpca.rows.KernelRows.fit_centering_times`); in the rows' precision, as one process's pass."""
        left = np.ones((1, X.shape[0])) if C is None else np.vstack([np.ones((1, X.shape[0])), C])
        if self._sums is None:
            self._sums = np.zeros((left.shape[0], self.size))
        self.rows.points_left_product(X, xn, None, np.ascontiguousarray(left, dtype=self.rows.dtype), self._sums,
                                      centred=False)

    def centred_products(self, Cm: np.ndarray, C1: np.ndarray) -> np.ndarray:
        """This shard's columns of ``C K'`` (d, size) from the raw products that `add_column_sums` added,
        after `centre` (eq. 5, `kpca.centering.Centering.centre_products`), with ``Cm = C m`` and ``C1 = C 1``
        (d,) from the coordinator. O(d size)."""
        products, self._raw = self._raw, None
        return self.rows.centering.centre_products(products, Cm, C1)

    def set_column_means(self, n_rows: int) -> list[np.ndarray]:
        """The centring's column means of the own rows from the sums added (``sums / l``, kept here);
        returns their sums per reduction unit (the grand mean's parts)."""
        self._means = self._sums[0] / n_rows
        return [np.asarray(self._means[u].sum()) for u in self.units]

    def centre(self, grand_mean: float, mean_diagonal: float) -> None:
        """Centre this shard's rows with the column means of `set_column_means` and the global entries (the raw
        products added beside the sums are kept for `centred_products`)."""
        self._raw = self._sums[1:] if self._sums.shape[0] > 1 else None
        self.set_centering(Centering(self._means, float(grand_mean), float(mean_diagonal)))

    def set_centering(self, centering: Centering) -> None:
        """Centre this shard's rows by ``centering`` (its column means are the own rows')."""
        self.rows.centering = centering
        self._sums = None


class LocalShards:
    """`kpca.sharded.messages.Shards` in this process: each call runs on every `Shard` in turn, in order
    (``shards``; iterating gives them too)."""

    def __init__(self, shards: Sequence[Shard]):
        self.shards = list(shards)

    def __len__(self) -> int:
        return len(self.shards)

    def __iter__(self) -> Iterator[Shard]:
        return iter(self.shards)

    def each(self, call: ShardCall[R]) -> list[R]:
        """``call`` on every shard; the replies in shard order."""
        return [call.run(shard) for shard in self.shards]

    def each_with(self, calls: Sequence[ShardCall[R]]) -> list[R]:
        """``calls[i]`` on shard i; the replies in shard order."""
        return [call.run(shard) for shard, call in zip(self.shards, calls)]

    def apply(self, update: SegmentUpdate) -> None:
        """Every shard applies ``update`` now."""
        for shard in self.shards:
            shard.apply(update)


class ShardGroup(RitzGroup):
    """The shards of one fit in a fixed order, as the coordinator sees them (the methods
    `kpca.sharded.kha_step` and `kpca.sharded.passes` call). Every reduction sums the shards' parts in
    this order (their reduction units in global order).

    Every call reaches the shards through ``shards`` (`kpca.sharded.messages.Shards`: `LocalShards`, or
    `workers.shards.ActorShards` on dask workers), as a `kpca.sharded.messages.shard_call` of a `Shard`
    method.

    Attributes: ``shards``, ``bounds`` their ``(first, stop)`` rows, ``kernel``, ``n_components`` r,
    ``guards`` g (0 until `set_guards`), ``iterated`` r + g, ``d`` the state's rows (r + g, plus r for
    KHA-SMD's B), ``previous_rows`` of LOBPCG's previous step held beside them (`Shard.step_rotate`),
    ``dtype`` of the state, ``rows_dtype`` of the shards' kernel rows, ``n_features`` n of the points
    (None until `kpca.sharded.passes.message_rows` asks),
    ``n_rows`` l, ``grand_mean`` and ``mean_diagonal`` of the centring (set with it), ``bytes_out``
    and ``bytes_in`` the messages' sizes summed over shards.
    """

    def __init__(self, shards: Shards, kernel: KernelSpec, n_components: int, d: int, dtype=np.float64,
                 rows_dtype=np.float64, *, bounds):
        self.shards, self.kernel = shards, kernel
        self.bounds = [tuple(b) for b in bounds]
        self.n_components, self.d, self.dtype = int(n_components), int(d), np.dtype(dtype)
        self.guards = 0
        self.rows_dtype = np.dtype(rows_dtype)
        self.n_rows = sum(stop - first for first, stop in self.bounds)
        self.n_features: int | None = None
        self.grand_mean: float | None = None
        self.mean_diagonal: float | None = None
        self.bytes_out = self.bytes_in = 0  # for the cost model

    def __len__(self) -> int:
        return len(self.bounds)

    @property
    def iterated(self) -> int:
        """The rows a Rayleigh-Ritz pass iterates: the r served components and the g guard vectors."""
        return self.n_components + self.guards

    def set_guards(self, guards: int) -> None:
        """Hold ``guards`` guard vectors after the served rows (``Z = [A; G; B]``): d changes with them.
        Set before the state's columns are sent (`kpca.sharded.passes.split_state`, `send_start`)."""
        self.d += int(guards) - self.guards
        self.guards = int(guards)

    def points(self, indices: np.ndarray):
        """``x`` (s, n) and ``|x|^2`` (s,) or None for global rows ``indices``, from their shards."""
        X = xn = None
        for pos, Xs, xns in self.shards.each(shard_call(Shard.points, indices)):
            if X is None:
                X = np.empty((indices.size, Xs.shape[1]), dtype=Xs.dtype)
                xn = None if xns is None else np.empty(indices.size, dtype=xns.dtype)
            X[pos] = Xs
            if xn is not None:
                xn[pos] = xns
        return X, xn

    def gather(self, indices: np.ndarray) -> Gathered:
        """`Gathered` for the rows ``indices``: each part from the shard that owns the row."""
        return self.gathered(indices, self.shards.each(shard_call(Shard.gather, indices)))

    def gathered(self, indices: np.ndarray, replies: Sequence[OwnedColumns]) -> Gathered:
        """`Gathered` for the rows ``indices`` from the shards' replies to `Shard.gather`, in shard order."""
        out = None
        for pos, ZK, X, xn, m in replies:
            if out is None:
                out = Gathered(np.empty((self.d, indices.size)), np.empty((indices.size, X.shape[1]), X.dtype),
                               None if xn is None else np.empty(indices.size, xn.dtype), np.empty(indices.size))
            out.ZK[:, pos], out.points[pos], out.column_means[pos] = ZK, X, m
            if xn is not None:
                out.sqnorms[pos] = xn
            self.bytes_in += ZK.nbytes + X.nbytes + m.nbytes + (0 if xn is None else xn.nbytes)
        return out

    def square(self, X: np.ndarray, xn: np.ndarray | None, m: np.ndarray) -> np.ndarray:
        """``K'[p, p]`` (s, s) from the points and their column means (`kpca.rows.KernelRows.square`),
        computed by the coordinator: no shard is asked."""
        out = np.empty((X.shape[0], X.shape[0]), dtype=self.rows_dtype)
        return kernel_block_into(out, 0, X, X, self.kernel, xn, xn, (self.grand_mean - m).astype(self.rows_dtype), -m)

    def apply(self, update: SegmentUpdate) -> None:
        """Send ``update`` to every shard (every shard applies it before it answers its next call)."""
        self.shards.apply(update)
        self.bytes_out += update.nbytes() * len(self)

    def products(self) -> np.ndarray:
        """``Z AK^T`` (d, r), summed over the shards in order."""
        parts = self.shards.each(shard_call(Shard.products, self.n_components))
        self.bytes_in += sum(p.nbytes for shard_parts in parts for p in shard_parts)
        return summed(parts)

    def norms(self) -> np.ndarray:
        """``diag(A K' A^T)`` (r,), summed over the shards in order."""
        return summed(self.shards.each(shard_call(Shard.norms, self.n_components)))

    def squared_norms(self, rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Squared norms of the first ``rows`` (default r) rows of Z and ZK, (rows,) each, summed over the
        shards in order."""
        rows = self.n_components if rows is None else int(rows)
        total = summed(self.shards.each(shard_call(Shard.squared_norms, rows)))
        return total[0], total[1]

    def grams(self, rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``ZK ZK^T`` and ``ZK Z^T`` of the first ``rows`` (default r: ``AK AK^T``, ``AK A^T``) rows,
        summed over the shards in order."""
        total = summed(self.shards.each(shard_call(Shard.grams, self.n_components if rows is None else int(rows))))
        return total[0], total[1]

    def keep(self) -> None:
        """Every shard remembers its columns (`Shard.keep`)."""
        self.shards.each(shard_call(Shard.keep))

    def rollback(self) -> None:
        """Every shard goes back to the columns it kept (`Shard.rollback`)."""
        self.shards.each(shard_call(Shard.rollback))

    def zero(self, d: int | None = None) -> None:
        """Every shard's columns to zero, ``d`` rows (default the state's)."""
        self.shards.each(shard_call(Shard.zero, self.d if d is None else int(d)))

    def split(self, Z: np.ndarray, ZK: np.ndarray, centering: Centering) -> None:
        """Send each shard its columns of ``Z``, ``ZK`` (d, l) and of the centring. O(d l) sent, once."""
        self.shards.each_with([shard_call(Shard.set_columns, Z[:, a:b], ZK[:, a:b], centering.column_means[a:b],
                                          centering.grand_mean, centering.mean_diagonal) for a, b in self.bounds])
        self.grand_mean, self.mean_diagonal = centering.grand_mean, centering.mean_diagonal

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(Z, ZK, column means)`` of all l columns, from the shards in order. O(d l) received."""
        parts = self.shards.each(shard_call(Shard.columns))
        Z, ZK, means = (np.concatenate([p[i] for p in parts], axis=-1) for i in range(3))
        return Z, ZK, means

    def centering(self) -> Centering:
        """The whole centring (the column means gathered from the shards: l numbers)."""
        means = np.concatenate([p[2] for p in self.shards.each(shard_call(Shard.columns))])
        return Centering(means, self.grand_mean, self.mean_diagonal)

    def add_column_sums(self, X: np.ndarray, xn: np.ndarray | None, C: np.ndarray | None = None) -> None:
        """Every shard adds the raw kernel's column sums of the points ``X`` (and with C (d, b) the raw
        products ``C K(X, own rows)``) to its own (`Shard.add_column_sums`): a block of the centring pass."""
        self.shards.each(shard_call(Shard.add_column_sums, X, xn, C))

    def set_column_means(self, n_rows: int) -> float:
        """Every shard sets its column means from the sums added (`Shard.set_column_means`); returns their
        total (the grand mean times ``n_rows``), summed over the shards in order."""
        return float(summed(self.shards.each(shard_call(Shard.set_column_means, n_rows))))

    def centre(self, grand_mean: float, mean_diagonal: float) -> None:
        """Every shard centres its rows with its column means and the global entries (`Shard.centre`);
        sets ``grand_mean`` and ``mean_diagonal``."""
        self.shards.each(shard_call(Shard.centre, grand_mean, mean_diagonal))
        self.grand_mean, self.mean_diagonal = grand_mean, mean_diagonal

    def centred_products(self, Cm: np.ndarray, C1: np.ndarray) -> np.ndarray:
        """``C K'`` (d, l) from the raw products the shards added in the centring pass, with ``Cm = C m``
        and ``C1 = C 1`` (`Shard.centred_products`); the shards' columns concatenated. O(d l) received."""
        return np.concatenate(self.shards.each(shard_call(Shard.centred_products, Cm, C1)), axis=1)


def make_group(data, kernel: KernelSpec, bounds, n_components: int, solver: str, unit_rows: int | None = None,
               **rows_options) -> ShardGroup:
    """A group of shards over ``data[first:stop]`` for each of ``bounds`` (`shard_bounds`), with no
    state yet (`split_state` or `sharded_centering` then fills it), reducing per ``unit_rows`` rows
    (`Shard`; default per shard). ``rows_options`` go to KernelRows; the shards share one origin, the
    whole data's (`kpca.rows.default_origin`, unless ``origin`` is given), since they exchange points."""
    if "origin" not in rows_options:
        rows_options["origin"] = default_origin(data, kernel)
    shards = [Shard(KernelRows(data[first:stop], kernel, **rows_options), first, unit_rows) for first, stop in bounds]
    return ShardGroup(LocalShards(shards), kernel, n_components, state_rows(n_components, solver),
                      rows_dtype=shards[0].rows.dtype, bounds=[(shard.first, shard.stop) for shard in shards])


def state_rows(n_components: int, solver: str) -> int:
    """d before any guard vectors (`ShardGroup.set_guards`), the rows of ``Z = [A; B]``: 2r for KHA-SMD,
    r for the rest of the KHA family."""
    return 2 * n_components if solver == "kha-smd" else n_components
