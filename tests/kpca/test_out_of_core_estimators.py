"""Both scikit-learn estimators fitted on data that stays out of memory (a zarr array on disk, an np.memmap, a
dask array): read a block of rows at a time, never whole, and the same components as the same data in memory."""

import dask.array as da
import numpy as np
import pytest
import zarr

from kpca import KernelHebbianPCA, KernelPCA
from kpca.out_of_core import block_rows, is_out_of_core

ROWS = 600  # more than kpca.kernel_pca.MATRIX_FREE_ROWS: arpack runs the matrix-free lanczos
CHUNK = 128


class RecordedMemmap(np.memmap):
    """An np.memmap that records how many rows each read of the whole array (`BIG` rows) asked for."""

    reads: list = []

    def __getitem__(self, key):
        if isinstance(key, slice) and self.shape[0] == BIG:
            type(self).reads.append(len(range(*key.indices(BIG))))
        return super().__getitem__(key)


BIG = 9000  # rows of the recorded array: more than two blocks of 4,096 rows (kpca.out_of_core.block_rows)


@pytest.fixture
def data(digits):
    return np.ascontiguousarray(digits[:ROWS])


@pytest.fixture
def sources(data, tmp_path):
    """The data as zarr on disk (chunks of CHUNK rows), a memmap file and a dask array."""
    z = zarr.open_array(str(tmp_path / "x.zarr"), mode="w", shape=data.shape, chunks=(CHUNK, data.shape[1]),
                        dtype=data.dtype)
    z[:] = data
    m = np.memmap(tmp_path / "x.dat", dtype=data.dtype, mode="w+", shape=data.shape)
    m[:] = data
    m.flush()
    return {"zarr": z, "memmap": np.memmap(tmp_path / "x.dat", dtype=data.dtype, mode="r", shape=data.shape),
            "dask": da.from_array(data, chunks=(CHUNK, data.shape[1]))}


@pytest.mark.parametrize("kind", ["zarr", "memmap", "dask"])
@pytest.mark.parametrize("make", [
    lambda: KernelPCA(5, kernel="rbf", eigen_solver="arpack"),
    lambda: KernelPCA(5, kernel="linear", eigen_solver="randomized"),
    lambda: KernelHebbianPCA(5, kernel="rbf", passes=30),
], ids=["KernelPCA-rbf-arpack", "KernelPCA-linear-randomized", "KernelHebbianPCA-ritz"])
def test_same_components_as_in_memory(data, sources, kind, make):
    source = sources[kind]
    assert is_out_of_core(source) and not is_out_of_core(data)
    fitted, reference = make().fit(source), make().fit(data)
    np.testing.assert_allclose(fitted.transform(source), reference.transform(data), atol=1e-9)
    np.testing.assert_allclose(fitted.transform(data[:7]), reference.transform(data[:7]), atol=1e-9)
    if isinstance(fitted, KernelPCA):
        assert fitted.X_fit_ is source  # kept as it is, not copied into memory
        np.testing.assert_allclose(fitted.eigenvalues_, reference.eigenvalues_, rtol=1e-10)


def test_reads_blocks_never_the_whole_array(rng, tmp_path):
    """Every read of the training array, by the fit and by transform, is a block of at most its block rows."""
    path = tmp_path / "x.dat"
    data = rng.normal(size=(BIG, 3))
    np.memmap(path, dtype=data.dtype, mode="w+", shape=data.shape)[:] = data
    RecordedMemmap.reads = []
    source = RecordedMemmap(path, dtype=data.dtype, mode="r", shape=data.shape)
    est = KernelPCA(4, kernel="rbf", eigen_solver="arpack").fit(source)
    Z = est.transform(source)
    assert len(RecordedMemmap.reads) > 4 and max(RecordedMemmap.reads) <= block_rows(source) < BIG
    np.testing.assert_allclose(Z[:5], est.transform(data[:5]), atol=1e-10)


def test_bad_data_and_arguments_name_what_to_change(data, sources, tmp_path):
    z = zarr.open_array(str(tmp_path / "nan.zarr"), mode="w", shape=data.shape, chunks=(CHUNK, 64), dtype="f8")
    bad = data.copy()
    bad[333, 7] = np.nan
    z[:] = bad
    with pytest.raises(ValueError, match="row 333, feature 7"):
        KernelPCA(3, kernel="rbf").fit(z)
    with pytest.raises(ValueError, match="row 333, feature 7"):
        KernelHebbianPCA(3).fit(z)
    est = KernelPCA(3, kernel="rbf", eigen_solver="arpack").fit(sources["zarr"])
    with pytest.raises(ValueError, match="features"):
        est.transform(da.zeros((5, 3), chunks=5))
    cosine = KernelPCA(3, kernel="cosine", eigen_solver="arpack")  # streamed, its rows scaled as they are read
    np.testing.assert_allclose(cosine.fit(sources["zarr"]).transform(data[:5]),
                               KernelPCA(3, kernel="cosine", eigen_solver="arpack").fit(data).transform(data[:5]),
                               atol=1e-9)
    inverse = KernelPCA(3, kernel="rbf", fit_inverse_transform=True).fit(sources["zarr"])  # read into memory
    assert isinstance(inverse.X_fit_, np.ndarray) and inverse.inverse_transform(inverse.transform(data[:2])).shape \
        == (2, 64)
    hebbian = KernelHebbianPCA(3, passes=2).fit(sources["memmap"])
    with pytest.raises(ValueError, match="partial_fit"):
        hebbian.partial_fit(data[:10])
