import numpy as np
import pytest

from kpca.kernels import KernelSpec
from kpca.rows import KernelRows
from tests.naive import centered, kernel_matrix


class CountingSource:
    """A row source that records every read, to check reads are chunk-sized."""

    def __init__(self, X, chunk_rows):
        self.X, self.shape, self.chunks = X, X.shape, (chunk_rows, X.shape[1])
        self.reads = []

    def __getitem__(self, sl):
        self.reads.append(sl.stop - sl.start)
        return self.X[sl]


@pytest.mark.parametrize("spec", [KernelSpec("gaussian", sigma=1.5), KernelSpec("polynomial", degree=2)],
                         ids=lambda s: s.type)
def test_centred_rows_match_eq5(spec, rng):
    X = rng.normal(size=(97, 6))
    rows = KernelRows(X, spec, chunk_rows=20)
    c = rows.fit_centering(block_size=13)
    Kc = centered(kernel_matrix(X, X, spec))
    idx = np.array([5, 0, 96, 40])
    np.testing.assert_allclose(rows.block(idx), Kc[idx], atol=1e-10)
    assert c.mean_diagonal == pytest.approx(np.trace(Kc) / 97, rel=1e-10)


def test_new_points_get_the_training_centring(rng):
    spec = KernelSpec("gaussian", sigma=2.0)
    X, Z = rng.normal(size=(50, 4)), rng.normal(size=(7, 4))
    rows = KernelRows(X, spec)
    rows.fit_centering()
    K, Kz = kernel_matrix(X, X, spec), kernel_matrix(Z, X, spec)
    expected = Kz - Kz.mean(axis=1, keepdims=True) - K.mean(axis=0) + K.mean()
    np.testing.assert_allclose(rows.transform_block(Z), expected, atol=1e-12)
    # a training point seen as a new point has exactly its training row
    np.testing.assert_allclose(rows.transform_block(X[3:4]), rows.block(np.array([3])), atol=1e-12)


def test_chunked_source_with_small_cache_reads_chunks_and_agrees(rng):
    X = rng.normal(size=(230, 5))
    spec = KernelSpec("laplacian", sigma=3.0)
    source = CountingSource(X, chunk_rows=32)
    chunked = KernelRows(source, spec, cache_bytes=3 * 32 * 5 * 8)  # 3 of 8 chunks fit
    chunked.fit_centering(block_size=50)
    full = KernelRows(X, spec)
    full.fit_centering()
    idx = rng.permutation(230)[:40]
    np.testing.assert_allclose(chunked.block(idx), full.block(idx), atol=1e-12)
    assert max(source.reads) <= 32
    assert chunked._cached_bytes <= chunked.cache_bytes


def test_prefetch_gives_the_same_rows_and_a_fitting_cache_reads_once(rng):
    X = rng.normal(size=(300, 4))
    spec = KernelSpec("gaussian", sigma=2.0)
    plain = KernelRows(CountingSource(X, 25), spec, prefetch=False)
    ahead = KernelRows(CountingSource(X, 25), spec, prefetch=True)
    for rows in (plain, ahead):
        rows.fit_centering(block_size=64)
    idx = rng.permutation(300)[:50]
    np.testing.assert_array_equal(plain.block(idx), ahead.block(idx))
    assert ahead.reads == 12  # every chunk read once; later passes are served by the cache
    ahead.block(idx)
    assert ahead.reads == 12
    ahead.close()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_left_product_and_square_agree_with_the_rows(dtype, rng):
    """``out += C K'[idx, :]`` over a chunked source, and ``K'[idx, idx]`` from the points alone,
    against the rows themselves (float32 rows: a float32 product, within float32 rounding)."""
    X = rng.normal(size=(230, 5))
    rows = KernelRows(CountingSource(X, chunk_rows=64), KernelSpec("gaussian", sigma=2.0), dtype=dtype)
    rows.fit_centering()
    idx = rng.permutation(230)[:40]
    K = rows.block(idx).astype(np.float64)
    C = rng.normal(size=(6, 40))
    start = rng.normal(size=(6, 230))
    out = rows.left_product(idx, C, start.copy())
    tol = 1e-13 if dtype == np.float64 else 1e-6
    np.testing.assert_allclose(out - start, C @ K, rtol=0, atol=tol * (np.abs(C) @ np.abs(K)).max())
    square = rows.square(idx)
    assert square.dtype == dtype
    np.testing.assert_allclose(square, K[:, idx], rtol=0, atol=10 * tol)
    with pytest.raises(ValueError, match="out"):
        rows.left_product(idx, C, np.zeros((6, 229)))


@pytest.mark.parametrize("spec", [KernelSpec("gaussian", sigma=1.0), KernelSpec("polynomial", degree=2)],
                         ids=lambda s: s.type)
def test_no_rows_asked_gives_empty_results(spec, rng):
    """An empty block (the tail of a pass cut at a block boundary, a request of no points) is
    empty, not a ZeroDivisionError from the tile shape."""
    rows = KernelRows(rng.normal(size=(50, 3)), spec)
    rows.fit_centering()
    none = np.array([], dtype=np.int64)
    assert rows.block(none).shape == (0, 50) and rows.square(none).shape == (0, 0)
    assert rows.transform_block(np.zeros((0, 3))).shape == (0, 50)
    out = rng.normal(size=(2, 50))
    np.testing.assert_array_equal(rows.left_product(none, np.zeros((2, 0)), out.copy()), out)


def test_the_centring_pass_in_float32_keeps_the_float32_kernels_precision(rng):
    """float32 rows run the centring pass's product (column sums and the start's ``C K``) as a float32 GEMM,
    as the passes do: the column means agree with eq. 5's in float64 to float32's precision, and ``C K'``
    with the float64 pass to float32's."""
    X = rng.normal(size=(3000, 8))
    spec = KernelSpec("gaussian", sigma=2.5)
    C = rng.normal(size=(6, 3000))
    wide, narrow = KernelRows(X, spec), KernelRows(X, spec, dtype=np.float32, compute_dtype=np.float32)
    want, got = wide.fit_centering_times(C), narrow.fit_centering_times(C)
    np.testing.assert_allclose(narrow.centering.column_means, wide.centering.column_means, rtol=1e-6)
    assert abs(narrow.centering.grand_mean - wide.centering.grand_mean) < 1e-6 * abs(wide.centering.grand_mean)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())
