"""Sharded passes (kpca.sharded.shards, kpca.sharded.kha_step) against the one-process driver.

Every shard runs in this process, in a fixed order; the sharded fit must equal `run_passes` over the
whole data from the same start to 1e-10 relative (norm-wise: ``|sharded - whole| <= 1e-10 max|whole|``),
and be bit-identical run to run. Observed (2026-11-26, 2 cores): A and AK of KHA and KHA-t bit for
bit; KHA-et and KHA-SMD at most 3e-15, the rounding of the shard-order reductions (eigenvalue
estimates, Z AK^T). With a reduction unit (partial sums per 64 rows in global order) the split no
longer changes a bit.
"""

import numpy as np
import pytest

from kpca.driver import PassHooks, run_passes
from kpca.kernels import KernelSpec
from kpca.rows import KernelRows
from kpca.solvers._ritz import ritz_components
from kpca.sharded.passes import (join_state, reduction_unit, run_sharded_passes, send_start, sharded_centering,
                                 split_state, unit_bounds)
from kpca.sharded.shards import LocalShards, Shard, make_group, shard_bounds
from tests.naive import start_state

KHA_FAMILY = ["kha", "kha-t", "kha-et", "kha-smd"]
KERNEL = KernelSpec("gaussian", sigma=2.0)
R = 6
BLOCK = 64
# uneven shards; with blocks of 64 (in permuted order) every block has rows in every shard
SPLITS = [2, [170, 250], [97, 211, 112]]
ARRAYS = ("A", "AK", "B", "BK", "rho", "gain", "eigenvalues", "centering_column_means")
# KHA and KHA-t: no reduction over shards reaches their arithmetic, so they differ from the one-process
# passes only where a GEMM rounds a column differently by its place in the block. OpenBLAS 0.3.31
# (numpy 2.4) does (X @ Y[170:].T differs from (X @ Y.T)[:, 170:] by 1 ulp in places); earlier
# builds gave bit-identical A and AK.
GEMM_RTOL = 1e-13


@pytest.fixture(scope="module")
def data():
    return np.random.default_rng(17).normal(size=(420, 5))


class CountedShards(LocalShards):
    """Shards in this process that record the method of every call asked of them all (each still runs)."""

    def __init__(self, shards):
        super().__init__(shards)
        self.methods = []

    def each(self, call):
        self.methods.append(call.method)
        return super().each(call)


def params_for(solver):
    return {"eta0": 0.2, "mu": 0.5, "xi": 0.99} if solver == "kha-smd" else {"eta0": 0.3}


def whole_fit(data, solver, passes, params=None, **rows_options):
    rows = KernelRows(data, KERNEL, chunk_rows=128, **rows_options)
    rows.fit_centering()
    first = start_state(solver, R, rows, seed=3, **(params or params_for(solver)))
    state, stopped = run_passes(rows, first, passes, BLOCK)
    assert not stopped
    return first, state


def sharded_fit(data, first, passes, split, hooks=None, unit_rows=None, **rows_options):
    group = make_group(data, KERNEL, shard_bounds(data.shape[0], split), R, first["solver"], unit_rows=unit_rows,
                       chunk_rows=64, **rows_options)
    state, stopped = run_sharded_passes(split_state(first, group), group, passes, BLOCK, hooks)
    return join_state(state, group), stopped, group


def relative_difference(got, want):
    """max over the state's arrays of ``max|got - want| / max|want|``."""
    worst = 0.0
    for key in ARRAYS:
        if key in want:
            scale = float(np.abs(want[key]).max()) or 1.0
            worst = max(worst, float(np.abs(np.asarray(got[key]) - want[key]).max()) / scale)
    return worst


def assert_same_state(got, want, rtol=1e-10):
    assert set(got) == set(want)
    for key in want:
        if key not in ARRAYS:
            assert got[key] == want[key], key
    assert relative_difference(got, want) <= rtol


@pytest.mark.parametrize("split", SPLITS, ids=["2-even", "2-uneven", "3-uneven"])
@pytest.mark.parametrize("solver", KHA_FAMILY)
def test_two_sharded_passes_equal_the_one_process_passes(data, solver, split):
    first, want = whole_fit(data, solver, 2)
    got, stopped, _ = sharded_fit(data, first, 2, split)
    assert not stopped
    assert_same_state(got, want)
    if solver in ("kha", "kha-t"):  # no reduction over shards reaches their arithmetic: GEMM rounding only
        assert relative_difference(got, want) <= GEMM_RTOL


