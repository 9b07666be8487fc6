"""Seed 004's uniform baselines as the paper describes them (paper/_uniform.py): with every row drawn both are
exact kernel PCA; with fewer, the Nyström method's eigenvectors extend the subsample's by the Nyström formula
(seed 003 eq. 13-14) and it projects with all training rows, subsampled KPCA with the m drawn rows only."""

from __future__ import annotations

import numpy as np
import pytest

from kpca.estimator import KernelHebbianPCA
from kpca.kernels import KernelSpec, kernel_block
from kpca.reduced_sets import uniform_subset
from paper._uniform import fit_uniform

R = 4


@pytest.fixture
def data(rng):
    return rng.normal(size=(90, 3)), rng.normal(size=(25, 3))


@pytest.mark.parametrize("extend", [False, True])
def test_all_rows_drawn_is_exact_kernel_pca(data, extend):
    X, T = data
    exact = KernelHebbianPCA(R, sigma=1.5, solver="exact").fit(X)
    model = fit_uniform(X, KernelSpec("gaussian", sigma=1.5), X.shape[0], R, 0, extend)
    np.testing.assert_allclose(np.abs(model.project(T)), np.abs(exact.model_.project(T)), atol=1e-9)
    np.testing.assert_allclose(model.eigenvalues, exact.eigenvalues_, rtol=1e-9)


def test_the_nystrom_method_extends_the_subsample_by_the_nystrom_formula(data):
    X, T = data
    spec, m = KernelSpec("gaussian", sigma=1.5), 30
    small = fit_uniform(X, spec, m, R, 3, extend=False)
    full = fit_uniform(X, spec, m, R, 3, extend=True)
    assert small.retained_rows == m and full.retained_rows == X.shape[0]
    np.testing.assert_allclose(small.eigenvalues, full.eigenvalues)  # eq. 14, (l/m) lambda_hat for both
    S = uniform_subset(X.shape[0], m, 3)
    np.testing.assert_array_equal(small.points, X[S])  # the rows the library's subsampled and nystrom draw
    # the naive formula: centre by the subsample's mean, diagonalise, extend (eq. 13), normalise by eq. 14
    K_lS, K_S = kernel_block(X, X[S], spec), kernel_block(X[S], X[S], spec)
    col, a, g = K_S.mean(axis=0), K_lS.mean(axis=1), K_S.mean()
    lam, V = np.linalg.eigh(K_S - col[:, None] - col[None, :] + g)
    lam, V = lam[::-1][:R], V[:, ::-1][:, :R]
    U = np.sqrt(m / X.shape[0]) * (K_lS - a[:, None] - col[None, :] + g) @ V / lam
    alpha = U / np.sqrt(X.shape[0] / m * lam)
    K_t = kernel_block(T, X, spec)
    want = (K_t - K_t[:, S].mean(axis=1)[:, None] - a[None, :] + g) @ alpha
    np.testing.assert_allclose(np.abs(full.project(T)), np.abs(want), atol=1e-9)
    # at the drawn rows the extension is the subsample's eigenvector, scaled by sqrt(m / l)
    np.testing.assert_allclose(np.abs(U[S]), np.abs(V) * np.sqrt(m / X.shape[0]), atol=1e-9)
    assert not np.allclose(np.abs(full.project(T)), np.abs(small.project(T)), atol=1e-3)  # another function
