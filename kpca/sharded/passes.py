"""The passes of a sharded fit over a `kpca.sharded.shards.ShardGroup`: the centring pass, the start handed to
the shards and joined back, the reduction units that make the sums independent of the split, and the
pass loop (`run_sharded_passes`: stochastic KHA steps, `kpca.sharded.kha_step`, or Rayleigh-Ritz passes,
`sharded_rayleigh_ritz_pass`). See `kpca.sharded.shards` for the messages, `kpca.sharded.messages` for
their types.
"""

from __future__ import annotations

import numpy as np

from kpca._threads import blas_limit
from kpca.driver import PassHooks, converged, drive_passes, refine_passes
from kpca.kernels import kernel_diagonal
from kpca.rows import Centering
from kpca.sharded.kha_step import SHARDED_KEYS, sharded_begin_pass, sharded_diverged, sharded_step_block
from kpca.sharded.messages import SegmentUpdate
from kpca.sharded.shards import ShardGroup
from kpca.solvers import KHAState, as_state, get_solver
from kpca.solvers._blocked import require_complete
from kpca.solvers._rayleigh_ritz import PLAIN_BELOW, kept_directions
from kpca.solvers._residual import relative_residuals
from kpca.solvers._ritz import rank_cut, ritz_transform, ritz_values
from kpca.solvers._rounding import FAR_ABOVE, sample_columns, sampled_bound

__all__ = ["sharded_centering", "sharded_centering_times", "reduction_unit", "unit_bounds", "split_state",
           "stacked_columns", "coordinator_state", "send_start",
           "join_state", "sharded_rayleigh_ritz_pass", "message_rows", "sharded_times", "ShardedProducts",
           "run_sharded_passes"]

MESSAGE_BYTES = 8 * 2**20  # a Rayleigh-Ritz pass's message to each shard: rows of points and coefficients
REDUCTION_UNITS = 256  # reduction units per data set (`reduction_unit`): the most shards a fit can have
SPARSE_START_COLUMNS = 8192  # a start nonzero on at most this many columns is sent as one update


def sharded_centering(group: ShardGroup, block_size: int | None = None, C: np.ndarray | None = None) -> dict:
    """`kpca.rows.KernelRows.fit_centering` over the shards: the same blocks of points pass every
    shard, each adds its columns' sums; the grand mean is the shards' sums added in order. With C
    (d, l), each shard also adds its columns of the raw ``C K`` from the same tiles, which
    `sharded_centering_times` centres.

    Sets every shard's centring and ``group.grand_mean``, ``group.mean_diagonal``; returns the
    coordinator's entries ``centering_grand_mean`` and ``centering_mean_diagonal`` (the column means
    stay on the shards). Messages: each block's points (b x n, b = ``block_size``, default
    `message_rows`; and C's columns) to every shard, one number per reduction unit back at the end.
    """
    l = group.n_rows
    block_size = message_rows(group, 1024) if block_size is None else block_size
    diag_sum = 0.0
    for a in range(0, l, block_size):
        indices = np.arange(a, min(a + block_size, l))
        X, xn = group.points(indices)
        group.add_column_sums(X, xn, None if C is None else C[:, indices])
        diag_sum += float(kernel_diagonal(X, group.kernel).sum(dtype=np.float64))
    grand_mean = group.set_column_means(l) / l
    mean_diagonal = diag_sum / l - grand_mean
    group.centre(grand_mean, mean_diagonal)
    return {"centering_grand_mean": grand_mean, "centering_mean_diagonal": mean_diagonal}


