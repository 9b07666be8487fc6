import numba
import numpy as np
import pytest

from kpca._fastexp import FASTMATH_FLAGS, exp_nonpositive
from kpca.kernels import KERNEL_TYPES, KERNELS, KernelSpec, kernel_block, kernel_diagonal, kernel_left_product_into
from tests.naive import kernel_matrix

SPECS = [
    KernelSpec("gaussian", sigma=1.3),
    KernelSpec("laplacian", sigma=2.0),
    KernelSpec("polynomial", degree=3, offset=0.5, gamma=0.7),
    KernelSpec("linear"),
    KernelSpec("tanh", gamma=0.2, offset=-0.1),
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.type)
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_kernel_block_matches_definition(spec, dtype, tol, rng):
    X = rng.normal(size=(17, 5)).astype(dtype)
    Y = rng.normal(size=(23, 5)).astype(dtype)
    K = kernel_block(X, Y, spec)
    assert K.dtype == dtype and K.shape == (17, 23)
    ref = kernel_matrix(X, Y, spec)
    np.testing.assert_allclose(K, ref, rtol=tol, atol=tol * np.abs(ref).max())


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.type)
def test_kernel_diagonal(spec, rng):
    X = rng.normal(size=(9, 4))
    np.testing.assert_allclose(kernel_diagonal(X, spec), np.diag(kernel_matrix(X, X, spec)), rtol=1e-12)


def test_gaussian_of_identical_points_is_exactly_one(rng):
    X = rng.normal(size=(5, 3)) * 1e3  # cancellation in |x|^2 + |y|^2 - 2xy must not go negative
    K = kernel_block(X, X, KernelSpec("gaussian", sigma=1.0))
    assert np.all(np.diag(K) == 1.0) and np.all(K <= 1.0)


def test_spec_round_trip_and_errors_name_the_field():
    for kind in KERNEL_TYPES:
        spec = KernelSpec(type=kind, **({"sigma": 1.0} if KERNELS[kind].radial else {}))
        assert KernelSpec.from_dict(spec.to_dict()) == spec
    assert KernelSpec.from_dict({"type": "gaussian", "sigma": 3}).to_dict() == {"type": "gaussian", "sigma": 3}
    with pytest.raises(ValueError, match="kernel.sigma"):
        KernelSpec.from_dict({"type": "gaussian", "sigma": 0})
    with pytest.raises(ValueError, match="kernel.type"):
        KernelSpec.from_dict({"type": "cosine"})
    with pytest.raises(ValueError, match="kernel.degree"):
        KernelSpec.from_dict({"type": "polynomial", "degree": 1.5})
    with pytest.raises(ValueError, match="kernel.sigma"):
        KernelSpec.from_dict({"type": "linear", "sigma": 1.0})


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH_FLAGS)
def exp_in_place(x):
    """``x[j] = exp(x[j])`` for a 1-D float32 or float64 array with ``x <= 0``, by the jitted scalar
    `kpca._fastexp.exp_nonpositive` inlined in a loop, as the kernel tiles use it."""
    for j in range(x.shape[0]):
        x[j] = exp_nonpositive(x[j])


@pytest.mark.parametrize("dtype,rtol", [(np.float32, 5e-7), (np.float64, 5e-15)])
def test_fast_exp_matches_numpy_down_to_underflow(dtype, rtol, rng):
    x = np.concatenate([-rng.random(5000) * 80, -rng.random(5000), [0.0, -1e-30, -50.0, -86.9, -200.0, -1e6]])
    if dtype == np.float64:
        x = np.concatenate([x, -rng.random(2000) * 700, [-707.0, -745.0]])
    x = x.astype(dtype)
    out = x.copy()
    exp_in_place(out)
    ref = np.exp(x.astype(np.float64))
    tiny = np.finfo(dtype).tiny
    normal = ref > tiny * 4
    np.testing.assert_allclose(out[normal], ref[normal], rtol=rtol)
    assert np.all(out[~normal] <= tiny * 4) and np.all(out >= 0)
    assert out[x == 0][0] == 1.0


