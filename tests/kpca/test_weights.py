"""A weighted point set (a reduced set, seed 004) is the same as its points repeated by their weights:
centring, projections, the expansion of a projection and pre-images agree."""

import numpy as np

from kpca.kernels import KernelSpec
from kpca.model import KernelModel
from kpca.preimage import fixed_point
from kpca.rows import Centering, KernelRows
from kpca.solvers import exact_components
from tests.kpca_helpers import feature_expansion


def test_weighted_points_equal_repeated_points(rng):
    spec = KernelSpec("gaussian", sigma=1.5)
    P = rng.normal(size=(12, 3))
    counts = rng.integers(1, 5, size=12)
    repeated = np.repeat(P, counts, axis=0)
    full = KernelRows(repeated, spec)
    full.fit_centering()
    small = KernelRows(P, spec)
    K = small.raw_block(P)
    small.centering = Centering.weighted(K, counts)
    index = np.repeat(np.arange(12), counts)
    np.testing.assert_allclose(small.centering.column_means, full.centering.column_means[np.unique(index,
                               return_index=True)[1]], atol=1e-12)
    assert abs(small.centering.grand_mean - full.centering.grand_mean) < 1e-12
    assert abs(small.centering.mean_diagonal - full.centering.mean_diagonal) < 1e-12
    # the same components: exact KPCA of the repeated set, summed over the copies of each point
    lam, A_full = exact_components(full.dense(), 3)
    A_small = np.zeros((3, 12))
    np.add.at(A_small, (slice(None), index), A_full)
    Kc_small = small.dense()
    full_model = KernelModel(full, A_full, A_full @ full.dense())
    small_model = KernelModel(small, A_small, A_small @ Kc_small)
    X = rng.normal(size=(5, 3))
    np.testing.assert_allclose(small_model.project(X), full_model.project(X), atol=1e-10)
    gamma_full = np.zeros((5, 12))
    np.add.at(gamma_full, (slice(None), index), feature_expansion(full_model, X))
    np.testing.assert_allclose(feature_expansion(small_model, X), gamma_full, atol=1e-10)
    t_small, t_full = small_model.target(X), full_model.target(X)
    np.testing.assert_allclose(t_small.norm2, t_full.norm2, atol=1e-10)
    same_start = {"restarts": 1, "init": X, "tol": 1e-12, "n_iter": 500}  # the neighbours differ (copies)
    np.testing.assert_allclose(fixed_point(small_model, X, **same_start), fixed_point(full_model, X, **same_start),
                               atol=1e-8)
    state = small.centering.to_state()
    assert np.array_equal(Centering.from_state(state).weights, small.centering.weights)
