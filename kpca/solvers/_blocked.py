"""Blocked Kernel Hebbian Algorithm updates: b sequential steps as small-matrix algebra plus one GEMM.

`blocked_step_block` is the KHA family's step (one KHA / KHA-t / KHA-et /
KHA-SMD step per row, in order; pure; `kpca.solvers._kha`), and it does not touch the r x l state
matrices once per row. Within a sub-block of ``m`` rows it accumulates the steps as a small transform of the sub-block's
starting matrices; the transforms of the sub-blocks of a *segment* (up to
`SEGMENT_ROWS` rows, normally the whole block) are folded together in small
matrices too, and applied to the r x l matrices once, with one GEMM against
the rows. The results equal the step-by-step reference kernels
(``tests/naive.py``) up to rounding (the same sums, associated
differently). The segment loop (`fold_segments`) is the only form of the step: the sharded fit runs it
too, over columns held by shards (`kpca.sharded.kha_step`).

Notation (seed 000): ``A`` (r x l) expansion coefficients, ``AK = A K'``,
``B`` (r x l) SMD differential parameters, ``BK = B K'``, ``rho`` (r,)
log-gains. A sub-block holds the rows ``K_b = K'[p_0 .. p_{m-1}, :]``
(m x l), ``k_s`` its row s, ``g_s`` (r,) the gains of step s,
``G_s = diag(g_s)``, ``y_s = A_s k_s`` (eq. 7), ``L_s = lt(y_s y_s^T)``.
``E`` (m x l) has rows ``e_{p_j}^T`` (``E X^T = X[:, p]^T``,
``E K' = K_b``) and ``K_bb = K_b[:, p]`` (m x m),
``K_bb[s, j] = K'[p_s, p_j]``.

Maintenance note
----------------
*KHA family* (eq. 8, 11, 17-18). One step is

    A_{s+1}  = M_s A_s  + (G_s y_s) e_{p_s}^T,     M_s = I - G_s L_s   (r x r)
    AK_{s+1} = M_s AK_s + (G_s y_s) k_s^T

(``e_p^T K' = k_s^T`` as K' is symmetric). By induction, with the
coefficient matrix ``W_s = [T_s | C_s]`` (r x (r + m)) over the *basis*
``X = [A_0; E]`` ((r + m) x l) and its image ``X_K = [AK_0; K_b]``:

    A_s = W_s X = T_s A_0 + C_s E,     AK_s = W_s X_K = T_s AK_0 + C_s K_b,
    W_0 = [I | 0],   W_{s+1} = M_s W_s + (G_s y_s) e_{r+s}^T,

i.e. W evolves by the *same* KHA step as A, with column ``r + s`` playing the
part of ``p_s``. The only l-length quantity a step needs is
``y_s = A_s k_s = W_s (X k_s) = W_s q_s`` with ``q_s^T`` row s of

    Q^T = [K_b A_0^T | K_bb] = [AK_0[:, p]^T | K_bb]     (m x (r + m)),

no GEMM: ``A_0 k_s = (A_0 K')[:, p_s]`` as K' is symmetric. A step costs
O(r (r + s)) (the ``lt(y y^T) W`` product by the prefix sums of
`kpca.solvers._transforms`, over the r + s non-zero columns of W). At the end of
the sub-block ``A = T A_0`` plus C scattered (added) into the columns p,
and ``AK = T AK_0 + C K_b`` -- applied, though, only at the end of the
segment (*Segments*). A row index repeated inside a sub-block is harmless
(E then has equal rows; the scatter adds); within one pass the rows are a
permutation and never repeat.

*KHA-SMD* (Algorithm 1: eq. 16, 21, 15, 18, in that order). With
``Bk = B_s k_s``, ``L2 = lt(Bk y^T + y Bk^T)`` and the log-gain step clipped
to [-ln 2, ln 2] as in the step-by-step reference, eq. 21 and 15 read

    A_{s+1} = (I - G L) A_s + G y e_p^T
    B_{s+1} = xi (I - G L) B_s - G (L + xi L2) A_s + G (y + xi Bk) e_p^T

(row i of ``lt(Bk y^T) A`` is ``Bk_i sum_{m<=i} y_m A_m`` and of
``lt(y Bk^T) A`` is ``y_i sum_{m<=i} Bk_m A_m``: prefix sums again). This is
linear in ``Z = [A; B]`` (2r x l) with a lower block-triangular 2r x 2r
transform plus a column at p, so ``Z_s = W_s X`` with ``W`` 2r x n,
``n = 2r + m``, ``X = [A_0; B_0; E]``, ``W_0 = [I | 0]``; the A rows of W
keep zeros in the B_0 columns. Multiplied by K' on the right the same
recursion holds for ``ZK = [AK; BK]`` with ``e_p^T`` replaced by ``k_s^T``,
so ``ZK_s = W_s [AK_0; BK_0; K_b]``. The state keeps ``BK`` for this
reason: ``[y; Bk] = W_s q_s`` with ``Q^T = [ZK_0[:, p]^T | K_bb]`` (no
GEMM), and one product with the rows updates AK and BK together.

Eq. 16 needs ``diag(Gamma K' B^T)_i = y_i (Bk_i - sum_{m<=i} y_m H[m, i])``
with ``H = AK_s B_s^T = W_A Gm W_B^T`` and the Gram matrix
``Gm = X_K X^T`` (n x n), ``X_K = [AK_0; 0; K_b]``. Rather than form H
(O(r n^2) per step) keep ``R = W Gm^T`` (2r x n; row i is ``Gm W[i]^T``).
``R`` is W times a fixed matrix, so it evolves by the same row operations
as W, with the column term ``e_{2r+s}^T`` replaced by row ``2r + s`` of
``Gm^T``. Then ``sum_{m<=i} y_m H[m, i] = cA . R[r + i]`` with
``cA = sum_{m<=i} y_m W_A[m]`` the prefix sum the A update uses anyway --
the same shape as the step-by-step reference, where the sum is
``<sum_{m<=i} y_m AK_m, B_i>``. ``Gm^T`` is assembled from

    Gm^T = [[Z_0 AK_0^T,   0,  Z_0 K_b^T],
            [AK_0[:, p]^T, 0,  K_bb^T   ]]

(the first block row is 2r high; ``Z_0 K_b^T`` is in Q). At the end of the
sub-block ``Z AK^T = W Gm^T W_A^T = R W_A^T``, the next sub-block's
``Z_0 AK_0^T`` without touching Z. A step costs O(r n).

*Segments.* After a sub-block, ``Z = T Z_0 + C E`` need not be formed:
keep ``Z = Tc Z_s + Cc E_seg`` over the segment's starting ``Z_s`` and its
rows so far (``Tc <- T Tc``, ``Cc <- [T Cc | C]``: O(d^2 s) for d = r or
2r rows of W and s rows done). The next sub-block's ``Q^T`` then comes
from the segment's ``K_seg Z_s^T = ZK_s[:, p_seg]^T`` (a gather) as

    K_b Z^T = (K_b Z_s^T) Tc^T + K'[p_b, p_seg] Cc^T     (m x d, O(m d (d + s))),

and ``K'[p_b, p_seg]`` are entries of the rows already at hand. At the end
of the segment ``Z = Tc Z_s`` plus Cc scattered into the columns p_seg,
and ``ZK = Tc ZK_s + Cc K_seg``: per row ``2 d l`` flops in one GEMM with
a d x b left factor (``4 r l`` for SMD, ``2 r l`` for the KHA family), and
each row of the block crosses the memory bus once more.

*Rows never formed.* The steps read the rows only through ``K'[p, p]``
and that one product ``Cc K_seg``. Given a row source instead of rows
(`_SourceRows`; `kpca.rows.KernelRows`), ``K'[p, p]`` is computed from the
segment's own points (``2 b^2 n`` flops, against ``2 b l n`` for its
rows) and ``Cc K_seg`` tile by tile as the kernel is evaluated
(`kpca.kernels.kernel_left_product_into`): each tile is multiplied while it
is in cache, and the b x l rows never reach memory. The arithmetic is the
same; only the GEMM's summation is split by tiles.

Costs, per segment of b rows in sub-blocks of m (flops; r components, l
rows of K', d = r (KHA family) or 2r (SMD)):

=========  ================================  =================================
solver     GEMMs (once per segment)          small matrices (numpy and numba)
=========  ================================  =================================
KHA, t/et  Z, ZK: 4 r^2 l; Cc K: 2 r b l     O(r (r + m)) per row (loop),
KHA-SMD    Z, ZK: 16 r^2 l; Cc K: 4 r b l;   O(d (d + b) + d^2 b / m) per row
           Z AK^T: 4 r^2 l                   (folding); K'[p, p] gathered
                                             (or computed: 2 b n per row)
=========  ================================  =================================

i.e. per row ``2 r l`` (KHA) or ``4 r l`` (SMD) flops of GEMM plus
``O(r^2 l / b)``, against O(r l) memory-bound passes over A, AK (and B)
per row step by step. (Without the images the rows would be multiplied
twice, once for ``K_b [A_0; B_0]^T`` before the steps and once for
``C K_b`` after: ``6 r l`` flops per row for SMD and twice the memory
traffic.)

*Stability.* ``Tc`` is a product of near-identity matrices. The blocked
result differs from the step-by-step one by roughly
``eps ||Tc|| ||Z_s||`` (the reassociation), which stays at rounding level
while ``||Tc||`` is moderate. If ``||T||_F / sqrt(d)`` of a sub-block's
transform (1 at its start) exceeds ``growth_limit`` (default
`GROWTH_LIMIT` = 1e3) the sub-block ends early and is folded in; if
``||Tc||_F / sqrt(d)`` does, the segment ends there: the transform is
applied to the big matrices and a new segment starts with the next row. In
practice the ratio stays below 1 (``I - G lt(y y^T)`` contracts) unless
the gain is so large that the step-by-step iteration diverges too; there
the guard bounds how far one transform grows before it is applied, and the
driver's divergence guard reacts as it does step by step
(tests/kpca/test_blocked.py). The images AK, BK drift from ``A K'``,
``B K'`` by rounding only, as in the step-by-step form, which also updates
AK by its own recursion.

*Precision.* The state (A, AK, B, BK, the transforms) is kept in its own
dtype. With float32 rows (kernel tiles computed in float32,
``KernelRows(dtype=float32)``) the one GEMM that reads the rows,
``Cc K_seg``, runs in float32 on a float32 copy of Cc, and its result is
accumulated into the float64 state: it reads half the bytes at twice the
SIMD width. The rows themselves carry float32 rounding already, so this
adds an error of the same order (about ``1e-7`` relative per product). In
``AK`` these errors add up over the segments like a random walk (the
transforms contract rather than amplify them). bench/kha_speed.py reports
the effect on the excess error after 20 passes.

*Determinism.* The rounding depends on the sub-block and segment
partition, which is fixed by the block (both start at the block's first
row; the default sizes depend on r and the block length only), so resuming
at a block boundary is bit-exact, as with the step-by-step kernels.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from kpca.solvers._registry import as_state
from kpca.solvers._state import KHAState
from kpca.solvers._transforms import GROWTH_LIMIT, kha_transform, smd_transform

SUB_BLOCK_RANGE = (16, 256)  # bounds of `default_sub_block`
SEGMENT_ROWS = 1024  # rows accumulated before Z and AK are materialised (K'[p, p] is kept: 8 MB)
_MOVED = ("A", "AK", "B", "BK")  # the state's arrays a step replaces


def default_sub_block(n_components: int, segment_rows: int) -> int:
    """Rows per transform: ``sqrt(r b) / 2`` for segments of b rows, clipped to SUB_BLOCK_RANGE.

    Per row, the jitted loop costs ``~ r m`` and folding each sub-block's
    transform into the segment's (`Segment.compose`, `basis_products`)
    ``~ r^2 b / m``; the sum is smallest near ``m ~ sqrt(r b)`` times the
    ratio of their throughputs; in practice the pass time is flat over a
    wide range of m (bench/kha_speed.py).
    """
    low, high = SUB_BLOCK_RANGE
    return int(min(high, max(low, round(np.sqrt(n_components * segment_rows) / 2))))


def sub_block_rows(sub_block: int | None, b: int, r: int) -> int:
    """Rows per transform for a block of b rows: ``sub_block`` if given, else `default_sub_block` (at most b)."""
    return max(1, int(sub_block) if sub_block is not None else min(b, default_sub_block(r, min(b, SEGMENT_ROWS))))


def scatter_add(M: np.ndarray, columns: np.ndarray, C: np.ndarray, distinct: bool) -> None:
    """``M[:, columns] += C``; with repeated columns (``distinct`` False) every copy adds."""
    if distinct:
        M[:, columns] += C
    else:
        np.add.at(M, (slice(None), columns), C)  # type: ignore[arg-type]  # numpy's stub for ufunc.at takes no slice in a tuple index; numpy does


def require_complete(state) -> None:
    """Raise ValueError naming the missing array if the updates cannot run on ``state`` (a `KHAState`, or
    the mapping of its entries a sharded pass holds; the solver's ``restore`` computes it)."""
    state = as_state(state)
    if state.smd:
        state.differentials()


def blocked_step_block(state: KHAState, rows, indices: np.ndarray, sub_block: int | None = None,
                       growth_limit: float = GROWTH_LIMIT) -> KHAState:
    """Apply one KHA-family step per row of ``rows`` (K'[indices, :]), in order, blocked.

    One step per row, in order (pure; returns a new state
    with the same fields set, ``t`` and ``position`` advanced by b); the results
    agree up to rounding. See the module docstring for the derivation.

    Parameters
    ----------
    state : KHAState
        The KHA family's state (`kpca.solvers._kha.start`); a mapping of its entries is read as one.
    rows : ndarray of shape (b, l), or a row source
        Centred kernel rows ``K'[indices, :]``. float32 rows are used as they
        are (the module docstring's *Precision*); other dtypes are converted
        to the state's. Or a source of them (`is_row_source`, e.g.
        `kpca.rows.KernelRows`): ``K'[p, p]`` then comes from
        ``rows.square(p)`` and the one product with the rows from
        ``rows.left_product``, which multiplies each kernel tile while it is
        in cache; the b x l rows are never formed.
    indices : ndarray of shape (b,)
        Row indices ``p_s`` of the steps (may repeat).
    sub_block : int, optional
        Rows m accumulated per transform, default
        ``min(b, default_sub_block(r, min(b, SEGMENT_ROWS)))``. Larger
        values fold fewer transforms into the segment's but make every
        step's small loop O(r (r + m)) longer.
    growth_limit : float
        End a sub-block early when ``||T||_F / sqrt(dim T)`` exceeds this,
        and a segment when its folded transform's does.

    Cost: per row ``2 r l`` (KHA family) or ``4 r l`` (SMD) flops in one
    GEMM per segment, plus ``O(r^2 l / b + r (r + b))`` (and ``2 b n`` for
    ``K'[p, p]`` from a source); memory O(r l + b^2) temporaries besides the
    new state.
    """
    state = as_state(state, KHAState)  # a mapping of the entries (a test's, a reference's) is read as the state
    require_complete(state)
    new = state.copied(skip=_MOVED)
    A, AK = state.coefficients()
    dtype = A.dtype
    r, l = A.shape
    idx = np.ascontiguousarray(indices, dtype=np.int64)
    b = idx.shape[0]
    if isinstance(rows, np.ndarray):
        # float32 rows stay float32: the GEMM against them then reads half the bytes (see Precision)
        rows = np.ascontiguousarray(rows, dtype=np.float32 if rows.dtype == np.float32 else dtype)
        if rows.shape != (b, l):
            raise ValueError(f"rows: expected shape {(b, l)} for {b} indices, got {rows.shape}")
    elif not is_row_source(rows) or rows.n_rows != l:
        raise ValueError(f"rows: expected K'[indices, :] as an array or a row source over {l} rows "
                         "(with square and left_product)")
    if b == 0:
        return state.copied()
    m_max = sub_block_rows(sub_block, b, r)
    gain = state.gain.astype(dtype).astype(np.float64)  # as the step-by-step reference rounds it
    # A and B are kept stacked as Z = [A; B] (2r x l), and so are their images ZK = [AK; BK]: K [A_0; B_0]^T
    # is a gather from ZK, and the one product with the rows, Cc K, updates both.
    if state.smd:
        B, BK = state.differentials()
        columns = LocalColumns(_stacked(A, B), _stacked(AK, BK), rows, idx)
    else:
        columns = LocalColumns(A, AK, rows, idx)
    # A diverging state goes non-finite silently, as in the jitted kernels; the driver's guard checks.
    with np.errstate(over="ignore", invalid="ignore"):
        rho = fold_segments(columns, state, idx, gain, m_max, float(growth_limit), r, l)
    Z, ZK = columns.Z, columns.ZK
    moved = {"A": Z, "AK": ZK} if rho is None else \
        {"A": Z[:r], "B": Z[r:], "AK": ZK[:r], "BK": ZK[r:], "rho": rho.astype(state.gain_terms()[0].dtype)}
    return new.replace(**moved, t=state.t + b, position=state.position + b)


def is_row_source(rows) -> bool:
    """Whether `blocked_step_block` can take ``rows`` as a source instead of an array of rows: it has
    ``n_rows``, ``square(p) -> K'[p, p]`` and ``left_product(p, C, out, T, start)``, which sets
    ``out = T start + C K'[p, :]``, as `kpca.rows.KernelRows` does."""
    return all(hasattr(rows, name) for name in ("n_rows", "square", "left_product"))


def _segment_rows(rows, a: int, e: int, idx: np.ndarray):
    """The rows of steps a .. e-1: a slice of the array, or the source with their indices."""
    if isinstance(rows, np.ndarray):
        return _BlockRows(rows[a:e], idx[a:e])
    return _SourceRows(rows, idx[a:e])


class _BlockRows:
    """A segment's rows ``K'[p, :]``, given as an array K (s x l)."""

    def __init__(self, K: np.ndarray, p: np.ndarray):
        self.K, self.p = K, p

    def square_rows(self, s: int, e: int) -> np.ndarray:
        """``K'[p[s:e], p[:e]]``: entries of the rows at hand (random reads: only what is used)."""
        return self.K[s:e][:, self.p[:e]]

    def left_product(self, C: np.ndarray, T: np.ndarray, start: np.ndarray) -> np.ndarray:
        """``T start + C K'[p[:s], :]`` for C (d x s): one GEMM, in the rows' dtype (see *Precision*)."""
        out = T @ start
        out += C.astype(self.K.dtype, copy=False) @ self.K[: C.shape[1]]
        return out


class _SourceRows:
    """A segment's rows ``K'[p, :]`` from a row source that never forms them
    (``source.square(p)``, ``source.left_product(p, C, out, T, start)``; `kpca.rows.KernelRows`)."""

    def __init__(self, source, p: np.ndarray):
        self.source, self.p = source, p
        self.Kpp = source.square(p)  # K'[p, p], from the segment's own points: O(s^2 n)

    def square_rows(self, s: int, e: int) -> np.ndarray:
        return self.Kpp[s:e, :e]

    def left_product(self, C: np.ndarray, T: np.ndarray, start: np.ndarray) -> np.ndarray:
        return self.source.left_product(self.p[: C.shape[1]], C, np.empty_like(start), T=T, start=start)


class Segment:
    """The steps over one segment's rows (indices ``p``), folded against its starting Z_0 (d x l).

    Holds ``Z_cur = Tc Z_0 + Cc E`` (Tc d x d, Cc d x s over the s rows done
    so far) and the rows' products with the start ``KZ = K Z_0^T = ZK_0[:, p]^T``
    (a gather, K' being symmetric); reads ``K'[p, p]`` and multiplies the rows
    through ``rows`` (`_BlockRows` or `_SourceRows`). See the module
    docstring, *Segments*.
    """

    def __init__(self, rows, KZ: np.ndarray):
        d, size = KZ.shape[1], rows.p.shape[0]
        self.rows, self.p, self.KZ = rows, rows.p, KZ
        self.Tc = np.eye(d)
        self.Cc = np.zeros((d, size))
        self.done = 0

    def basis_products(self, m: int) -> np.ndarray:
        """``Q^T`` (m x (d + m)) of the next m rows: ``[K_j Z_cur^T | K_bb]``. Cost O(m d (d + s))."""
        s, d = self.done, self.Tc.shape[0]
        Kb = self.rows.square_rows(s, s + m)  # K'[p_j, p[:s + m]]
        Qt = np.empty((m, d + m))
        Qt[:, :d] = self.KZ[s : s + m] @ self.Tc.T
        Qt[:, :d] += Kb[:, :s] @ self.Cc[:, :s].T
        Qt[:, d:] = Kb[:, s:]
        return Qt

    def compose(self, W: np.ndarray, done: int) -> None:
        """Fold a sub-block's ``W = [T | C]`` (``done`` steps) into Tc, Cc. Cost O(d^2 s)."""
        s, d = self.done, self.Tc.shape[0]
        T = W[:, :d]
        self.Cc[:, :s] = T @ self.Cc[:, :s]
        self.Cc[:, s : s + done] = W[:, d : d + done]
        self.Tc = T @ self.Tc
        self.done = s + done

    def within(self, growth_limit: float) -> bool:
        """``||Tc||_F / sqrt(d) <= growth_limit`` (the re-materialisation test)."""
        return float(np.sum(self.Tc * self.Tc)) <= growth_limit * growth_limit * self.Tc.shape[0]

    def apply(self, Z0: np.ndarray, ZK0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The materialised ``Z = Tc Z_0 + Cc E`` and ``ZK = Tc ZK_0 + Cc K``. Cost 4 d^2 l + 2 d s l."""
        s, p = self.done, self.p
        Tc, Cc = self.Tc.astype(Z0.dtype), self.Cc[:, :s].astype(Z0.dtype)  # in the state's dtype
        ZK = self.rows.left_product(Cc, Tc, ZK0)
        Z = Tc @ Z0
        scatter_add(Z, p[:s], Cc, np.unique(p[:s]).size == s)
        return Z, ZK


def _stacked(top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
    """``[top; bottom]``: the array both are views of when they are its two halves (as this
    module returns A and B, AK and BK), else a new one. Only read from: the step stays pure."""
    base = top.base
    if (base is not None and bottom.base is base and base.flags.c_contiguous
            and base.shape == (top.shape[0] + bottom.shape[0], top.shape[1])
            and top.ctypes.data == base.ctypes.data and bottom.ctypes.data == base.ctypes.data + top.nbytes):
        return base
    return np.concatenate([top, bottom])


class Columns(Protocol):
    """What `fold_segments` asks of the holder of the state's l columns ``Z``, ``ZK`` (d x l)."""

    def segment(self, a: int, e: int) -> Segment:
        """The steps a .. e-1 of the block as a `Segment` (its rows and ``K_seg Z_0^T``)."""
        ...

    def products(self, r: int) -> np.ndarray:
        """``Z AK^T`` (d x r), KHA-SMD's Gram block, at the segment's start."""
        ...

    def apply(self, seg: Segment) -> None:
        """Materialise the segment's folded steps on the columns."""
        ...


class LocalColumns:
    """The state's l columns in this process, for `fold_segments`: ``Z`` and ``ZK`` (d x l) and the rows
    of the block (an array, or a row source). `kpca.sharded.kha_step` holds the same columns over shards."""

    def __init__(self, Z: np.ndarray, ZK: np.ndarray, rows, idx: np.ndarray):
        self.Z, self.ZK, self.rows, self.idx = Z, ZK, rows, idx

    def segment(self, a: int, e: int) -> Segment:
        """The steps a .. e-1 of the block as a `Segment`: ``K Z_0^T = ZK_0[:, p]^T`` is a gather (K' symmetric)."""
        return Segment(_segment_rows(self.rows, a, e, self.idx), np.ascontiguousarray(self.ZK[:, self.idx[a:e]].T))

    def products(self, r: int) -> np.ndarray:
        """``Z AK^T`` (d x r), KHA-SMD's Gram block."""
        return self.Z @ self.ZK[:r].T

    def apply(self, seg: Segment) -> None:
        """Materialise the segment's steps: ``Z = Tc Z_0 + Cc E``, ``ZK = Tc ZK_0 + Cc K``."""
        self.Z, self.ZK = seg.apply(self.Z, self.ZK)


def fold_segments(columns: Columns, state: KHAState, idx: np.ndarray, gain: np.ndarray, m_max: int, growth_limit: float,
                  r: int, l: int) -> np.ndarray | None:
    """One KHA-family step per row of ``idx``, in order, segment by segment: the loop of the module
    docstring, over ``columns`` (`LocalColumns`, or the shards' `kpca.sharded.kha_step.ShardColumns`) that
    hold Z and ZK and are asked only for a segment's gather, KHA-SMD's ``Z AK^T`` and the segment's
    materialisation. The small matrices (sub-block transforms, their folding, the growth guard, rho) are
    computed here, so the one-process and the sharded step run the same arithmetic. Returns KHA-SMD's new
    log-gains rho (float64), None for the other solvers. Cost: the module docstring's table.
    """
    smd = state.smd
    d = 2 * r if smd else r
    decay = state.solver != "kha"
    rho, mu, xi = None, 0.0, 0.0
    if smd:
        rho, mu, xi = state.gain_terms()
        rho = rho.astype(np.float64)
    t0, b, a = int(state.t), idx.shape[0], 0
    while a < b:
        e = min(b, a + SEGMENT_ROWS)
        seg = columns.segment(a, e)
        S = columns.products(r) if smd else None  # Z_cur AK_cur^T (d x r)
        while seg.done < e - a:
            m = min(m_max, e - a - seg.done)
            Qt = seg.basis_products(m)
            if smd:
                n = d + m
                Gt = np.zeros((n, n))  # Gm^T = X X_K^T, X = [Z_cur; E], X_K = [AK_cur; 0; K_j]
                Gt[:d, :r] = S
                Gt[:d, d:] = Qt[:, :d].T
                Gt[d:, :r] = Qt[:, :r]  # AK_cur[:, p_j]^T
                Gt[d:, d:] = Qt[:, d:].T
                W = np.zeros((d, n))
                W[:, :d] = np.eye(d)
                R = np.ascontiguousarray(Gt[:d])  # R = W Gm^T at W = [I | 0]
                done = smd_transform(W, R, Qt, Gt, rho, gain, t0 + a + seg.done, float(l), mu, xi, growth_limit)
                S = R @ W[:r].T  # Z_new AK_new^T = W Gm^T W_A^T
            else:
                W = np.zeros((r, r + m))
                W[:, :r] = np.eye(r)
                done = kha_transform(W, Qt, gain, t0 + a + seg.done, decay, float(l), growth_limit)
            seg.compose(W, done)
            if not seg.within(growth_limit):
                break
        columns.apply(seg)
        a += seg.done
    return rho
