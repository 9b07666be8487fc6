"""The coordinator's half of a sharded KHA-family step: the blocked update of `kpca.solvers._blocked`
with the r x l state held by shards of columns (`kpca.sharded.shards`).

The blocked update touches the l columns of ``Z = [A; B]`` and ``ZK = [AK; BK]`` (d x l, d = r for
KHA / KHA-t / KHA-et, 2r for KHA-SMD) in three places only, per segment of s rows ``p`` (normally the
whole block):

1. ``ZK_0[:, p]`` (d x s), the images' columns at the segment's rows -- a *gather*: each shard sends
   the columns it owns (K' is symmetric, so these are ``K_seg Z_0^T``; no product with the rows);
2. for KHA-SMD ``S = Z_0 AK_0^T`` (d x r) -- a *reduction*: each shard sends its columns' product,
   summed in shard order;
3. the materialisation ``Z = Tc Z_0 + Cc E``, ``ZK = Tc ZK_0 + Cc K'[p, :]`` -- *local to each shard*
   once it has Tc (d x d), Cc (d x s) and the segment's s points: its columns of ``K'[p, :]`` are
   kernels of those points against its own rows.

Everything else (``K'[p, p]`` from the segment's points, the sub-block transforms of
`kpca.solvers._transforms`, their folding, the growth guard, rho) is small and is computed on the
coordinator by the one-process step's own loop (`kpca.solvers._blocked.fold_segments`, given the
shards' columns as `ShardColumns`), so a sharded step equals `blocked_step_block` up to the
association of the reductions (2.) and of the once-per-pass eigenvalue estimates; the A and AK of
KHA and KHA-t, which use neither, agree bit for bit. The shard group is a `StepGroup` (what
`kpca.sharded.shards.ShardGroup` answers: ``gather``, ``square``, ``apply``, ``products``, ``norms``,
``squared_norms``); nothing here knows where the shards run.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from kpca.sharded.messages import Gathered, SegmentUpdate
from kpca.solvers._blocked import Segment, fold_segments, sub_block_rows
from kpca.solvers._kha import beyond_limit, with_estimates
from kpca.solvers._registry import as_state
from kpca.solvers._state import KHAState
from kpca.solvers._transforms import GROWTH_LIMIT

__all__ = ["StepGroup", "sharded_step_block", "sharded_begin_pass", "sharded_diverged"]

# the state entries held by the shards (their columns), not by the coordinator
STATE_COLUMNS = ("A", "AK", "B", "BK")  # the solver state's l columns, each shard keeps its own
SHARDED_KEYS = (*STATE_COLUMNS, "centering_column_means")


class StepGroup(Protocol):
    """What a sharded step asks of the coordinator's shard group (`kpca.sharded.shards.ShardGroup`)."""

    n_components: int  # r
    dtype: np.dtype  # of the state

    def gather(self, indices: np.ndarray) -> Gathered:
        """The columns ``ZK[:, p]`` and points of the rows ``indices``, from the shards that own them."""
        ...

    def square(self, X: np.ndarray, xn: np.ndarray | None, m: np.ndarray) -> np.ndarray:
        """``K'[p, p]`` (s, s) from the points and their column means."""
        ...

    def products(self) -> np.ndarray:
        """``Z AK^T`` (d, r), summed over the shards."""
        ...

    def apply(self, update: SegmentUpdate) -> None:
        """Every shard applies ``update`` to its columns."""
        ...

    def squared_norms(self, rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The squared row norms of A and AK, (r,) each, summed over the shards."""
        ...

    def norms(self) -> np.ndarray:
        """``diag(A K' A^T)`` (r,), summed over the shards."""
        ...


class _GatheredRows:
    """A segment's rows for `Segment`: indices ``p`` and ``K'[p, p]`` from its points (the coordinator
    never multiplies with the rows themselves; the shards do, in `ShardGroup.apply`)."""

    def __init__(self, p: np.ndarray, Kpp: np.ndarray):
        self.p, self.Kpp = p, Kpp

    def square_rows(self, s: int, e: int) -> np.ndarray:
        return self.Kpp[s:e, :e]


class ShardColumns:
    """The state's l columns held by the shards of ``group``, for `kpca.solvers._blocked.fold_segments`:
    a segment's gather (its columns ``ZK_0[:, p]`` and points), KHA-SMD's ``Z AK^T`` reduced over the
    shards, and the segment's materialisation sent to every shard as one `SegmentUpdate`."""

    def __init__(self, group: StepGroup, idx: np.ndarray):
        self.group, self.idx = group, idx
        self.got: Gathered | None = None

    def segment(self, a: int, e: int) -> Segment:
        """The steps a .. e-1: one ``group.gather`` (d x s columns, the s points) and ``K'[p, p]`` from the points."""
        p = self.idx[a:e]
        got = self.got = self.group.gather(p)
        return Segment(_GatheredRows(p, self.group.square(got.points, got.sqnorms, got.column_means)),
                       np.ascontiguousarray(got.ZK.T))

    def products(self, r: int) -> np.ndarray:
        """``Z AK^T`` (d x r), summed over the shards."""
        return self.group.products()

    def apply(self, seg: Segment) -> None:
        """Every shard applies the segment's ``Tc``, ``Cc`` to its columns (its rows of ``K'[p, :]`` computed there)."""
        got, s, dtype = self.got, seg.done, self.group.dtype
        assert got is not None, "apply follows a segment's gather"
        self.group.apply(SegmentUpdate(seg.Tc.astype(dtype), seg.Cc[:, :s].astype(dtype), seg.p[:s], got.points[:s],
                                       None if got.sqnorms is None else got.sqnorms[:s], got.column_means[:s]))


def sharded_step_block(state: KHAState, group: StepGroup, indices: np.ndarray, sub_block: int | None = None,
                       growth_limit: float = GROWTH_LIMIT) -> KHAState:
    """`kpca.solvers._blocked.blocked_step_block` over a shard group: the coordinator's state (the
    solver state without `SHARDED_KEYS`; a mapping of its entries is read as one) advanced by one step
    per row of ``indices``; the shards' columns are updated in place through ``group.apply``.

    Per segment of s rows: one ``group.gather`` (d x s columns, the s points), for KHA-SMD one
    ``group.products`` (d x r), one ``group.apply`` (`SegmentUpdate`). Returns a new state.
    """
    state = as_state(state, KHAState)
    new = state.copied()
    idx = np.ascontiguousarray(indices, dtype=np.int64)
    b, r = idx.shape[0], int(group.n_components)
    if b == 0:
        return new
    gain = state.gain.astype(group.dtype).astype(np.float64)  # as blocked_step_block rounds it
    if state.smd:
        state.gain_terms()  # ValueError before any shard is touched
    with np.errstate(over="ignore", invalid="ignore"):
        rho = fold_segments(ShardColumns(group, idx), state, idx, gain, sub_block_rows(sub_block, b, r),
                            float(growth_limit), r, int(state.n_rows))
    if rho is not None:
        new.rho = rho.astype(state.gain_terms()[0].dtype)
    new.t = state.t + b
    new.position = state.position + b
    return new


def sharded_begin_pass(state: KHAState, group: StepGroup) -> KHAState:
    """`kpca.solvers._kha.begin_pass` with the eigenvalue estimates (eq. 13) from the shards' squared
    row norms of A and AK (one reduction of 2r numbers). Returns a new state."""
    a2, ak2 = group.squared_norms()
    num, den = np.sqrt(ak2), np.sqrt(a2)
    return with_estimates(as_state(state, KHAState), np.divide(num, den, out=np.zeros_like(num), where=den > 0))


def sharded_diverged(state: KHAState, group: StepGroup) -> bool:
    """`kpca.solvers._kha.diverged` from the shards' ``diag(A K' A^T)`` (a reduction of r numbers)."""
    return beyond_limit(group.norms(), as_state(state, KHAState))