@pytest.mark.parametrize("kind", ["gaussian", "laplacian"])
def test_row_map_split_over_threads_equals_the_definition(kind, rng):
    from kpca.kernels import map_threads

    X, Y = rng.normal(size=(203, 6)), rng.normal(size=(57, 6))  # enough rows to split
    spec = KernelSpec(kind, sigma=1.7)
    np.testing.assert_allclose(kernel_block(X, Y, spec), kernel_matrix(X, Y, spec), rtol=1e-12, atol=1e-14)
    assert map_threads() >= 1


def test_tile_threads_overrides_map_threads_in_its_own_thread_only(rng):
    import threading

    from kpca._threads import map_threads, tile_threads

    default, seen = map_threads(), {}
    with tile_threads(default + 3):
        inside = map_threads()
        other = threading.Thread(target=lambda: seen.update(other=map_threads()))
        other.start()
        other.join()
        X, Y = rng.normal(size=(300, 5)), rng.normal(size=(700, 5))  # tiles split over default + 3 threads
        spec = KernelSpec("gaussian", sigma=2.0)
        np.testing.assert_allclose(kernel_block(X, Y, spec), kernel_matrix(X, Y, spec), rtol=1e-12, atol=1e-14)
    assert inside == default + 3 and seen["other"] == default and map_threads() == default


def test_tiles_run_on_threads_of_their_callers_priority(rng):
    """A thread of lowered OS priority (a fit, `workers.priority`) shares its tiles among pool threads of its
    own niceness, and a thread at the usual priority (a projection) among others: neither waits behind, nor
    runs at, the other's priority (Linux keeps a niceness per thread)."""
    import os
    import threading

    from kpca import _tiles
    from kpca._threads import tile_threads

    X, Y = rng.normal(size=(300, 5)), rng.normal(size=(700, 5))  # 6 tiles: shared among 2 threads
    spec = KernelSpec("gaussian", sigma=2.0)
    base = _tiles.thread_niceness()
    if base > 16:
        pytest.skip("this process already runs at the lowest priorities")
    seen = {}

    def niced():
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), base + 3)
        with tile_threads(2):
            seen["block"] = kernel_block(X, Y, spec)
        seen["nice"] = _tiles.thread_niceness()

    thread = threading.Thread(target=niced)
    thread.start()
    thread.join()
    with tile_threads(2):
        block = kernel_block(X, Y, spec)
    assert seen["nice"] == base + 3
    np.testing.assert_allclose(seen["block"], kernel_matrix(X, Y, spec), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(block, seen["block"], rtol=1e-12, atol=1e-14)
    assert _tiles._pools[base + 3].submit(_tiles.thread_niceness).result() == base + 3
    assert _tiles._pools[base].submit(_tiles.thread_niceness).result() == base


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.type)
@pytest.mark.parametrize("work", [np.float32, np.float64])
def test_kernel_block_into_writes_shifted_block_at_an_offset(spec, work, rng):
    from kpca.kernels import kernel_block_into

    X, Y = rng.normal(size=(300, 7)), rng.normal(size=(1500, 7))  # several row and column tiles
    a, c = rng.normal(size=300), rng.normal(size=1500)
    out = np.full((300, 1600), np.nan)
    kernel_block_into(out, 60, X.astype(work), Y.astype(work), spec, row_shift=a, col_shift=c)
    ref = kernel_matrix(X, Y, spec) + a[:, None] + c[None, :]
    tol = 1e-12 if work == np.float64 else 3e-5
    np.testing.assert_allclose(out[:, 60:1560], ref, rtol=tol, atol=tol * np.abs(ref).max())
    assert np.isnan(out[:, :60]).all() and np.isnan(out[:, 1560:]).all()  # nothing outside the block
    with pytest.raises(ValueError, match="out"):
        kernel_block_into(out[:, ::2], 0, X, Y[:10], spec)


