"""Spectral clustering (seed 000 §5.3): the rows of L against a dense reference, the solvers' eigenpairs of
L, NJW labels on separated blobs and on digits, prediction, resuming, and the variation of information."""

import numpy as np
import pytest
import scipy.linalg
import zarr
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits

from kpca.affinity import AffinityCentering, AffinityRows
from kpca.clustering import CLUSTER_KEYS, clustering_from_state, prepare_clustering, solver_state
from kpca.driver import PassHooks, run_passes
from kpca.kernels import KernelSpec, kernel_diagonal
from kpca.metrics import variation_of_information
from kpca.solvers import served_model
from kpca.params import ParamError
from kpca.solvers import get_solver
from tests.kpca_helpers import spectral_clustering
from tests.naive import affinity_matrix, kernel_matrix, njw_embedding
from tests.naive import variation_of_information as naive_vi

SPEC = KernelSpec("gaussian", sigma=2.0)


def blobs(rng, per_cluster=(60, 50, 40), n_features=5, spread=12.0):
    """Well separated Gaussian blobs (unit spread, centres ``spread`` apart on the axes), shuffled."""
    centres = spread * np.eye(len(per_cluster), n_features)
    truth = np.repeat(np.arange(len(per_cluster)), per_cluster)
    X = centres[truth] + rng.normal(size=(truth.size, n_features))
    order = rng.permutation(truth.size)
    return X[order], truth[order], centres


def fitted(X, spec=SPEC, **kwargs):
    rows = AffinityRows(X, spec, **kwargs)
    rows.fit_centering()
    return rows


def eigenvectors(state):
    """U (l, k) of a state: ``AK^T diag(mu)^-1/2`` (kpca.clustering's module docstring), and L's
    eigenvalues ``mu - c``."""
    _, AK, mu = get_solver(state["solver"]).components(state)
    return AK.T / np.sqrt(mu), mu - state["affinity_shift"]


def check_rows(rows, L, X, rng):
    """Every method the solvers call, and the new points' rows, against the dense NJW L shifted by c to
    M = L + c I (to 1e-12)."""
    l = L.shape[0]
    K = kernel_matrix(X, X, rows.kernel)
    np.testing.assert_allclose(rows.degrees, K.sum(axis=1) - np.diag(K), rtol=1e-13)  # NJW: A_ii = 0
    c = rows.centering.shift
    assert c == pytest.approx(min(1.0, np.max(np.diag(K) / rows.degrees)), rel=1e-12)
    assert rows.centering.mean_diagonal == pytest.approx(np.mean(np.diag(K) / rows.degrees), rel=1e-12)
    L = L + c * np.eye(l)
    np.testing.assert_allclose(rows.dense(), L, atol=1e-12)
    assert np.linalg.eigvalsh(L)[0] > -1e-12  # M is positive semi-definite, L is not
    idx = rng.permutation(l)[:23]
    np.testing.assert_allclose(rows.block(idx), L[idx], atol=1e-12)
    np.testing.assert_allclose(rows.square(idx), L[np.ix_(idx, idx)], atol=1e-12)
    C, out, T, start = (rng.normal(size=s) for s in ((4, 23), (4, l), (4, 4), (4, l)))
    expected = out + C @ L[idx]
    np.testing.assert_allclose(rows.left_product(idx, C, out), expected, atol=1e-12)
    np.testing.assert_allclose(rows.left_product(idx, C, out, T=T, start=start), T @ start + C @ L[idx], atol=1e-12)
    new = X[:5] + 0.1 * rng.normal(size=(5, X.shape[1]))
    Kx = kernel_matrix(new, X, rows.kernel)
    Lx = Kx / np.sqrt(Kx.sum(axis=1))[:, None] / np.sqrt(rows.degrees)[None, :]  # a new point: no self-affinity
    np.testing.assert_allclose(rows.transform_block(new), Lx, atol=1e-12)
    M = rng.normal(size=(l, 3))
    np.testing.assert_allclose(rows.affinity_product(new, M), Lx @ M, atol=1e-12)