@pytest.mark.parametrize("solver", ["kha-et", "kha-smd"])
def test_segments_shorter_than_the_block(data, solver, monkeypatch):
    """Several gathers and applies per block (segments of 40 rows in blocks of 64)."""
    import kpca.solvers._blocked as blocked

    monkeypatch.setattr(blocked, "SEGMENT_ROWS", 40)  # one loop (blocked.fold_segments) serves both forms
    first, want = whole_fit(data, solver, 1)
    got, _, _ = sharded_fit(data, first, 1, [150, 270])
    assert_same_state(got, want)


@pytest.mark.parametrize("solver", ["kha", "kha-smd"])
def test_float32_tiles_agree_to_their_rounding(data, solver):
    """float32 kernel tiles: KHA bit for bit where the shard boundary falls on a chunk boundary (a
    column's place in its SIMD lanes is then the same; shards are whole store chunks). KHA-SMD to
    float32 rounding: its reductions differ in the last float64 bits, and Cc is rounded to float32
    before the product with the tiles (observed ~2e-7)."""
    options = {"dtype": np.float32}
    first, want = whole_fit(data, solver, 1, **options)
    got, _, _ = sharded_fit(data, first, 1, [128, 292], **options)
    if solver == "kha":
        for key in ("A", "AK"):
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    else:
        assert_same_state(got, want, rtol=1e-5)


def test_the_divergence_guard_rolls_every_shard_back(data):
    """A gain so large that the pass restarts with smaller gains: the shards return to their columns at
    the pass's start, as run_passes returns to its state."""
    first, want = whole_fit(data, "kha-et", 2, params={"eta0": 500.0})
    assert want["gain_reductions"] >= 1
    got, _, _ = sharded_fit(data, first, 2, [170, 250])
    assert_same_state(got, want)


def test_sharded_runs_are_bit_identical(data):
    first, _ = whole_fit(data, "kha-smd", 0)
    one, _, _ = sharded_fit(data, first, 2, 3)
    two, _, _ = sharded_fit(data, first, 2, 3)
    for key in ARRAYS:
        np.testing.assert_array_equal(one[key], two[key], err_msg=key)


def test_stop_and_resume_mid_pass_equals_uninterrupted(data):
    """A consistent cut: the coordinator's state plus every shard's columns after the same block."""
    first, want = whole_fit(data, "kha-et", 2)
    blocks = iter(range(100))
    cut, stopped, group = sharded_fit(data, first, 2, [200, 220], PassHooks(should_stop=lambda: next(blocks) == 4))
    assert stopped and 0 < cut["position"] < data.shape[0]
    got, stopped, _ = sharded_fit(data, cut, 2, 3)  # resumed on a different split
    assert not stopped
    assert_same_state(got, want)


@pytest.mark.parametrize("solver", ["kha-et", "kha-smd"])
def test_with_a_reduction_unit_the_split_does_not_change_a_bit(data, solver):
    """Partial sums per 64 rows, added in global order: 1, 2 or 3 workers give the same bits, and a
    fit stopped mid-pass and resumed on another split ends bit-identical to the uninterrupted one."""
    first, want = whole_fit(data, solver, 2)
    fits = [sharded_fit(data, first, 2, split, unit_rows=64)[0] for split in (1, [128, 292], [64, 192, 164])]
    assert_same_state(fits[0], want)
    blocks = iter(range(100))
    cut, stopped, _ = sharded_fit(data, first, 2, [256, 164], PassHooks(should_stop=lambda: next(blocks) == 8),
                                  unit_rows=64)
    assert stopped
    fits.append(sharded_fit(data, cut, 2, [192, 228], unit_rows=64)[0])
    for fit in fits[1:]:
        for key in ARRAYS:
            if key in want:
                np.testing.assert_array_equal(fit[key], fits[0][key], err_msg=key)
    with pytest.raises(ValueError, match="multiple of the reduction unit"):
        make_group(data, KERNEL, shard_bounds(data.shape[0], [100, 320]), R, solver, unit_rows=64)