def test_float32_compute_with_float64_rows(rng):
    from kpca.rows import KernelRows

    X = rng.normal(size=(700, 9))
    spec = KernelSpec("gaussian", sigma=2.0)
    exact, mixed = KernelRows(X, spec, chunk_rows=256), KernelRows(X, spec, chunk_rows=256, compute_dtype=np.float32)
    exact.fit_centering(), mixed.fit_centering()
    idx = rng.permutation(700)[:90]
    K = mixed.block(idx)
    assert K.dtype == np.float64 and mixed.take_local(idx).dtype == np.float32
    np.testing.assert_allclose(K, exact.block(idx), atol=2e-6)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.type)
@pytest.mark.parametrize("work,dtype", [(np.float64, np.float64), (np.float32, np.float32), (np.float32, np.float64)])
def test_left_product_adds_C_times_the_shifted_block_at_an_offset(spec, work, dtype, rng, monkeypatch):
    """``acc[:, 60:1560] += C (K + a 1^T + 1 c^T)`` with the block never formed, in the default
    panels and in small ones (several row tiles per panel, a ragged last panel and row tile).
    The block it is checked against is `kernel_block`'s (itself checked against the definition)."""
    from kpca import _tiles as kernels

    X, Y = rng.normal(size=(300, 7)), rng.normal(size=(1500, 7))
    a, c = rng.normal(size=300), rng.normal(size=1500)
    C = rng.normal(size=(5, 300)).astype(dtype)
    block = kernel_block(X, Y, spec) + a[:, None] + c[None, :]
    scale = (np.abs(C) @ np.abs(block)).max()
    tol = 1e-13 if work == np.float64 else 3e-6
    for rows, columns in ((kernels._PANEL_ROWS, None), (64, 128)):
        monkeypatch.setattr(kernels, "_PANEL_ROWS", rows)
        if columns is not None:
            monkeypatch.setattr(kernels, "_PANEL_BYTES", rows * columns * np.dtype(work).itemsize)
        start = rng.normal(size=(5, 1600))
        acc = start.copy()
        kernel_left_product_into(acc, 60, C, X.astype(work), Y.astype(work), spec, row_shift=a, col_shift=c)
        np.testing.assert_allclose(acc[:, 60:1560] - start[:, 60:1560], C.astype(np.float64) @ block, rtol=0,
                                   atol=tol * scale)
        assert (acc[:, :60] == start[:, :60]).all() and (acc[:, 1560:] == start[:, 1560:]).all()


def test_left_product_does_not_depend_on_the_thread_count(rng, monkeypatch):
    """Each column panel is one thread's, its row tiles in order: bit for bit the same."""
    from kpca import _tiles as kernels

    monkeypatch.setattr(kernels, "_PANEL_ROWS", 64)
    X, Y, C = rng.normal(size=(200, 6)), rng.normal(size=(900, 6)), rng.normal(size=(4, 200))
    spec = KernelSpec("gaussian", sigma=2.0)
    results = []
    for threads in (1, 2, 3):
        acc = np.zeros((4, 900))
        results.append(kernel_left_product_into(acc, 0, C, X, Y, spec, threads=threads))
    assert all((r == results[0]).all() for r in results)
    with pytest.raises(ValueError, match="acc"):
        kernel_left_product_into(np.zeros((3, 900)), 0, C, X, Y, spec)