def test_affinity_rows_equal_the_dense_normalised_affinity(rng):
    X = rng.normal(size=(130, 6))
    rows = fitted(X, chunk_rows=32)
    check_rows(rows, affinity_matrix(X, SPEC), X, rng)
    assert np.all(rows.centering.column_means == 0) and rows.centering.grand_mean == 0  # no centring of L


def test_the_fused_start_pass_of_affinity_rows_is_the_degree_pass_then_the_product(rng):
    """`fit_centering_times` (what a KHA start calls on rows it centres itself) sets the degrees and gives
    ``C M`` (the kernel rows' single fused pass would leave M's scaling without its degrees)."""
    X = rng.normal(size=(90, 5))
    rows = AffinityRows(X, SPEC, chunk_rows=32)
    C = rng.normal(size=(3, 90))
    CM = rows.fit_centering_times(C, block_size=40)
    reference = fitted(X)
    np.testing.assert_allclose(rows.degrees, reference.degrees, rtol=1e-13)
    np.testing.assert_allclose(CM, C @ reference.dense(), atol=1e-12)


def test_affinity_rows_out_of_core_from_zarr_with_small_chunks(rng, tmp_path):
    """Read chunk by chunk (16 rows) with a cache of 2 chunks: the same rows of L, the same degrees."""
    X = rng.normal(size=(150, 4))
    array = zarr.create_array(store=str(tmp_path / "x.zarr"), shape=X.shape, chunks=(16, 4), dtype="float64")
    array[:] = X
    rows = fitted(zarr.open_array(str(tmp_path / "x.zarr"), mode="r"), cache_bytes=2 * 16 * 4 * 8)
    assert rows.chunk_rows == 16 and rows.n_chunks == 10
    reads = rows.reads
    check_rows(rows, affinity_matrix(X, SPEC), X, rng)
    assert rows.reads > reads + rows.n_chunks  # passes re-read the chunks: nothing held but the cache


def test_centring_travels_in_the_state_and_restores_the_rows(rng):
    X = rng.normal(size=(80, 3))
    rows = fitted(X)
    state = rows.centering.to_state()
    fresh = AffinityRows(X, SPEC)
    fresh.centering = AffinityCentering.from_state(state)
    np.testing.assert_array_equal(fresh.degrees, rows.degrees)
    np.testing.assert_array_equal(fresh.dense(), rows.dense())


@pytest.fixture(scope="module")
def digits_affinity(digits):
    """200 digits, a Gaussian of width 2.5, and their dense L from the naive reference (computed once)."""
    X, spec = digits[:200], KernelSpec("gaussian", sigma=2.5)
    return X, spec, affinity_matrix(X, spec)


@pytest.mark.parametrize("solver,params,tol,angle", [
    ("exact", {}, 1e-12, 1e-8), ("lanczos", {"tol": 1e-10}, 1e-9, 1e-5),
    ("kha-smd", {"init": "random", "passes": 8}, 2e-3, 0.15)])  # measured: 5e-4 and 0.06 after 8 passes
def test_solvers_find_the_leading_eigenpairs_of_L(digits_affinity, solver, params, tol, angle):
    """Against numpy.linalg.eigh of the dense L: Ritz values and subspace angles (KHA: after 8 passes)."""
    X, spec, L = digits_affinity
    w, V = np.linalg.eigh(L)
    k = 6
    clustering = spectral_clustering(AffinityRows(X, spec), k, solver=solver, params=params)
    U, mu = eigenvectors(clustering.state)
    assert mu[0] == pytest.approx(1.0, abs=tol)  # the top eigenvector D^1/2 1 is kept: L is not centred
    np.testing.assert_allclose(mu, w[::-1][:k], atol=tol)
    np.testing.assert_array_equal(clustering.eigenvalues, mu)
    assert np.max(scipy.linalg.subspace_angles(U, V[:, ::-1][:, :k])) < angle
    if solver == "exact":  # NJW's embedding itself, up to a rotation within the (well separated) span
        Y, Y_ref = clustering.embedding, njw_embedding(L, k)
        R, _ = scipy.linalg.orthogonal_procrustes(Y, Y_ref)
        np.testing.assert_allclose(Y @ R, Y_ref, atol=1e-8)


