"""The array-API passes (`kpca.array_rows.ArrayRows`) on numpy and on array_api_strict equal the numba
tiles' (`kpca.rows.KernelRows`): what a GPU (CuPy) runs differs only by its namespace."""

import array_api_strict
import numpy as np
import pytest
from array_api_compat import array_namespace

from bench._common import subspace_angles
from kpca.array_rows import ArrayRows, namespace
from kpca.estimator import KernelHebbianPCA
from kpca.kernels import KernelSpec
from kpca.rows import KernelRows

NAMESPACES = {"numpy": array_namespace(np.empty(0)), "array_api_strict": array_api_strict}
if namespace("auto") is not None:  # a CUDA device is visible: CuPy too (the GPU path)
    NAMESPACES["cupy"] = namespace("auto")
KERNELS = [KernelSpec("gaussian", sigma=2.0), KernelSpec("laplacian", sigma=3.0),
           KernelSpec("polynomial", degree=2, gamma=0.2), KernelSpec("linear"), KernelSpec("tanh", gamma=0.1)]


@pytest.fixture
def X(rng):
    return rng.normal(size=(300, 6))


@pytest.mark.parametrize("xp", list(NAMESPACES), ids=list(NAMESPACES))
@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.type)
def test_the_centring_pass_and_products_equal_the_tiles(X, rng, xp, kernel):
    C = rng.normal(size=(4, X.shape[0]))
    tiles = KernelRows(X, kernel, chunk_rows=128)
    want = tiles.fit_centering_times(C)
    rows = ArrayRows(X, kernel, NAMESPACES[xp], block_rows=70, chunk_rows=128)
    got = rows.fit_centering_times(C)
    scale = np.abs(want).max() * (1e5 if kernel.type == "laplacian" else 1.0)  # sqrt of a rounded 0 distance
    np.testing.assert_allclose(got, want, atol=1e-12 * scale)
    np.testing.assert_allclose(rows.centering.column_means, tiles.centering.column_means, atol=1e-13 * scale)
    assert rows.centering.mean_diagonal == pytest.approx(tiles.centering.mean_diagonal, rel=1e-12 * scale)
    np.testing.assert_allclose(rows.times(C), tiles.times(C), atol=1e-12 * scale)
    np.testing.assert_allclose(rows.times(C), C @ tiles.dense(), atol=1e-12 * scale)


@pytest.mark.parametrize("xp", list(NAMESPACES), ids=list(NAMESPACES))
def test_the_default_fit_over_array_rows_equals_the_one_over_tiles(X, xp):
    """The default fit (a Nystrom start, Rayleigh-Ritz passes) run on the array namespace: the same
    components and residuals as on the numba tiles."""
    from kpca.fitting import FitRequest, prepare_fit

    spec = KernelSpec("gaussian", sigma=2.0)
    results = []
    for rows in (KernelRows(X, spec), ArrayRows(X, spec, NAMESPACES[xp], block_rows=64)):
        prepared = prepare_fit(rows, FitRequest("kha-smd", 4, {"init": "nystrom", "init_size": 60, "tol": 1e-4}))
        state, _ = prepared.run(rows)
        results.append((state, rows))
    (want, tiles), (got, _) = results
    assert got["pass"] == want["pass"] >= 1 and got["residual"] == pytest.approx(want["residual"], rel=1e-6)
    assert subspace_angles(got["A"], want["A"], tiles.dense()).max() < 1e-7


def test_the_estimator_takes_a_device(X):
    cpu = KernelHebbianPCA(4, sigma=2.0, device="cpu").fit(X)
    assert not isinstance(cpu.rows_, ArrayRows)
    auto = KernelHebbianPCA(4, sigma=2.0).fit(X)  # no CUDA device here: the numba tiles
    np.testing.assert_allclose(auto.transform(X[:5]), cpu.transform(X[:5]))
    if namespace("auto") is None:
        with pytest.raises(ValueError, match="device: gpu asked for"):
            KernelHebbianPCA(4, sigma=2.0, device="gpu").fit(X)
    with pytest.raises(ValueError, match="device: must be one of"):
        namespace("tpu")
