"""`kpca.kernel_scale`: dot-product kernels refused where their values leave the working dtype."""

import numpy as np
import pytest

from kpca.kernel_scale import check_kernel_scale, sample_max_sq_norm
from kpca.kernels import KernelSpec
from kpca.params import ParamError


def test_sample_bound_reads_start_middle_and_end(rng):
    X = rng.normal(size=(10_000, 5))
    X[9_999] *= 1e3  # the largest row is the last one
    assert sample_max_sq_norm(X, len(X)) == pytest.approx(float(X[9_999] @ X[9_999]))
    assert sample_max_sq_norm(X[:10], 10) == pytest.approx(float(np.max(np.sum(X[:10] ** 2, axis=1))))


@pytest.mark.parametrize("params, dtype, verdict", [
    ({"gamma": 1e300, "degree": 64}, "float64", "too large"),  # the reported case
    ({"gamma": 1.0, "degree": 64}, "float64", None),  # 17^64 ~ 5e78: fine in float64
    ({"gamma": 1.0, "degree": 32}, "float32", "too large"),  # 17^32 ~ 2e39 > float32's max
    ({"gamma": 1e-300, "degree": 64, "offset": 0.0}, "float64", "too small"),
    ({"gamma": 1e-300, "degree": 64, "offset": 1.0}, "float64", None),  # the offset keeps values at 1
    ({"gamma": 0.5, "degree": 2}, "float32", None),
])
def test_polynomial_against_rows_of_norm_4(params, dtype, verdict):
    spec = KernelSpec("polynomial", **params)
    if verdict is None:
        check_kernel_scale(spec, 16.0, dtype, 1000)
    else:
        with pytest.raises(ParamError, match=verdict) as refused:
            check_kernel_scale(spec, 16.0, dtype, 1000)
        assert refused.value.field == "kernel.gamma"


def test_radial_kernels_and_all_zero_rows_pass():
    check_kernel_scale(KernelSpec("gaussian", sigma=1e-3), 1e300, "float64", 10)
    check_kernel_scale(KernelSpec("polynomial", gamma=1e300, degree=64), 0.0, "float64", 10)  # offset^degree = 1
    with pytest.raises(ParamError, match="too large"):
        check_kernel_scale(KernelSpec("tanh", gamma=1e300), 1e10, "float64", 10)