@pytest.mark.parametrize("split", [2, [97, 211, 112]], ids=["2-even", "3-uneven"])
def test_sharded_centring_equals_fit_centering(data, split):
    rows = KernelRows(data, KERNEL, chunk_rows=128)
    want = rows.fit_centering(block_size=100)
    group = make_group(data, KERNEL, shard_bounds(data.shape[0], split), R, "kha", chunk_rows=64)
    got = sharded_centering(group, block_size=100)
    means = np.concatenate([s.rows.centering.column_means for s in group.shards])
    np.testing.assert_allclose(means, want.column_means, rtol=1e-14)
    assert got["centering_grand_mean"] == pytest.approx(want.grand_mean, rel=1e-13)
    assert got["centering_mean_diagonal"] == pytest.approx(want.mean_diagonal, rel=1e-13)
    assert group.grand_mean == got["centering_grand_mean"]


def test_sharded_centring_with_a_reduction_unit_does_not_depend_on_the_split(data):
    results = []
    for split in (1, [128, 292], [64, 192, 164]):
        group = make_group(data, KERNEL, shard_bounds(data.shape[0], split), R, "kha", unit_rows=64, chunk_rows=64)
        entries = sharded_centering(group, block_size=100)
        results.append((np.concatenate([s.rows.centering.column_means for s in group.shards]), entries))
    for means, entries in results[1:]:
        np.testing.assert_array_equal(means, results[0][0])
        assert entries == results[0][1]


def test_messages_do_not_grow_with_the_rows():
    """Per block the shards receive and send the same bytes at l = 384 and 768: O(r b + b n), not l."""
    per_block = []
    for l in (384, 768):
        data = np.random.default_rng(5).normal(size=(l, 5))
        first, _ = whole_fit(data, "kha-smd", 0)
        _, _, group = sharded_fit(data, first, 1, 2)
        per_block.append((group.bytes_out * BLOCK / l, group.bytes_in * BLOCK / l))
    assert per_block[0] == per_block[1]
    d, n = 2 * R, 5
    assert per_block[0][0] == 2 * 8 * (d * d + d * BLOCK + BLOCK * (n + 3))  # the update, to each of 2 shards
    assert per_block[0][1] == 8 * (d * BLOCK + BLOCK * (n + 2) + 2 * d * R)  # columns, points; S from each