@pytest.mark.parametrize("solver,params", [("exact", {}), ("lanczos", {}),
                                           ("kha-smd", {"init": "random", "passes": 3}), ("kha-smd", {})])
@pytest.mark.parametrize("sigma", [3.0, "auto"])
def test_separated_blobs_are_found_exactly(rng, solver, params, sigma):
    """VI 0 against the truth; predicting the training rows gives their labels; new points from the blobs
    get their blob's cluster."""
    X, truth, centres = blobs(rng)
    clustering = spectral_clustering(X, 3, {"type": "gaussian", "sigma": sigma}, solver=solver, params=params)
    assert variation_of_information(clustering.labels, truth) == 0.0
    np.testing.assert_array_equal(clustering.predict(X), clustering.labels)
    new_truth = np.arange(30) % 3
    new = centres[new_truth] + rng.normal(size=(30, X.shape[1]))
    assert variation_of_information(clustering.predict(new), new_truth) == 0.0
    # L's top eigenvalue is 1; KHA-SMD after 3 passes from a random start: measured 0.9984
    assert clustering.eigenvalues[0] == pytest.approx(1.0, abs=5e-3 if params.get("init") == "random" else 1e-8)


def test_pass_by_pass_and_resumed_bit_for_bit(rng):
    """prepare_clustering + run, stopped after pass 2 and resumed (prepare_clustering with the saved state)
    on fresh rows (the degrees from the state), ends where an uninterrupted run ends; a clustering after
    every pass."""
    X, truth, _ = blobs(rng, per_cluster=(40, 40, 40))
    params = {"init": "random", "passes": 4, "block_size": 32, "seed": 3}
    rows = AffinityRows(X, SPEC)
    prepared = prepare_clustering(rows, 3, "kha-smd", params)
    seen = []
    whole, _ = prepared.run(rows, PassHooks(on_pass=lambda s: seen.append(clustering_from_state(s, rows))))
    assert [c.state["pass"] for c in seen] == [1, 2, 3, 4]
    assert variation_of_information(seen[-1].labels, truth) == 0.0

    half, _ = run_passes(rows, prepare_clustering(AffinityRows(X, SPEC), 3, "kha-smd", params).state, 2, 32)
    saved = {key: np.copy(value) if isinstance(value, np.ndarray) else value for key, value in half.items()}
    fresh = AffinityRows(X, SPEC)
    resumed, _ = prepare_clustering(fresh, 3, "kha-smd", params, resume=saved).run(fresh)
    for key in ("A", "AK", "B", "BK", "rho"):
        assert np.array_equal(resumed[key], whole[key]), key
    final = clustering_from_state(resumed, fresh)
    np.testing.assert_array_equal(final.labels, seen[-1].labels)
    kept = clustering_from_state(final.to_state(), AffinityRows(X, SPEC))  # labels and centres kept, no k-means
    np.testing.assert_array_equal(kept.centres, final.centres)
    np.testing.assert_array_equal(kept.predict(X[:10]), final.labels[:10])


def test_a_saved_clustering_resumes_and_serves_over_its_degrees(rng):
    """A checkpoint of `Clustering.to_state`: `solver_state` strips the labels (the next clustering is
    computed afresh), passes continue from it bit for bit, and `served_model` (the convergence figure's
    model) restores the degrees on the rows, not a centring of eq. 5."""
    X, truth, _ = blobs(rng, per_cluster=(30, 30, 30))
    params = {"init": "random", "passes": 3, "block_size": 16, "seed": 5}
    rows = AffinityRows(X, SPEC)
    whole, _ = prepare_clustering(rows, 3, "kha-smd", params).run(rows)
    rows = AffinityRows(X, SPEC)
    half, _ = run_passes(rows, prepare_clustering(rows, 3, "kha-smd", params).state, 1, 16)
    saved = clustering_from_state(half, rows).to_state()
    assert set(CLUSTER_KEYS) <= set(saved) and not set(CLUSTER_KEYS) & set(solver_state(saved))
    fresh = AffinityRows(X, SPEC)
    fresh.restore_centering(saved)
    resumed, _ = run_passes(fresh, solver_state(saved), 3, 16)
    assert np.array_equal(resumed["A"], whole["A"]) and CLUSTER_KEYS[0] not in resumed
    other = AffinityRows(X, SPEC)
    model = served_model(saved, other)
    np.testing.assert_array_equal(other.degrees, rows.degrees)
    np.testing.assert_allclose(model.AK, model.A @ other.dense(), atol=1e-12)
    assert variation_of_information(clustering_from_state(resumed, fresh).labels, truth) == 0.0


