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
`kpca.solvers._transforms`, their folding, the growth guard, rho) is small and is computed here, by
the same code as the one-process step, so a sharded step equals `blocked_step_block` up to the
association of the reductions (2.) and of the once-per-pass eigenvalue estimates; the A and AK of
KHA and KHA-t, which use neither, agree bit for bit. The shard group is a `StepGroup` (what
`kpca.sharded.shards.ShardGroup` answers: ``gather``, ``square``, ``apply``, ``products``, ``norms``,
``squared_norms``); nothing here knows where the shards run.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from kpca.sharded.messages import Gathered, SegmentUpdate
from kpca.solvers._kha import NORM_LIMIT
from kpca.solvers._blocked import SEGMENT_ROWS, Segment, default_sub_block
from kpca.solvers._transforms import GROWTH_LIMIT, kha_transform, smd_transform

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


def sharded_step_block(state: dict, group: StepGroup, indices: np.ndarray, sub_block: int | None = None,
                       growth_limit: float = GROWTH_LIMIT) -> dict:
    """`kpca.solvers._blocked.blocked_step_block` over a shard group: the coordinator's state (the
    solver state without `SHARDED_KEYS`) advanced by one step per row of ``indices``; the shards'
    columns are updated in place through ``group.apply``.

    Per segment of s rows: one ``group.gather`` (d x s columns, the s points), for KHA-SMD one
    ``group.products`` (d x r), one ``group.apply`` (`SegmentUpdate`). Returns a new dict.
    """
    new = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in state.items()}
    idx = np.ascontiguousarray(indices, dtype=np.int64)
    b, r = idx.shape[0], int(group.n_components)
    if b == 0:
        return new
    m_max = max(1, int(sub_block) if sub_block is not None else min(b, default_sub_block(r, min(b, SEGMENT_ROWS))))
    gain = state["gain"].astype(group.dtype).astype(np.float64)  # as blocked_step_block rounds it
    smd = state["solver"] == "kha-smd"
    with np.errstate(over="ignore", invalid="ignore"):
        rho = _segments(state, group, idx, gain, m_max, float(growth_limit), smd)
    if smd:
        new["rho"] = rho.astype(state["rho"].dtype)
    new["t"] = state["t"] + b
    new["position"] = state["position"] + b
    return new


def _segments(state, group, idx, gain, m_max, growth_limit, smd):
    """The segment loop of `_kha_block` / `_smd_block` with the l columns behind ``group``. Returns rho."""
    r, l = int(group.n_components), int(state["n_rows"])
    d = 2 * r if smd else r
    decay = state["solver"] != "kha"
    rho = state["rho"].astype(np.float64) if smd else None
    mu, xi = (float(state["mu"]), float(state["xi"])) if smd else (0.0, 0.0)
    t0, b, a = int(state["t"]), idx.shape[0], 0
    while a < b:
        e = min(b, a + SEGMENT_ROWS)
        p = idx[a:e]
        got = group.gather(p)  # ZK_0[:, p] (d x s), x_p, |x_p|^2, m[p]
        seg = Segment(_GatheredRows(p, group.square(got.points, got.sqnorms, got.column_means)),
                       np.ascontiguousarray(got.ZK.T))
        S = group.products() if smd else None  # Z_0 AK_0^T (d x r)
        while seg.done < e - a:
            m = min(m_max, e - a - seg.done)
            Qt = seg.basis_products(m)
            if smd:
                n = d + m
                Gt = np.zeros((n, n))  # as _smd_block
                Gt[:d, :r] = S
                Gt[:d, d:] = Qt[:, :d].T
                Gt[d:, :r] = Qt[:, :r]
                Gt[d:, d:] = Qt[:, d:].T
                W = np.zeros((d, n))
                W[:, :d] = np.eye(d)
                R = np.ascontiguousarray(Gt[:d])
                done = smd_transform(W, R, Qt, Gt, rho, gain, t0 + a + seg.done, float(l), mu, xi, growth_limit)
                S = R @ W[:r].T
            else:
                W = np.zeros((r, r + m))
                W[:, :r] = np.eye(r)
                done = kha_transform(W, Qt, gain, t0 + a + seg.done, decay, float(l), growth_limit)
            seg.compose(W, done)
            if not seg.within(growth_limit):
                break
        s = seg.done
        group.apply(SegmentUpdate(seg.Tc.astype(group.dtype), seg.Cc[:, :s].astype(group.dtype), p[:s],
                                  got.points[:s], None if got.sqnorms is None else got.sqnorms[:s],
                                  got.column_means[:s]))
        a += s
    return rho


def sharded_begin_pass(state: dict, group: StepGroup) -> dict:
    """`kpca.solvers._kha.begin_pass` with the eigenvalue estimates (eq. 13) from the shards' squared
    row norms of A and AK (one reduction of 2r numbers). Returns a new state."""
    state = dict(state)
    a2, ak2 = group.squared_norms()
    num, den = np.sqrt(ak2), np.sqrt(a2)
    lam = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    state["eigenvalues"] = lam
    if state["solver"] in ("kha-et", "kha-smd"):
        floor = max(float(lam.max()) * 1e-12, 1e-300)
        state["gain"] = state["eta0"] * np.linalg.norm(lam) / np.maximum(lam, floor)
    return state


def sharded_diverged(state: dict, group: StepGroup) -> bool:
    """`kpca.solvers._kha.diverged` from the shards' ``diag(A K' A^T)`` (a reduction of r numbers)."""
    norms = group.norms()
    limit = float(state.get("norm_limit", NORM_LIMIT))
    return bool(not np.all(np.isfinite(norms)) or np.any(np.abs(norms) > limit))