def reduction_unit(n_rows: int, units: int = REDUCTION_UNITS) -> int:
    """Rows per reduction unit of a data set of ``n_rows`` rows: ``ceil(l / units)``, a function of l
    alone, so that any split into at most ``units`` shards sums in the same order (`Shard`)."""
    return max(1, -(-int(n_rows) // int(units)))


def unit_bounds(n_rows: int, n_shards: int, unit_rows: int) -> list[tuple[int, int]]:
    """Contiguous shards of whole reduction units (the last unit may be short), their sizes differing
    by at most one unit: ``min(n_shards, units)`` ``(first, stop)`` ranges covering the rows."""
    n_units = -(-int(n_rows) // int(unit_rows))
    k = max(1, min(int(n_shards), n_units))
    per = [n_units // k + (1 if i < n_units % k else 0) for i in range(k)]
    edges = np.minimum(np.concatenate([[0], np.cumsum(per)]) * int(unit_rows), int(n_rows))
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def split_state(state: KHAState, group: ShardGroup) -> KHAState:
    """Hand each shard its columns of a full solver ``state`` (A, AK, the guard vectors, B, BK, the
    centring's column means): `send_start` column by column, whatever the start; returns the
    coordinator's state, the rest. Cost O(d l) sent (once, at the start)."""
    return send_start(state, group, max_columns=-1)


def stacked_columns(state: KHAState, group: ShardGroup) -> tuple[np.ndarray, np.ndarray]:
    """``(Z, ZK)`` = ``[A; G; B]``, ``[AK; GK; BK]`` of a full solver ``state`` (`kpca.sharded.shards`): G the
    guard vectors a Rayleigh-Ritz state iterates (``guard_A``), B KHA-SMD's; sets ``group``'s guards to
    their number. LOBPCG's previous step (``previous_A``) is not sent: the first sharded pass takes its
    step without one. O(d l) copied."""
    state = as_state(state, KHAState)
    require_complete(state)
    guards = state.guard_A is not None and state.refines
    group.set_guards(np.asarray(state.guard_A).shape[0] if guards else 0)
    group.previous_rows = 0  # the shards' columns are replaced: LOBPCG starts its memory again
    pairs = [state.coefficients(), *([_held(state.guard_A, state.guard_AK, "guard_A")] if guards else []),
             *([_held(state.B, state.BK, "B")] if state.smd else [])]
    return np.concatenate([M for M, _ in pairs]), np.concatenate([MK for _, MK in pairs])


def _held(M: np.ndarray | None, MK: np.ndarray | None, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(M, MK)`` of a full state, which keeps both; ValueError naming ``name`` where it lacks one."""
    if M is None or MK is None:
        raise ValueError(f"state: {name} and its image are both needed to split the state over the shards")
    return M, MK


def coordinator_state(state: KHAState, group: ShardGroup) -> KHAState:
    """What the coordinator keeps of a full ``state`` whose columns the shards hold: all but the columns
    (`SHARDED_KEYS`, the guard vectors and LOBPCG's previous step), with ``guard_rows`` and
    ``previous_rows``, the rows of the guard vectors and of LOBPCG's previous step, where the shards hold
    some (a resumed fit's shards read as many from their checkpoint)."""
    state = as_state(state, KHAState)
    return state.replace(A=None, AK=None, B=None, BK=None, guard_A=None, guard_AK=None, previous_A=None,
                         previous_AK=None,
                         centering={key: value for key, value in state.centering.items() if key not in SHARDED_KEYS},
                         guard_rows=group.guards or None, previous_rows=group.previous_rows or None)


def send_start(state: KHAState, group: ShardGroup, max_columns: int = SPARSE_START_COLUMNS) -> KHAState:
    """Hand the shards a starting ``state`` whose centring they already hold (`sharded_centering`):
    the coordinator's state, the rest.

    A start nonzero on few columns S (the random and subset starts of `kpca.solvers._kha.start`) is
    sent as one `SegmentUpdate` with ``T = 0`` and ``C = Z[:, S]``: each shard forms its columns of
    ``ZK = Z[:, S] K'[S, :]`` from the |S| points (O(d |S|) sent); a dense start goes column by column
    (`split_state`, O(d l))."""
    state = as_state(state, KHAState)
    Z, ZK = stacked_columns(state, group)
    S = np.flatnonzero(np.any(Z != 0, axis=0))
    if S.size > max_columns:
        group.split(Z, ZK, Centering.from_state(state.centering))
        return coordinator_state(state, group)
    group.zero()
    got = group.gather(S)
    group.apply(SegmentUpdate(np.zeros((group.d, group.d), dtype=group.dtype), Z[:, S].astype(group.dtype), S,
                              got.points, got.sqnorms, got.column_means))
    return coordinator_state(state, group)


def join_state(state: KHAState, group: ShardGroup) -> KHAState:
    """The full solver state: the coordinator's ``state`` with the shards' columns concatenated."""
    r, k = group.n_components, group.iterated
    Z, ZK, means = group.columns()
    state = as_state(state, KHAState)
    centering = {**state.centering, **Centering.column_entries(means)}
    out = state.replace(guard_rows=None, previous_rows=None, A=Z[:r], AK=ZK[:r], centering=centering)
    if k > r:
        out.guard_A, out.guard_AK = Z[r:k], ZK[r:k]
    if group.previous_rows:
        out.previous_A, out.previous_AK = group.previous_columns()
    if group.d > k:
        out.B, out.BK = Z[k:], ZK[k:]
    return out


def sharded_rayleigh_ritz_pass(state: KHAState, group: ShardGroup, block_size: int,
                               tol: float | None = None) -> KHAState:
    """`kpca.solvers._rayleigh_ritz.rayleigh_ritz_pass` over a shard group (`kpca.sharded.ritz`): each
    shard's k = r + g iterated rows (the served components and the guard vectors) become the Ritz
    components' projections, their images ``Z K'`` are added segment by segment (the segment's
    coefficients and points gathered from their owners, sent to every shard: O(k s + s n) per segment
    and shard), then the served r's residual (the same form as one process's) and the step one process
    takes: LOBPCG's (`_sharded_accelerated_step`) with guards over float64 tiles above `PLAIN_BELOW`,
    else the power step, each from reductions of at most 3k x 3k. Over float32 tiles the figure carries
    the sampled bound of their rounding (`kpca.solvers._rounding`, the sample's rows computed on the
    shards), where it decides something (within `FAR_ABOVE` times ``tol``). Returns the coordinator's new
    state. Cost: one pass of kernel rows, spread over the shards, and the check's sample."""
    state = as_state(state, KHAState)
    r, k, l = group.n_components, group.iterated, group.n_rows
    group.to_projections(_ritz_rotation(group, k))
    step = message_rows(group, block_size)
    for a in range(0, l, step):
        indices = np.arange(a, min(a + step, l))
        C, points, sqnorms, column_means = group.coefficients(indices, k)
        group.add_images(points, sqnorms, column_means, C)
    mu = group.squared_norms(k)[0]  # ||z_i||^2: the variances of the k components before the pass
    squared = group.residuals(mu)  # ||Q w_i - mu_i w_i||^2, as computed: a negative one is rounding, never 0
    residual = float(relative_residuals(squared[:r], mu[:r]).max(initial=0.0))
    if group.rows_dtype != np.float64 and not (tol and residual > FAR_ABOVE * tol):
        # as one process does (`kpca.solvers._rounding`): the figure carries its sampled rounding bound; a
        # sharded fit does not move its shards to float64, so a tol float32 cannot resolve is left unmet
        sample = group.rounding_sample(sample_columns(l, (int(state.seed), int(state.pass_))), r)
        bound = sampled_bound(sample, mu[:r])
        residual = float(relative_residuals(np.abs(squared[:r]) + bound, mu[:r]).max(initial=0.0))
    if group.guards and group.rows_dtype == np.float64 and residual >= PLAIN_BELOW:
        _sharded_accelerated_step(group, mu, squared)
    else:
        group.rotate(_ritz_rotation(group, k))
        group.previous_rows = 0
    eigenvalues = ritz_values(*group.grams(), *group.squared_norms())
    out = state.replace(residual=residual, eigenvalues=eigenvalues, t=int(state.t) + l, position=0)
    return coordinator_state(out, group)


def _sharded_accelerated_step(group: ShardGroup, mu: np.ndarray, squared: np.ndarray) -> None:
    """`kpca.solvers._rayleigh_ritz.accelerated_step` over the shards, after a pass's images: the
    residual directions and the previous step kept by their norms (reductions), the basis ``[X; W; P]``
    formed on every shard and its Gram matrices summed (m <= 3k), the Ritz rotation V (m, k) and the
    next previous step ``D = V - E overlap^T`` (``P = A - overlap X`` with ``X = E^T B``; its norms are
    ``diag(D^T G D)``) computed here, and both applied on the shards. Sets ``group.previous_rows``.
    O(m^3) here, O(m^2 l) spread over the shards."""
    k = mu.size
    residual_rows = kept_directions(squared, mu)
    previous_rows = (np.zeros(0, dtype=np.int64), np.zeros(0))
    if group.previous_rows:
        previous_rows = kept_directions(group.previous_norms(), np.ones(group.previous_rows))
    m = k + residual_rows[0].size + previous_rows[0].size
    grams = group.step_grams(mu, residual_rows, previous_rows)
    H, G, BX = grams[:, :m], grams[:, m : 2 * m], grams[:, 2 * m :]
    V = _rotation(H, G, k)
    D = V.copy()
    D[:k] -= BX.T @ V  # overlap^T = (V^T BK X^T)^T
    rows, norms = kept_directions(np.einsum("ij,ij->j", D, G @ D), np.ones(k))
    D = D[:, rows] / norms
    group.step_rotate(V, D)
    group.previous_rows = int(rows.size)


def message_rows(group: ShardGroup, block_size: int) -> int:
    """Rows per segment of a sharded Rayleigh-Ritz pass: as many as fit `MESSAGE_BYTES` of points,
    coefficients and centring (``8 (n + k + 2)`` bytes a row, k the rows iterated), at least
    ``block_size``. Nothing in the pass depends on the segments but the order of its sums, so a segment
    can be as large as a message: every segment costs two round trips to every shard
    (`ShardGroup.coefficients`, `ShardGroup.add_images`), which at a block of 1024 rows were most of a
    pass's coordinator and communication time below l of about 100,000 (bench/shard_cost.py). One
    round trip the first time, for n (kept on the group)."""
    n = group.n_features
    if n is None:
        n = group.n_features = int(group.points(np.arange(1))[0].shape[1])
    return max(int(block_size), MESSAGE_BYTES // (8 * (n + group.iterated + 2)))


def sharded_times(group: ShardGroup, C: np.ndarray, block_size: int = 1024) -> np.ndarray:
    """``C K'`` (k, l) for coefficients C (k, l) that the coordinator holds, computed over the shards: the
    `kpca.rows.KernelRows.times` of a sharded fit. Each shard's columns are zeroed to k rows, the
    messages of `message_rows` carry C's columns and the points from their owners, each shard adds its
    columns of the product, and the coordinator gathers them (O(k l) received, once). The shards'
    columns are left holding the product: the start sent after it (`send_start`) replaces them.
    Cost: one pass of kernel rows spread over the shards."""
    C = np.asarray(C, dtype=np.float64)
    k, l = C.shape
    group.zero(max(k, group.d))
    step = message_rows(group, block_size)
    for a in range(0, l, step):
        indices = np.arange(a, min(a + step, l))
        _, points, sqnorms, column_means = group.coefficients(indices)
        group.add_images(points, sqnorms, column_means, C[:, indices])
    return np.ascontiguousarray(group.columns()[1][:k])


def sharded_centering_times(group: ShardGroup, C: np.ndarray, block_size: int | None = None):
    """`kpca.rows.KernelRows.fit_centering_times` over the shards: the centring pass (`sharded_centering`)
    and ``C K'`` (d, l) for coefficients C the coordinator holds, from the same tiles, one pass instead
    of two. ``(centering, C K')``: the whole centring (its column means gathered, l numbers), the
    product gathered (O(d l)). Cost: one pass of kernel rows, ``2 l^2 (n + d + 1)`` flops, spread over
    the shards."""
    C = np.ascontiguousarray(C, dtype=np.float64)
    sharded_centering(group, block_size, C)
    centering = group.centering()
    Cm, C1 = C @ centering.column_means, C.sum(axis=1)
    return centering, group.centred_products(Cm, C1)


class ShardedProducts:
    """The row source ``rows`` of a sharded fit's coordinator, but for its full passes, which run over
    ``group``: the centring pass (`fit_centering`), the product `times` (`sharded_times`) and both in one
    pass (`fit_centering_times`). What the sharded job hands `kpca.fitting.prepare_fit`, so that the
    centring and the Nystrom start's extension to every row (`kpca.solvers._extend.extended_start`) are
    spread over the shards as the passes are, in one pass as in one process, not run by the coordinator
    alone. Every other attribute, read or set, is ``rows``'s."""

    def __init__(self, rows, group: ShardGroup):
        object.__setattr__(self, "rows", rows)
        object.__setattr__(self, "group", group)

    def __getattr__(self, name: str):
        return getattr(self.rows, name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self.rows, name, value)

    def times(self, C: np.ndarray, block_size: int = 1024) -> np.ndarray:
        """``C K'`` over the shards (`sharded_times`)."""
        return sharded_times(self.group, C, block_size)

    def fit_centering(self, block_size: int = 1024):
        """The centring pass over the shards (`sharded_centering`): every shard keeps its columns' means;
        sets and returns the whole centring (`kpca.rows.Centering`)."""
        sharded_centering(self.group)
        self.rows.centering = self.group.centering()
        return self.rows.centering

    def fit_centering_times(self, C: np.ndarray, block_size: int = 1024) -> np.ndarray:
        """The centring pass and ``C K'`` in one pass over the shards (`sharded_centering_times`); sets the
        centring."""
        self.rows.centering, products = sharded_centering_times(self.group, C)
        return products


def _ritz_rotation(group: ShardGroup, k: int) -> np.ndarray:
    """The k x k rotation to the Rayleigh-Ritz components of the span of the shards' first k rows
    (`_rotation` of their two k x k Gram reductions). O(k^3) after them."""
    return _rotation(*group.grams(k), k)


def _rotation(H: np.ndarray, G: np.ndarray, k: int) -> np.ndarray:
    """V (m, k): the k leading Rayleigh-Ritz components ``V^T C`` of span(C) from ``H = CK CK^T`` and
    ``G = CK C^T`` (`kpca.solvers._ritz.ritz_transform`), the columns past the span's rank or with no
    variance (`kpca.solvers._ritz.rank_cut`) zero, so that those components become zero rows as
    `kpca.solvers._ritz.ritz_components` serves them; the identity's first k columns for a Gram matrix
    that is not finite. O(m^3)."""
    m = np.asarray(G).shape[0]
    found = ritz_transform(H, G)
    if found is None:
        return np.eye(m, k)
    V = np.zeros((m, k))
    kept = min(k, found[0].shape[1])
    V[:, :kept] = found[0][:, :kept]
    values = np.zeros(k)
    values[:kept] = found[1][:kept]
    V[:, rank_cut(np.zeros((k, 0)), np.zeros((k, 0)), values)[2] == 0] = 0.0
    return V


def run_sharded_passes(state: KHAState, group: ShardGroup, passes: int, block_size: int,
                       hooks: PassHooks | None = None, tol: float | None = None) -> tuple[KHAState, bool]:
    """`kpca.driver.run_passes` over a shard group: the coordinator's ``state`` (`split_state`) through
    passes ``state.pass_ .. passes-1``, the shards' columns updated in place.

    The same permutations, blocks, hooks (called with the coordinator's state), stop requests and
    divergence guard (each shard keeps its columns at the start of the pass and rolls back to them);
    Rayleigh-Ritz passes (a state that `kpca.solvers.KHAState.refines`) and the ``tol`` on the residual as there
    (`sharded_rayleigh_ritz_pass`). Returns ``(state, stopped)``.
    """
    state = as_state(state, KHAState)
    solver = get_solver(state.solver)
    hooks = hooks or PassHooks()
    with blas_limit(1):
        if state.refines:
            ran, stopped = refine_passes(state, passes, hooks, tol,
                                         lambda state: sharded_rayleigh_ritz_pass(state, group, block_size, tol))
        elif converged(state, tol):
            return state.replace(converged=True), False
        else:
            ran, stopped = drive_passes(state, group.n_rows, passes, block_size, hooks,
                                        begin_pass=lambda state: sharded_begin_pass(state, group),
                                        step=lambda state, indices: sharded_step_block(state, group, indices),
                                        diverged=lambda state: sharded_diverged(state, group), damped=solver.damped,
                                        keep=group.keep, rollback=group.rollback)
    return as_state(ran, KHAState), stopped  # the KHA family's steps and passes return its states