def random_labelling_vi(truth, labels, rng, draws=200):
    """Mean and standard deviation of VI(truth, permuted labels): the expectation of a random labelling
    with these cluster sizes (the permutation model)."""
    values = [variation_of_information(truth, rng.permutation(labels)) for _ in range(draws)]
    return float(np.mean(values)), float(np.std(values))


def entropy(labels):
    p = np.unique(labels, return_counts=True)[1] / len(labels)
    return float(-np.sum(p * np.log(p)))


def test_random_labelling_is_near_its_expected_vi(rng):
    truth = load_digits().target
    labels = rng.integers(0, 10, size=truth.size)
    mean, std = random_labelling_vi(truth, labels, rng)
    assert abs(variation_of_information(truth, labels) - mean) < 4 * std
    # the expectation is H + H' less the chance mutual information, about (k - 1)(k' - 1) / (2 l) nats
    chance = 9 * 9 / (2 * truth.size)
    assert mean == pytest.approx(entropy(truth) + entropy(labels) - 2 * chance, abs=0.2 * chance)


def test_variation_of_information_properties(rng):
    a = rng.integers(0, 4, size=200)
    b = rng.integers(0, 6, size=200)
    relabelled = np.array(["x", "y", "z", "w"])[a]
    assert variation_of_information(a, relabelled) == 0.0
    assert variation_of_information(a, b) == pytest.approx(variation_of_information(b, a), abs=1e-14)
    assert variation_of_information(a, b) == pytest.approx(naive_vi(a, b), abs=1e-12)
    # the largest VI, log l, between one cluster and l singletons
    assert variation_of_information(np.zeros(200), np.arange(200)) == pytest.approx(np.log(200), abs=1e-12)
    for _ in range(20):
        x, y = rng.integers(0, rng.integers(1, 50), size=(2, 200))
        assert 0.0 <= variation_of_information(x, y) <= np.log(200) + 1e-12
    c = rng.integers(0, 3, size=200)  # the triangle inequality
    assert variation_of_information(a, c) <= variation_of_information(a, b) + variation_of_information(b, c) + 1e-12
    with pytest.raises(ValueError, match="labels"):
        variation_of_information(a, b[:10])


def test_digits_into_ten_clusters_beat_random_labelling(digits, rng):
    """Auto-width Gaussian, KHA-SMD from the paper's random start: far below a random labelling's VI."""
    truth = load_digits().target
    clustering = spectral_clustering(digits, 10, solver="kha-smd", params={"init": "random", "passes": 4})
    vi = variation_of_information(clustering.labels, truth)
    mean, _ = random_labelling_vi(truth, rng.integers(0, 10, size=truth.size), rng, draws=20)
    assert vi < 0.4 * mean
    # a training row given as a new point counts its own affinity (NJW's A_ii = 0 leaves it out of U)
    assert np.mean(clustering.predict(digits[:200]) == clustering.labels[:200]) > 0.95


@pytest.mark.parametrize("n_clusters", [1, 0, -2, 60, 61, 2.5, True])
def test_bad_n_clusters_is_refused_by_name(rng, n_clusters):
    with pytest.raises(ParamError) as err:
        spectral_clustering(rng.normal(size=(60, 3)), n_clusters, SPEC)
    assert err.value.field == "n_clusters"


@pytest.mark.parametrize("solver,kernel,params,field", [
    ("nystrom", SPEC, {}, "solver"), ("kha-smd", KernelSpec("polynomial", degree=2), {}, "kernel.type"),
    ("kha-smd", SPEC, {"init": "rskpca"}, "params.init"), ("kha-smd", SPEC, {"eta0": -1.0}, "params.eta0")])
