"""A constant offset does not reach a translation-invariant kernel: `KernelRows` computes its tiles from
local coordinates (`kpca.rows`, *An origin*). Issue 51: rows 1e4 or 1e6 from the origin lost their
kernel's digits in the tiles' ``||x||^2 + ||y||^2 - 2 <x, y>``."""

import numpy as np
import pytest

from kpca.estimator import KernelHebbianPCA
from kpca.kernels import KernelSpec
from kpca.rows import ORIGIN_ROWS, KernelRows, default_origin


@pytest.fixture
def points(rng):
    return rng.normal(size=(300, 12))


@pytest.mark.parametrize("kind", ["gaussian", "laplacian"])
@pytest.mark.parametrize("offset", [1e4, 1e6])
def test_centred_rows_do_not_see_an_offset(points, kind, offset):
    spec = KernelSpec(kind, sigma=3.0)
    plain, moved = KernelRows(points, spec), KernelRows(points + offset, spec)
    plain.fit_centering()
    moved.fit_centering()
    idx = np.arange(0, 300, 7)
    scale = plain.centering.mean_diagonal
    assert np.abs(moved.block(idx) - plain.block(idx)).max() <= 1e-10 * scale
    new = points[:5] + 0.1
    assert np.abs(moved.transform_block(new + offset) - plain.transform_block(new)).max() <= 1e-10 * scale


@pytest.mark.parametrize("offset", [1e2, 1e4])
def test_float32_tiles_do_not_see_an_offset(points, offset):
    spec = KernelSpec("gaussian", sigma=3.0)
    exact, moved = KernelRows(points, spec), KernelRows(points + offset, spec, dtype=np.float32)
    exact.fit_centering()
    moved.fit_centering()
    idx = np.arange(0, 300, 7)
    assert np.abs(moved.block(idx) - exact.block(idx)).max() <= 1e-5 * exact.centering.mean_diagonal


def test_rows_are_handed_out_in_the_data_coordinates(points):
    rows = KernelRows(points + 1e4, KernelSpec("gaussian", sigma=3.0), chunk_rows=64)
    np.testing.assert_allclose(rows.take(np.array([3, 250])), points[[3, 250]] + 1e4, rtol=0, atol=1e-9)
    np.testing.assert_allclose(np.concatenate([c for _, c in rows.chunks()]), points + 1e4, rtol=0, atol=1e-9)
    assert np.abs(rows.take_local(np.array([3]))).max() < 10  # the tiles see the local coordinates


def test_the_origin_does_not_depend_on_how_the_rows_are_read(rng):
    X = rng.normal(size=(ORIGIN_ROWS + 50, 3)) * 1e3 + 1e7
    spec = KernelSpec("gaussian", sigma=1.0)
    whole = default_origin(X, spec)
    assert np.array_equal(KernelRows(X, spec, chunk_rows=17).origin, whole)
    assert np.array_equal(KernelRows(X, spec, chunk_rows=4096).origin, whole)
    assert default_origin(X, KernelSpec("linear")) is None  # a dot-product kernel has no invariance


@pytest.mark.parametrize("solver", ["exact", "lanczos", "nystrom"])
def test_a_fit_serves_the_same_components_far_from_the_origin(points, solver):
    options = {"solver": solver, "sigma": 3.0} if solver != "lanczos" else {"solver": solver, "sigma": 3.0,
                                                                           "solver_params": {"tol": 1e-12}}
    near = KernelHebbianPCA(5, **options).fit(points)
    far = KernelHebbianPCA(5, **options).fit(points + 1e6)
    np.testing.assert_allclose(far.eigenvalues_, near.eigenvalues_, rtol=1e-8)
    np.testing.assert_allclose(np.abs(far.transform(points[:20] + 1e6)), np.abs(near.transform(points[:20])),
                               rtol=0, atol=1e-7 * np.sqrt(near.eigenvalues_[0]))
