"""`KernelModel.input_space_components`: the components drawn in input space (``sum_i A_ki (x_i - x_bar)``)."""

import numpy as np
import pytest

from kpca.estimator import KernelHebbianPCA


@pytest.fixture(scope="module")
def rows(digits):
    return digits[:150]


def principal_directions(X, k):
    return np.linalg.svd(X - X.mean(axis=0), full_matrices=False)[2][:k]


def test_linear_kernel_gives_the_unit_principal_directions(rows):
    model = KernelHebbianPCA(n_components=3, kernel="linear", solver="exact").fit(rows).model_
    V = model.input_space_components()
    assert V.shape == (3, 64)
    U = principal_directions(rows, 3)
    np.testing.assert_allclose(np.abs(np.sum(V * U, axis=1)), 1.0, atol=1e-8)  # same directions up to sign
    np.testing.assert_allclose(np.linalg.norm(V, axis=1), 1.0, atol=1e-8)
    np.testing.assert_allclose(model.input_space_components(2), V[:2])


def test_wide_gaussian_approaches_linear_pca_narrow_does_not(rows):
    U = principal_directions(rows, 3)

    def cosines(sigma):
        est = KernelHebbianPCA(n_components=3, kernel="gaussian", sigma=sigma, solver="exact").fit(rows)
        V = est.model_.input_space_components()
        return np.abs(np.sum(V * U, axis=1)) / np.linalg.norm(V, axis=1)

    assert np.all(cosines(50.0) > 0.9999)
    assert np.min(cosines(0.5)) < 0.99


def test_count_out_of_range_names_count(rows):
    model = KernelHebbianPCA(n_components=2, kernel="linear", solver="exact").fit(rows).model_
    for count in (0, 3):
        with pytest.raises(ValueError, match="^count"):
            model.input_space_components(count)
