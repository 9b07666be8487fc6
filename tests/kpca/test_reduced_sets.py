"""The reduced-set density estimates of seed 004 (`kpca.reduced_sets`): the shadow estimate (Algorithm 2)
against its literal form, its properties and its single pass; k-means, paring and herding."""

import numpy as np
import pytest
from scipy.spatial.distance import cdist, pdist

from kpca.kernels import KernelSpec
from kpca.params import ParamError
from kpca.reduced_sets import (
    ShadowSet,
    herding_estimate,
    kmeans_estimate,
    paring_estimate,
    shadow_epsilon,
    shadow_estimate,
    uniform_subset,
)
from kpca.rows import KernelRows
from tests.naive import shadow_set

GAUSSIAN = KernelSpec("gaussian", sigma=3.0)


def counted_rows(X, spec=GAUSSIAN, chunk_rows=37):
    """Rows read chunk by chunk with no cache and no prefetch, so that ``rows.reads`` counts every read."""
    return KernelRows(X, spec, chunk_rows=chunk_rows, cache_bytes=0, prefetch=False)


def test_epsilon_is_the_width_of_eq_19_over_ell():
    assert shadow_epsilon(GAUSSIAN, 4.0) == pytest.approx(np.sqrt(2.0) * 3.0 / 4.0)
    assert shadow_epsilon(KernelSpec("laplacian", sigma=2.0), 5.0) == pytest.approx(0.4)
    # at the shadow's edge the kernel is exp(-1/ell^2) (Gaussian), the phi(1/ell^p) of Theorems 5.1-5.4
    eps = shadow_epsilon(GAUSSIAN, 3.0)
    assert np.exp(-(eps**2) / (2 * 3.0**2)) == pytest.approx(np.exp(-1 / 9))
    for spec in (KernelSpec("polynomial"), KernelSpec("linear"), KernelSpec("tanh")):
        with pytest.raises(ParamError) as info:
            shadow_epsilon(spec, 4.0)
        assert info.value.field == "density" and "kmeans" in str(info.value)


@pytest.mark.parametrize("chunk_rows", [7, 100, 4096])
def test_shadow_estimate_is_algorithm_2(digits, chunk_rows):
    """The streaming form (first earlier centre within epsilon, else a new centre) is Algorithm 2 as
    printed, whatever the chunking."""
    X = digits[:300]
    eps = shadow_epsilon(GAUSSIAN, 3.0)
    centres, counts = shadow_set(X, eps)
    reduced = shadow_estimate(counted_rows(X, chunk_rows=chunk_rows), eps)
    np.testing.assert_array_equal(reduced.centres, centres)
    np.testing.assert_array_equal(reduced.counts, counts)
    assert reduced.epsilon == eps


def test_shadow_estimate_properties(digits):
    """Centres are rows, pairwise at least epsilon apart; every row lies within epsilon of a centre; the
    counts sum to l; m shrinks as ell falls (a wider shadow)."""
    X = digits[:600]
    sizes = []
    for ell in (2.0, 3.0, 4.0, 5.0):
        eps = shadow_epsilon(GAUSSIAN, ell)
        reduced = shadow_estimate(counted_rows(X), eps)
        assert reduced.counts.sum() == X.shape[0] and np.all(reduced.counts >= 1)
        assert pdist(reduced.centres).min() >= eps * (1 - 1e-9)
        assert cdist(X, reduced.centres).min(axis=1).max() < eps
        assert (cdist(reduced.centres, X).min(axis=1) == 0).all()  # every centre is a row
        sizes.append(reduced.size)
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1] <= X.shape[0], sizes


def test_shadow_estimate_reads_every_chunk_once(digits):
    rows = counted_rows(digits[:500], chunk_rows=23)
    before = rows.reads
    shadow_estimate(rows, shadow_epsilon(GAUSSIAN, 4.0))
    assert rows.reads - before == rows.n_chunks == 22


def test_a_bounded_shadow_estimate_coarsens(digits):
    """Past max_centres, epsilon grows and the centres merge: at most max_centres, still a cover at the
    final epsilon's accumulated radius, counts summing to l, centres at least the final epsilon apart."""
    X = digits[:500]
    eps = shadow_epsilon(GAUSSIAN, 4.0)
    free = shadow_estimate(counted_rows(X), eps)
    bounded = shadow_estimate(counted_rows(X), eps, max_centres=60)
    assert free.size > 60 >= bounded.size > 1
    assert bounded.epsilon > eps and bounded.counts.sum() == X.shape[0]
    assert pdist(bounded.centres).min() >= bounded.epsilon * (1 - 1e-9)
    radii = eps * 1.25 ** np.arange(1 + round(np.log(bounded.epsilon / eps) / np.log(1.25)))
    assert cdist(X, bounded.centres).min(axis=1).max() < radii.sum()


def test_weighted_rows_merge_by_their_weights():
    shadow = ShadowSet(1.0, 1)
    shadow.add(np.array([[0.0], [0.5], [3.0], [0.2]]), np.array([2.0, 3.0, 1.0, 4.0]))
    np.testing.assert_array_equal(shadow.centres, [[0.0], [3.0]])
    np.testing.assert_array_equal(shadow.counts, [9.0, 1.0])


def test_kmeans_estimate_streams_chunks_smaller_than_m(digits):
    """Mini-batch k-means fed 30-row chunks for 60 centres (batches are gathered to >= m rows): counts
    sum to l, centres are the means of their clusters' rows, and the quantisation error is close to
    full-batch k-means's."""
    from sklearn.cluster import KMeans

    X = digits[:600]
    reduced = kmeans_estimate(counted_rows(X, chunk_rows=30), 60, seed=0, passes=3)
    assert reduced.size <= 60 and reduced.counts.sum() == X.shape[0]
    inertia = np.sum(cdist(X, reduced.centres).min(axis=1) ** 2)
    full = KMeans(60, n_init=1, random_state=0).fit(X)
    assert inertia < 1.15 * full.inertia_, (inertia, full.inertia_)


def test_paring_is_a_uniform_subsample_with_equal_weights(digits):
    X = digits[:300]
    reduced = paring_estimate(counted_rows(X), 40, seed=3)
    np.testing.assert_array_equal(reduced.centres, X[uniform_subset(300, 40, 3)])
    np.testing.assert_allclose(reduced.counts, 7.5)


def test_herding_starts_at_the_density_mode(digits):
    X = digits[:200]
    rows = counted_rows(X)
    reduced = herding_estimate(rows, 30)
    mode = X[np.argmax(rows.centering.column_means)]  # the first pick maximises the density estimate
    assert (cdist(mode[None, :], reduced.centres) == 0).any()
    assert reduced.counts.sum() == pytest.approx(200) and reduced.size <= 30