def test_shard_bounds_are_contiguous_and_checked():
    assert shard_bounds(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert shard_bounds(10, [2, 8]) == [(0, 2), (2, 10)]
    with pytest.raises(ValueError, match="shards"):
        shard_bounds(10, 0)
    with pytest.raises(ValueError, match="sum"):
        shard_bounds(10, [3, 3])


def test_unit_bounds_cover_the_rows_in_whole_units():
    for l, k in [(420, 3), (1000, 7), (10, 20), (257, 256)]:
        unit = reduction_unit(l)
        bounds = unit_bounds(l, k, unit)
        assert bounds[0][0] == 0 and bounds[-1][1] == l
        assert all(a == prev[1] for prev, (a, _) in zip(bounds, bounds[1:]))
        assert all(a % unit == 0 and b > a for a, b in bounds)
        assert len(bounds) == min(k, -(-l // unit))
    assert reduction_unit(100_000) == 391


@pytest.mark.parametrize("solver", ["kha", "kha-smd"])
def test_a_sparse_start_sent_as_one_update_equals_the_split_start(data, solver):
    """`send_start`: the shards form their columns of ZK from the start's nonzero columns' points."""
    rows = KernelRows(data, KERNEL, chunk_rows=128)
    rows.fit_centering()
    first = start_state(solver, R, rows, seed=3, **params_for(solver))
    assert np.count_nonzero(np.any(first["A"] != 0, axis=0)) < data.shape[0]  # a sparse start
    group = make_group(data, KERNEL, shard_bounds(data.shape[0], [97, 211, 112]), R, solver, chunk_rows=64)
    sharded_centering(group, block_size=100)
    coordinator = send_start(first, group)
    assert not set(coordinator) & {"A", "AK", "B", "BK", "centering_column_means"}
    got = join_state(coordinator, group)
    for key in ("A", "AK", "B", "BK"):
        if key in first:
            scale = float(np.abs(first[key]).max()) or 1.0
            assert np.abs(got[key] - first[key]).max() <= 1e-12 * scale, key


def test_a_subset_start_with_guard_vectors_is_sent_as_one_update(data):
    """`send_start` of the subset start (r served rows and g guard vectors, nonzero on its m landmarks'
    columns only): one update with ``[A; G; B]`` builds every shard's columns, the guards included."""
    from kpca.fitting import FitRequest, prepare_fit

    rows = KernelRows(data, KERNEL, chunk_rows=128)
    first = prepare_fit(rows, FitRequest("kha-smd", R, {"init": "subset", "init_size": 60, "update": "rayleigh-ritz"})).state
    g = first["guard_A"].shape[0]
    assert g > 0 and np.count_nonzero(np.any(first["A"] != 0, axis=0)) == 60  # a sparse start with guards
    group = make_group(data, KERNEL, shard_bounds(data.shape[0], [97, 211, 112]), R, "kha-smd", chunk_rows=64)
    sharded_centering(group, block_size=100)
    got = join_state(send_start(first, group), group)
    assert group.guards == g and group.d == 2 * R + g
    for key in ("A", "AK", "guard_A", "guard_AK", "B", "BK"):
        scale = float(np.abs(first[key]).max()) or 1.0
        assert got[key].shape == first[key].shape and np.abs(got[key] - first[key]).max() <= 1e-10 * scale, key


def test_grams_are_the_whole_products(data):
    rows = KernelRows(data, KERNEL, chunk_rows=128)
    rows.fit_centering()
    first = start_state("kha", R, rows, seed=3, **params_for("kha"))
    group = make_group(data, KERNEL, unit_bounds(data.shape[0], 3, 64), R, "kha", unit_rows=64, chunk_rows=64)
    split_state(first, group)
    H, G = group.grams()
    np.testing.assert_allclose(H, first["AK"] @ first["AK"].T, rtol=1e-12)
    np.testing.assert_allclose(G, first["AK"] @ first["A"].T, rtol=1e-12, atol=1e-14 * np.abs(G).max())


@pytest.mark.parametrize("split", SPLITS, ids=["2-even", "2-uneven", "3-uneven"])
@pytest.mark.parametrize("solver", ["kha-et", "kha-smd"])
def test_sharded_rayleigh_ritz_passes_equal_the_one_process_passes(data, solver, split):
    """Two Rayleigh-Ritz passes (`kpca.solvers._rayleigh_ritz`) over shards: the served components, their
    eigenvalues and the residuals the passes measure equal those of the one-process passes."""
    rows = KernelRows(data, KERNEL, chunk_rows=128)
    rows.fit_centering()
    first = dict(start_state(solver, R, rows, seed=3, **params_for(solver)), update="rayleigh-ritz")
    residuals = {"whole": [], "sharded": []}

    def on_pass(kind):
        return PassHooks(on_pass=lambda state: residuals[kind].append(state["residual"]))

    want, _ = run_passes(rows, first, 2, BLOCK, on_pass("whole"))
    group = make_group(data, KERNEL, shard_bounds(data.shape[0], split), R, solver, chunk_rows=64)
    got, stopped = run_sharded_passes(split_state(first, group), group, 2, BLOCK, on_pass("sharded"))
    got = join_state(got, group)
    assert not stopped and got["pass"] == want["pass"] == 2
    np.testing.assert_allclose(residuals["sharded"], residuals["whole"], rtol=1e-8)
    assert residuals["whole"][1] < residuals["whole"][0]  # a power step: the components got closer
    _, served_got, mu_got = ritz_components(got["A"], got["AK"])
    _, served_want, mu_want = ritz_components(want["A"], want["AK"])
    np.testing.assert_allclose(mu_got, mu_want, rtol=1e-10)
    np.testing.assert_allclose(served_got, served_want, atol=1e-8 * np.abs(served_want).max())


def test_a_sharded_rayleigh_ritz_fit_stops_at_its_tol(data):
    rows = KernelRows(data, KERNEL, chunk_rows=128)
    rows.fit_centering()
    first = dict(start_state("kha-smd", R, rows, seed=3, **params_for("kha-smd")), update="rayleigh-ritz")
    group = make_group(data, KERNEL, shard_bounds(data.shape[0], 2), R, "kha-smd", chunk_rows=64)
    state, stopped = run_sharded_passes(split_state(first, group), group, 50, BLOCK, tol=1e-3)
    assert not stopped and state["converged"] and state["residual"] <= 1e-3 and state["pass"] < 50


def test_a_sharded_rayleigh_ritz_pass_sends_messages_of_many_blocks(data):
    """The coefficients do not change during a Rayleigh-Ritz pass, so its messages to the shards carry as
    many rows as `message_rows` allows, whatever the block size: two calls per message (coefficients,
    images) plus a fixed few for the reductions, not two per block of rows."""
    from kpca.sharded.passes import message_rows

    rows = KernelRows(data, KERNEL, chunk_rows=128)
    rows.fit_centering()
    first = dict(start_state("kha-et", R, rows, seed=3, **params_for("kha-et")), update="rayleigh-ritz")
    group = make_group(data, KERNEL, shard_bounds(data.shape[0], 2), R, "kha-et", chunk_rows=64)
    state = split_state(first, group)
    group.shards = counted = CountedShards(group.shards)
    run_sharded_passes(state, group, 1, block_size=16)
    assert message_rows(group, 16) >= data.shape[0] > 16  # one message holds these rows
    methods = counted.methods
    assert methods.count(Shard.coefficients) == 1 and methods.count(Shard.add_images) == 1, methods


def test_sharded_times_equal_the_one_process_product(data):
    """`sharded_times`, the start's extension pass of a sharded fit: ``C K'`` for coefficients the
    coordinator holds, summed over the shards, equals the one-process product; and `ShardedProducts`
    forwards everything else to the rows (setting the centring sets the rows')."""
    from kpca.sharded.passes import ShardedProducts, sharded_times

    rows = KernelRows(data, KERNEL, chunk_rows=128)
    centering = rows.fit_centering()
    group = make_group(data, KERNEL, shard_bounds(data.shape[0], 3), R, "kha-smd", chunk_rows=64)
    sharded_centering(group)
    C = np.random.default_rng(4).normal(size=(2 * R + 3, data.shape[0]))  # more rows than kha-smd's d = 2 r
    want = rows.times(C)
    np.testing.assert_allclose(sharded_times(group, C, block_size=50), want, rtol=1e-10, atol=1e-12 * np.abs(want).max())
    proxy = ShardedProducts(KernelRows(data, KERNEL, chunk_rows=128), group)
    proxy.centering = centering
    assert proxy.rows.centering is centering and proxy.n_rows == data.shape[0]
    np.testing.assert_allclose(proxy.times(C), want, rtol=1e-10, atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize("split", [2, [97, 211, 112]], ids=["2-even", "3-uneven"])
def test_sharded_rayleigh_ritz_passes_iterate_the_guard_vectors(data, split):
    """The default start (r served components and g guard vectors, `kpca.solvers._rayleigh_ritz`) over
    shards: the shards hold ``[A; G; B]``, and three passes over float32 tiles (the power step, as one
    process takes over float32 tiles) give the one-process passes' residuals, eigenvalues and served
    components to float32's rounding; the state joined back holds the guards. Before, the sharded passes
    dropped the guards."""
    from kpca.fitting import FitRequest, prepare_fit
    from bench._common import subspace_angles

    float32 = {"dtype": np.float32, "compute_dtype": np.float32}
    rows = KernelRows(data, KERNEL, chunk_rows=128, **float32)
    prepared = prepare_fit(rows, FitRequest("kha-smd", R, {"init_size": 100, "tol": 0, "passes": 3,
                                                           "kernel_precision": "float32", "update": "rayleigh-ritz"}))
    first = prepared.state
    g = first["guard_A"].shape[0]
    assert g > 0 and first["update"] == "rayleigh-ritz"
    residuals = {"whole": [], "sharded": []}

    def on_pass(kind):
        return PassHooks(on_pass=lambda state: residuals[kind].append(state["residual"]))

    want, _ = run_passes(rows, first, 3, BLOCK, on_pass("whole"))
    group = make_group(data, KERNEL, shard_bounds(data.shape[0], split), R, "kha-smd", chunk_rows=64, **float32)
    state = split_state(first, group)
    assert group.guards == g and group.d == 2 * R + g and state["guard_rows"] == g and "guard_A" not in state
    got, stopped = run_sharded_passes(state, group, 3, BLOCK, on_pass("sharded"))
    got = join_state(got, group)
    assert not stopped and got["pass"] == want["pass"] == 3 and "guard_rows" not in got
    assert got["guard_A"].shape == got["guard_AK"].shape == (g, data.shape[0])
    assert got["B"].shape == (R, data.shape[0]) and not np.any(got["B"])
    # both figures carry the float32 tiles' sampled rounding bound (`kpca.solvers._rounding`), the sharded
    # one's sample computed on the shards
    np.testing.assert_allclose(residuals["sharded"], residuals["whole"], rtol=1e-3)
    assert residuals["whole"][2] < residuals["whole"][0]
    np.testing.assert_allclose(got["eigenvalues"], want["eigenvalues"], rtol=1e-5)
    dense = KernelRows(data, KERNEL, chunk_rows=128)
    dense.fit_centering()
    assert subspace_angles(got["A"], want["A"], dense.dense()).max() < 1e-3


@pytest.mark.parametrize("split", [2, [97, 211, 112]], ids=["2-even", "3-uneven"])
def test_sharded_rayleigh_ritz_passes_take_lobpcg_steps_over_float64_tiles(data, split):
    """Over float64 tiles one process takes LOBPCG's step (the guards, the residual directions and the
    previous step); the sharded passes take the same step from reductions: four passes give the
    one-process residuals, eigenvalues and served components to rounding, the joined state holds the
    previous step, and the residual falls faster than the power step's (before, shards took the power
    step: 1.6e-4 after three passes against 8e-6)."""
    from kpca.fitting import FitRequest, prepare_fit
    from bench._common import subspace_angles

    rows = KernelRows(data, KERNEL, chunk_rows=128)
    prepared = prepare_fit(rows, FitRequest("kha-smd", R, {"init_size": 100, "tol": 0, "passes": 3,
                                                           "kernel_precision": "float64", "update": "rayleigh-ritz"}))
    first = prepared.state
    residuals = {"whole": [], "sharded": []}

    def on_pass(kind):
        return PassHooks(on_pass=lambda state: residuals[kind].append(state["residual"]))

    want, _ = run_passes(rows, first, 3, BLOCK, on_pass("whole"))
    assert "previous_A" in want  # one process took LOBPCG's step
    group = make_group(data, KERNEL, shard_bounds(data.shape[0], split), R, "kha-smd", chunk_rows=64)
    got, stopped = run_sharded_passes(split_state(first, group), group, 3, BLOCK, on_pass("sharded"))
    assert got["previous_rows"] == group.previous_rows > 0
    got = join_state(got, group)
    assert not stopped and got["previous_A"].shape == got["previous_AK"].shape == want["previous_A"].shape
    np.testing.assert_allclose(residuals["sharded"], residuals["whole"], rtol=1e-7)
    assert residuals["whole"][2] < 1e-2 * residuals["whole"][0]
    np.testing.assert_allclose(got["eigenvalues"], want["eigenvalues"], rtol=1e-10)
    dense = KernelRows(data, KERNEL, chunk_rows=128)
    dense.fit_centering()
    assert subspace_angles(got["A"], want["A"], dense.dense()).max() < 1e-7


def test_the_sharded_centring_pass_makes_the_start_extension_too(data):
    """`ShardedProducts.fit_centering_times`, the sharded fit's centring and the Nystrom start's extension
    in one pass (as one process's `KernelRows.fit_centering_times`): the centring and ``C K'`` equal one
    process's, every shard keeps its columns' centring, and a prepared default fit over the proxy takes
    one sharded pass of points, not two (before: the centring pass, then the extension's)."""
    from kpca.fitting import FitRequest, prepare_fit
    from kpca.sharded.passes import ShardedProducts

    C = np.random.default_rng(5).normal(size=(7, data.shape[0]))
    rows = KernelRows(data, KERNEL, chunk_rows=128)
    want = rows.fit_centering_times(C)
    group = make_group(data, KERNEL, shard_bounds(data.shape[0], [97, 211, 112]), R, "kha-smd", chunk_rows=64)
    proxy = ShardedProducts(KernelRows(data, KERNEL, chunk_rows=128), group)
    got = proxy.fit_centering_times(C)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12 * np.abs(want).max())
    np.testing.assert_allclose(proxy.centering.column_means, rows.centering.column_means, rtol=1e-12)
    assert proxy.centering.grand_mean == pytest.approx(rows.centering.grand_mean, rel=1e-12)
    for shard in group.shards:
        np.testing.assert_allclose(shard.rows.centering.column_means,
                                   rows.centering.column_means[shard.first : shard.stop], rtol=1e-12)

    group = make_group(data, KERNEL, shard_bounds(data.shape[0], 2), R, "kha-smd", chunk_rows=64)
    group.shards = counted = CountedShards(group.shards)
    prepared = prepare_fit(ShardedProducts(KernelRows(data, KERNEL, chunk_rows=128), group),
                           FitRequest("kha-smd", R, {"init_size": 100, "update": "rayleigh-ritz"}))
    assert prepared.started and prepared.params["init"] == "nystrom"
    methods = counted.methods
    assert methods.count(Shard.add_column_sums) > 0 and methods.count(Shard.add_images) == 0, methods  # one pass
