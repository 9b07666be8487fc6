import numpy as np
import pytest

from kpca.kernels import KERNEL_TYPES, KernelSpec, kernel_block, kernel_diagonal
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
        spec = KernelSpec(type=kind)
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