@pytest.mark.parametrize("spec", [SPECS[0], SPECS[2]], ids=lambda s: s.type)
def test_left_product_with_a_transform_of_a_start_matrix(spec, rng):
    """``acc[:, J] = T start[:, J] + C B`` (start untouched, acc outside J untouched)."""
    X, Y = rng.normal(size=(90, 5)), rng.normal(size=(700, 5))
    C, T = rng.normal(size=(4, 90)), rng.normal(size=(4, 4))
    start, acc = rng.normal(size=(4, 800)), np.full((4, 800), np.nan)
    kept = start.copy()
    kernel_left_product_into(acc, 50, C, X, Y, spec, T=T, start=start)
    want = T @ start[:, 50:750] + C @ kernel_block(X, Y, spec)
    np.testing.assert_allclose(acc[:, 50:750], want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    assert np.isnan(acc[:, :50]).all() and np.isnan(acc[:, 750:]).all() and (start == kept).all()
    with pytest.raises(ValueError, match="T, start"):
        kernel_left_product_into(acc, 50, C, X, Y, spec, T=T[:3], start=start)


@pytest.mark.parametrize("kind", ["gaussian", "laplacian"])
@pytest.mark.parametrize("work, dtype", [(np.float64, np.float64), (np.float32, np.float32), (np.float32, np.float64)])
@pytest.mark.parametrize("transform", [False, True])
def test_jitted_panels_equal_the_panels_of_numpy_calls(kind, work, dtype, transform, rng):
    """The radial maps' panels run as jitted calls that never take the interpreter lock (`kpca._tiles._panels`):
    the same ``T start + C B`` as the panels of numpy calls that other maps take, to the rounding of the
    tiles' precision."""
    from kpca import _tiles

    X, Y = rng.normal(size=(300, 6)).astype(work), rng.normal(size=(900, 6)).astype(work)
    C = rng.normal(size=(4, 300)).astype(dtype)
    T = rng.normal(size=(4, 4)).astype(dtype) if transform else None
    start = rng.normal(size=(4, 950))
    spec = KernelSpec(kind, sigma=2.0)
    jitted = np.zeros((4, 950))
    kernel_left_product_into(jitted, 50, C, X, Y, spec, T=T, start=start if transform else None, threads=2)
    tile_map = KERNELS[kind].tile_map
    assert tile_map in _tiles._PANEL_MAPS and _tiles._panels.targetoptions["nogil"]

    def python_map(*args):  # the same map, not one of the jitted panels': run_panels' numpy calls
        tile_map(*args)

    norms = [np.einsum("ij,ij->i", v, v).astype(work) for v in (X, Y)]
    shifts = [np.zeros(300, dtype), np.zeros(900, dtype)]
    numpy_path = np.zeros((4, 950))
    _tiles.run_panels(python_map, numpy_path, 50, np.ascontiguousarray(C), X, Y, *norms, *shifts,
                      work(KERNELS[kind].tile_scale(spec)), 2, T,
                      start if transform else numpy_path)
    scale = np.abs(numpy_path).max()
    tol = 1e-12 if work == np.float64 and dtype == np.float64 else 1e-5
    assert np.abs(jitted - numpy_path).max() <= tol * scale
    assert np.array_equal(jitted[:, :50], numpy_path[:, :50])  # columns before the offset untouched
    if transform:  # T start is formed in acc's precision (float64), whatever C's: C = 0 leaves it alone
        alone = np.zeros((4, 950))
        kernel_left_product_into(alone, 50, np.zeros_like(C), X, Y, spec, T=T, start=start, threads=2)
        want = T.astype(np.float64) @ start[:, 50:]
        assert np.abs(alone[:, 50:] - want).max() <= 1e-13 * np.abs(want).max()


def test_one_tile_thread_holds_blas_to_one_thread(rng):
    """With one tile thread the tiles still run BLAS on one thread: on two, each small GEMM of a tile woke
    BLAS's other thread, and a pass took 2.0x as long (bench/panel_threads.py, one tile thread)."""
    from threadpoolctl import threadpool_limits

    from kpca import _tiles
    from tests.kpca_helpers import blas_threads

    seen = []

    def run(items):
        seen.append(blas_threads())
        list(items)

    with threadpool_limits(limits=2, user_api="blas"):
        _tiles._shared(5, run, 1)
    assert seen == [1]
