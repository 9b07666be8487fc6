"""What the coordinator of a sharded fit and its shards say to each other, typed.

A message to a shard is a `ShardCall`: a method of the shard's class (`kpca.sharded.shards.Shard.gather`,
the function itself, never its name) with its arguments, made by `shard_call`, which a type checker
reads as a call of that method (its arguments checked against the method's, its reply typed as the
method's). The shards of one fit, in order, are a `Shards` wherever they run: in this process
(`kpca.sharded.shards.LocalShards`) or one per dask worker (`workers.shards.ActorShards`, which sends a
`ShardCall` to the worker holding the shard; the function travels by reference, as a class does).
`kpca.sharded.shards.ShardGroup`, the coordinator's view, asks its `Shards` through `Shards.each`
(one call on every shard, the replies in shard order) and `Shards.each_with` (a call per shard), and
adds the replies' parts in shard order (`summed`).

The messages that are more than one array: to every shard, a segment's `SegmentUpdate`; from the
coordinator's gather, `Gathered`; from the shards, `OwnedPoints`, `OwnedColumns`, `OwnedSample` (the rows of a
request that one shard owns, with their positions in the request) and `SampledParts` (a shard's parts
of a float32 pass's rounding check).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Concatenate, Generic, NamedTuple, ParamSpec, Protocol, Sequence, TypeVar

import numpy as np

__all__ = ["ShardCall", "shard_call", "Shards", "summed", "SegmentUpdate", "Gathered", "OwnedPoints", "OwnedColumns",
           "OwnedSample", "SampledParts"]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


@dataclass(frozen=True, eq=False)
class ShardCall(Generic[R]):
    """One method of a shard with its arguments: ``method(shard, *args, **kwargs)`` where the shard is
    (`run`). ``method`` is the function of the shard's class (``Shard.gather``); make one with
    `shard_call`, which types it."""

    method: Callable[..., R]
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def run(self, shard) -> R:
        """The call on ``shard`` (run where the shard is); its reply."""
        return self.method(shard, *self.args, **self.kwargs)


def shard_call(method: Callable[Concatenate[S, P], R], *args: P.args, **kwargs: P.kwargs) -> ShardCall[R]:
    """The call ``method(shard, *args, **kwargs)`` of a method of the shard class (``Shard.gather``),
    its arguments and reply typed as the method's."""
    return ShardCall(method, args, kwargs)


class Shards(Protocol):
    """The shards of one fit, in a fixed order, wherever they run: what the coordinator's
    `kpca.sharded.shards.ShardGroup` asks of them."""

    def __len__(self) -> int:
        """The number of shards."""
        ...

    def each(self, call: ShardCall[R]) -> list[R]:
        """``call`` on every shard (at once where they run apart), after every update applied; the
        replies in shard order."""
        ...

    def each_with(self, calls: Sequence[ShardCall[R]]) -> list[R]:
        """``calls[i]`` on shard i (one call per shard), after every update applied; the replies in
        shard order."""
        ...

    def apply(self, update: SegmentUpdate) -> None:
        """Every shard applies ``update`` (`kpca.sharded.shards.Shard.apply`) before it answers its next
        call; nothing comes back."""
        ...


class SegmentUpdate:
    """What the coordinator sends every shard at the end of a segment (all small, nothing l-sized).

    Attributes
    ----------
    T : ndarray of shape (d, d)
        The segment's folded transform ``Tc``.
    C : ndarray of shape (d, s)
        Its coefficients ``Cc`` of the segment's rows done (s <= the segment's rows).
    indices : ndarray of shape (s,)
        The rows ``p`` (global indices; a shard scatters C's columns into those it owns).
    points : ndarray of shape (s, n)
        The data rows ``x_p`` (in the sources' compute dtype), ``sqnorms`` (s,) or None their
        squared norms, ``column_means`` (s,) the centring's ``m[p]``.
    """

    __slots__ = ("T", "C", "indices", "points", "sqnorms", "column_means")

    def __init__(self, T, C, indices, points, sqnorms, column_means):
        self.T, self.C, self.indices = T, C, indices
        self.points, self.sqnorms, self.column_means = points, sqnorms, column_means

    def nbytes(self) -> int:
        """Bytes of the message's arrays: ``8 (d^2 + d s + s (n + 3))`` in float64."""
        return sum(a.nbytes for a in (self.T, self.C, self.indices, self.points, self.column_means)
                   if a is not None) + (0 if self.sqnorms is None else self.sqnorms.nbytes)


def summed(parts_per_shard: Sequence[Sequence[np.ndarray]]) -> np.ndarray:
    """The shards' parts (a list per shard, one per reduction unit) added in global order, in float64."""
    parts = [part for shard_parts in parts_per_shard for part in shard_parts]
    total = np.array(parts[0], dtype=np.float64)
    for part in parts[1:]:
        total += part
    return total


class OwnedPoints(NamedTuple):
    """The rows of a request that one shard owns: their ``positions`` in the request (k,), the
    ``points`` x (k, n) and ``sqnorms`` |x|^2 (k,) or None."""

    positions: np.ndarray
    points: np.ndarray
    sqnorms: np.ndarray | None


class OwnedColumns(NamedTuple):
    """The owned rows of a request with the state's columns there: ``positions`` (k,), ``columns``
    (rows, k) of ZK (`Shard.gather`) or of Z (`Shard.coefficients`), ``points`` (k, n), ``sqnorms``
    (k,) or None and the centring's ``column_means`` m (k,)."""

    positions: np.ndarray
    columns: np.ndarray
    points: np.ndarray
    sqnorms: np.ndarray | None
    column_means: np.ndarray


class OwnedSample(NamedTuple):
    """The owned rows of a float32 pass's sample: ``positions`` (k,), the ``points`` read in float64
    (k, n) and the fit's ``column_means`` there (k,)."""

    positions: np.ndarray
    points: np.ndarray
    column_means: np.ndarray


@dataclass
class SampledParts:
    """One shard's parts of a float32 pass's check (`kpca.sharded.ritz.RitzShard.sampled_parts`) of its
    first k rows at the s sampled columns S: ``exact`` ``[Z; X] K'[:, S]`` over its own columns (2k, s)
    and ``row_sums`` the raw rows' sums (s,), both summed over the shards; the owned columns of S
    (``positions`` in S) of ``Z``, ``ZK``, ``X`` (k, owned); and its parts of ``zx = z . x``, ``kx = zk .
    x`` and the rows' sums ``z_sum``, ``x_sum``, ``k_sum`` (k,), summed over the shards."""

    exact: np.ndarray
    row_sums: np.ndarray
    positions: np.ndarray
    Z: np.ndarray
    ZK: np.ndarray
    X: np.ndarray
    zx: np.ndarray
    kx: np.ndarray
    z_sum: np.ndarray
    x_sum: np.ndarray
    k_sum: np.ndarray


@dataclass
class Gathered:
    """A segment's columns and points gathered from their shards: ``ZK`` (d, s) the columns
    ``ZK[:, p]``, ``points`` (s, n), ``sqnorms`` (s,) or None, ``column_means`` (s,) ``m[p]``."""

    ZK: np.ndarray
    points: np.ndarray
    sqnorms: np.ndarray | None
    column_means: np.ndarray