def test_bad_solver_kernel_or_params_are_refused_by_name(rng, solver, kernel, params, field):
    with pytest.raises(ParamError) as err:
        spectral_clustering(rng.normal(size=(60, 3)), 3, kernel, solver=solver, params=params)
    assert err.value.field == field


def test_mean_diagonal_is_the_self_affinity_l_leaves_out(rng):
    """What the default gains are scaled by (kpca.defaults): mean k(x, x) / d, the trace of L + diag(k / d)
    = D^-1/2 K D^-1/2 over l (L's own trace is 0, M's is c l; kpca.affinity)."""
    X = rng.normal(size=(50, 3))
    rows = fitted(X)
    assert rows.centering.mean_diagonal == pytest.approx(np.mean(kernel_diagonal(X, SPEC) / rows.degrees), rel=1e-12)


def self_affinity_matrix(X, spec):
    """The normalised affinity with A_ii = k(x_i, x_i) kept (before issue 28): D^-1/2 K D^-1/2, D = diag(K 1)."""
    K = kernel_matrix(X, X, spec)
    s = 1.0 / np.sqrt(K.sum(axis=1))
    return s[:, None] * K * s[None, :]


def test_a_state_fitted_with_the_self_affinity_keeps_it(rng):
    """A clustering state saved before NJW's A_ii = 0 (no ``affinity_shift``, degrees with k(x, x)) is
    restored as it was fitted: rows of D^-1/2 K D^-1/2, no shift, so it serves and resumes exactly."""
    X = rng.normal(size=(60, 3))
    K = kernel_matrix(X, X, SPEC)
    rows = fitted(X)
    state = {key: value for key, value in rows.centering.to_state().items() if key != "affinity_shift"}
    state["affinity_degrees"] = K.sum(axis=1)
    old = AffinityRows(X, SPEC)
    centring = old.restore_centering(state)
    assert centring.self_affinity and centring.shift == 0 and "affinity_shift" not in centring.to_state()
    L = self_affinity_matrix(X, SPEC)
    np.testing.assert_allclose(old.dense(), L, atol=1e-12)
    idx = rng.permutation(60)[:17]
    C = rng.normal(size=(3, 17))
    np.testing.assert_allclose(old.left_product(idx, C, np.zeros((3, 60))), C @ L[idx], atol=1e-12)
    np.testing.assert_allclose(old.square(idx), L[np.ix_(idx, idx)], atol=1e-12)


def test_without_the_self_affinity_standardised_digits_cluster_closer_to_their_classes():
    """Issue 28: NJW set A_ii = 0. On standardised digits with the median width, keeping k(x, x) = 1 on
    the diagonal cost 0.38 nats of VI against the classes (measured: 2.05 with it, 1.67 without)."""
    data = load_digits()
    X = (data.data - data.data.mean(axis=0)) / np.where(data.data.std(axis=0) > 0, data.data.std(axis=0), 1.0)
    njw = spectral_clustering(X, 10, {"type": "gaussian", "sigma": "auto"}, solver="exact")
    Y = njw_embedding(self_affinity_matrix(X, njw.rows.kernel), 10)
    with_self = KMeans(10, n_init=10, random_state=0).fit(Y).predict(Y)
    assert variation_of_information(njw.labels, data.target) < variation_of_information(with_self, data.target) - 0.2


def test_the_default_clustering_on_many_rows_finds_the_top_eigenvector():
    """More rows than the subset start holds: the default starts from Nystrom components extended to the
    rows of L, and its passes find L's leading eigenpairs, 1 on top, to the accuracy its tol promises
    (issue 51: it stopped at pass 0 with residual 0.0, serving 0.953, 0.904, ... for 1, 0.963, ...)."""
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(1500, centers=4, cluster_std=2.0, random_state=0)
    clustering = spectral_clustering(X, 4)
    rows = clustering.rows
    assert clustering.state["init"] == "nystrom" and clustering.state["pass"] >= 1
    truth = np.linalg.eigvalsh(rows.block(np.arange(rows.n_rows)))[::-1][:4] - rows.centering.shift
    assert truth[0] == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(clustering.eigenvalues, truth, rtol=0, atol=1e-6)
