"""kpca.KernelPCA, scikit-learn's class's drop-in, against an exact eigendecomposition of the centred kernel
matrix that scikit-learn's `pairwise_kernels` computes (an oracle that shares no code with ours), on ordinary
and hostile data; and what it does beyond scikit-learn's class (tests/sklearn_upstream runs scikit-learn's own
tests of its class against it)."""

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse
from sklearn.decomposition import KernelPCA as SklearnKernelPCA
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

from bench._common import jittered_digits
from kpca import KernelPCA
from kpca.kernel_pca import MATRIX_FREE_ROWS


def oracle(X, r, kernel, **params):
    """The r leading eigenpairs of the centred kernel matrix, by LAPACK on the whole matrix, descending."""
    K = pairwise_kernels(X, metric=kernel, **params)
    l = K.shape[0]
    J = np.eye(l) - 1.0 / l
    Kc = J @ K @ J
    w, V = np.linalg.eigh(0.5 * (Kc + Kc.T))
    return Kc, w[::-1][:r], V[:, ::-1][:, :r]


def assert_eigenpairs(est, Kc, w, V, rtol=1e-8, gap_checked=True):
    """Eigenvalues as the oracle's; eigenvectors orthonormal with a small residual; and the same subspace
    where the eigenvalue after the last one kept is well separated from it."""
    lam, U = est.eigenvalues_, est.eigenvectors_
    scale = float(np.abs(w).max())
    np.testing.assert_allclose(lam, w[: lam.size], rtol=rtol, atol=rtol * scale)
    kept = lam > 0
    np.testing.assert_allclose(U[:, kept].T @ U[:, kept], np.eye(int(kept.sum())), atol=1e-7)
    residual = np.linalg.norm(Kc @ U[:, kept] - U[:, kept] * lam[kept], axis=0)
    assert residual.max() <= 1e-6 * scale
    if gap_checked:
        assert np.degrees(scipy.linalg.subspace_angles(U[:, kept], V[:, : int(kept.sum())]).max()) < 1e-4


@parametrize_with_checks([KernelPCA(), KernelPCA(n_components=2, kernel="rbf", eigen_solver="arpack"),
                          KernelPCA(n_components=2, kernel="precomputed"), KernelPCA(n_components=3, kernel="cosine")])
def test_sklearn_check_estimator(estimator, check):
    """Every check of sklearn.utils.estimator_checks, for the default, a matrix-free solver, a precomputed
    kernel and the cosine kernel."""
    check(estimator)


SOLVERS = ["dense", "arpack", "randomized", "lanczos", "ritz"]


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize(("kernel", "params"), [
    ("rbf", {}), ("rbf", {"gamma": 0.5}), ("poly", {"degree": 2}), ("cosine", {}), ("linear", {}),
    ("sigmoid", {"gamma": 1e-3, "coef0": 0.0}),
])
def test_eigenpairs_are_the_exact_ones(digits, solver, kernel, params):
    """Every solver name, every kernel: the leading eigenpairs of K', on more rows than the dense cut-off so
    that arpack and randomized run the matrix-free solvers."""
    X = digits[: MATRIX_FREE_ROWS + 100]
    est = KernelPCA(6, kernel=kernel, eigen_solver=solver, **params).fit(X)
    assert est.solver_ == {"arpack": "lanczos", "randomized": "ritz"}.get(solver, solver)
    Kc, w, V = oracle(X, 6, kernel, **({"gamma": 1 / 64} | params if kernel not in ("linear", "cosine") else {}))
    assert_eigenpairs(est, Kc, w, V, rtol=1e-8 if solver == "dense" else 1e-6)
    np.testing.assert_allclose(est.transform(X), est.fit_transform(X), atol=1e-6 * np.sqrt(w[0]))


@pytest.mark.parametrize("gamma", [1e-7, 1e3])
@pytest.mark.parametrize("solver", ["dense", "arpack"])
def test_extreme_widths(digits, gamma, solver):
    """A very wide rbf (K' tiny against K, the cancellation of eq. 5) and a very narrow one (K = I: K' has
    one eigenvalue 1 - 1/l of multiplicity l - 1, no unique subspace): the eigenvalues and residuals hold."""
    X = digits[: MATRIX_FREE_ROWS + 50]
    est = KernelPCA(5, kernel="rbf", gamma=gamma, eigen_solver=solver).fit(X)
    Kc, w, V = oracle(X, 5, "rbf", gamma=gamma)
    assert_eigenpairs(est, Kc, w, V, rtol=1e-6, gap_checked=gamma < 1)


@pytest.mark.parametrize("solver", ["dense", "arpack", "randomized"])
def test_rank_below_n_components(rng, solver):
    """Linear kernel of 3 features, 6 components asked: 3 carry variance, the others eigenvalue 0 and project
    to 0; ``remove_zero_eig`` drops them; n_components None keeps the 3."""
    X = rng.normal(size=(MATRIX_FREE_ROWS + 40, 3)) @ np.diag([3.0, 2.0, 1.0])
    with pytest.warns(UserWarning, match="components 4 to 6 .* carry no variance"):
        est = KernelPCA(6, eigen_solver=solver).fit(X)
    assert est.eigenvalues_.shape == (6,) and np.all(est.eigenvalues_[3:] == 0) and np.all(est.eigenvalues_[:3] > 0)
    Z = est.transform(X[:10])
    assert np.all(Z[:, 3:] == 0)
    Xc = X - X.mean(axis=0)
    np.testing.assert_allclose(est.eigenvalues_[:3], np.linalg.svd(Xc, compute_uv=False) ** 2, rtol=1e-8)
    assert KernelPCA(6, eigen_solver=solver, remove_zero_eig=True).fit(X).eigenvalues_.shape == (3,)
    assert KernelPCA(eigen_solver="dense").fit(X).eigenvalues_.shape == (3,)


def test_constant_offset_does_not_cancel(rng):
    """Data offset by 1e8: the linear kernel's K' is computed about the data's mean, so the eigenvalues are
    those of the data without the offset (scikit-learn's class loses them to cancellation)."""
    X = rng.normal(size=(60, 4)) * [3.0, 2.0, 1.0, 0.5]
    exact = np.linalg.svd(X - X.mean(axis=0), compute_uv=False) ** 2
    for kernel in ("linear", "cosine"):
        ours = KernelPCA(4, kernel=kernel).fit(X + 1e8)
        assert np.all(np.isfinite(ours.eigenvalues_))
    np.testing.assert_allclose(KernelPCA(4).fit(X + 1e8).eigenvalues_, exact, rtol=1e-7)
    theirs = SklearnKernelPCA(4).fit(X + 1e8).eigenvalues_  # what docs/scikit-learn.md says of it
    assert np.max(np.abs(theirs / exact - 1)) > 0.5
    rbf = KernelPCA(4, kernel="rbf", gamma=0.1)
    np.testing.assert_allclose(rbf.fit(X + 1e8).eigenvalues_, rbf.fit(X).eigenvalues_, rtol=1e-7)


def test_float32_components_as_float64(rng):
    """float32 data: float32 outputs, and the components kept those of the same data in float64 (scikit-learn's
    issue #18146: its float32 eigendecomposition kept spurious ones)."""
    X = (rng.normal(size=(80, 3)) + [0.0, 0.0, 5.0]).astype(np.float32)
    est32, est64 = KernelPCA(), KernelPCA()
    Z32, Z64 = est32.fit_transform(X), est64.fit_transform(X.astype(np.float64))
    assert Z32.dtype == np.float32 and est32.transform(X).dtype == np.float32
    assert Z32.shape == Z64.shape == (80, 3)
    np.testing.assert_allclose(Z32, Z64, rtol=1e-5, atol=1e-5)


def test_signs_are_the_same_for_every_solver(digits):
    """Deterministic signs (scikit-learn's issue #8798): each eigenvector's largest-magnitude entry positive,
    whichever solver found it, so the components agree with their signs, not only in absolute value."""
    X = digits[: MATRIX_FREE_ROWS + 100]
    fits = [KernelPCA(4, kernel="rbf", eigen_solver=s, random_state=3).fit(X) for s in ("dense", "arpack",
                                                                                         "randomized")]
    for other in fits[1:]:
        np.testing.assert_allclose(other.transform(X[:20]), fits[0].transform(X[:20]), atol=1e-6)


def test_same_components_as_sklearn(digits):
    """Where both are right (ordinary data), the components are scikit-learn's, signs included."""
    X = digits[:150]
    for kernel in ("rbf", "poly", "linear"):
        ours = KernelPCA(5, kernel=kernel, fit_inverse_transform=True).fit(X)
        theirs = SklearnKernelPCA(5, kernel=kernel, fit_inverse_transform=True).fit(X)
        np.testing.assert_allclose(ours.eigenvalues_, theirs.eigenvalues_, rtol=1e-9)
        np.testing.assert_allclose(ours.transform(X[:10]), theirs.transform(X[:10]), atol=1e-8)
        Z = ours.transform(X)
        mine, its = ours.inverse_transform(Z), theirs.inverse_transform(Z)
        assert np.linalg.norm(mine - X) <= np.linalg.norm(its - X)  # the same map, plus the mean (next test)


def test_learned_inverse_keeps_the_mean(rng):
    """scikit-learn's issue #16654: its learned inverse has no intercept, so with the linear kernel and every
    component its reconstruction of the training data is off by the data's mean; ours regresses X less its
    mean and adds it back, so it reconstructs X (and answers the mean for the origin of component space)."""
    X = rng.normal(size=(50, 3)) + [10.0, -5.0, 3.0]
    ours = KernelPCA(3, fit_inverse_transform=True, alpha=1e-8).fit(X)
    np.testing.assert_allclose(ours.inverse_transform(ours.transform(X)), X, atol=1e-5)
    theirs = SklearnKernelPCA(3, fit_inverse_transform=True, alpha=1e-8).fit(X)
    assert np.abs(theirs.inverse_transform(theirs.transform(X)) - X).max() > 1.0  # what was reported
    np.testing.assert_allclose(ours.inverse_transform(np.zeros((1, 3)))[0], X.mean(axis=0), atol=1e-9)


def test_sparse_callable_and_precomputed_agree(digits):
    """The same kernel given as sparse data, as a callable and as a matrix: the same components."""
    X = digits[:120]
    dense = KernelPCA(4, kernel="rbf", gamma=0.05).fit(X).transform(X[:10])
    sparse = KernelPCA(4, kernel="rbf", gamma=0.05).fit(scipy.sparse.csr_matrix(X))
    np.testing.assert_allclose(sparse.transform(scipy.sparse.csr_matrix(X[:10])), dense, atol=1e-9)

    def rbf(x, y):
        return np.exp(-0.05 * np.sum((x - y) ** 2))

    np.testing.assert_allclose(KernelPCA(4, kernel=rbf).fit(X).transform(X[:10]), dense, atol=1e-9)
    K = pairwise_kernels(X, metric="rbf", gamma=0.05)
    pre = KernelPCA(4, kernel="precomputed").fit(K)
    np.testing.assert_allclose(pre.transform(K[:10]), dense, atol=1e-9)


def test_not_psd_precomputed_raises_naming_it(rng):
    """A kernel matrix with large negative eigenvalues: asking for them is scikit-learn's ValueError; the
    leading positive ones fit."""
    A = rng.normal(size=(20, 20))
    K = A + A.T
    with pytest.raises(ValueError, match="significant negative eigenvalues"):
        KernelPCA(19, kernel="precomputed").fit(K)
    est = KernelPCA(2, kernel="precomputed").fit(K)
    assert np.all(est.eigenvalues_ > 0)


def test_arguments_keyword_only_and_checked():
    """scikit-learn's conventions: keyword-only arguments past n_components; a bad value names its
    parameter; a solver without eigenvectors over the rows is refused, saying what to use."""
    with pytest.raises(TypeError):
        KernelPCA(2, "rbf")
    X = np.random.default_rng(0).normal(size=(30, 3))
    with pytest.raises(InvalidParameterError, match="eigen_solver"):
        KernelPCA(2, eigen_solver="magic").fit(X)
    with pytest.raises(InvalidParameterError, match="n_components"):
        KernelPCA(0).fit(X)
    with pytest.raises(ValueError, match="eigen_solver: 'nystrom'"):
        KernelPCA(2, eigen_solver="nystrom", kernel="rbf").fit(np.random.default_rng(0).normal(size=(400, 3)))


def test_copy_x_false_keeps_the_callers_array(rng):
    """copy_X (default True) keeps a copy, so changing X after fit changes nothing; False keeps the caller's."""
    X = rng.normal(size=(30, 4))
    kept = KernelPCA(2, copy_X=True).fit(X)
    shared = KernelPCA(2, copy_X=False).fit(X)
    assert kept.X_fit_ is not X and np.shares_memory(shared.X_fit_, X)


def test_a_tolerance_not_met_is_said():
    """A matrix-free fit stopped by max_iter before its tolerance says so (a ConvergenceWarning, ``warnings_``)
    instead of reading as converged, ritz's passes and lanczos's iterations alike (lanczos said nothing before
    issue 56); a converged one says nothing. 1,500 rows: more than the warm start's subset, which is exact."""
    from sklearn.exceptions import ConvergenceWarning

    X = jittered_digits(1500)
    for solver, tol in (("ritz", 1e-12), ("lanczos", 1e-14)):
        with pytest.warns(ConvergenceWarning, match="not met"):
            stopped = KernelPCA(6, kernel="rbf", eigen_solver=solver, tol=tol, max_iter=1).fit(X)
        assert any("not met" in w for w in stopped.warnings_)
    assert KernelPCA(6, kernel="rbf", eigen_solver="arpack").fit(X).warnings_ == []


def test_partial_fit_resumes_and_fits_all_rows():
    """scikit-learn's issues #18013 / #15895: rows added by partial_fit. A ritz fit resumes from its state and
    ends with the eigenpairs of all the rows (the exact ones, to its tolerance); a dense fit is made again on
    all rows, equal to a fit of them; kernel matrices and out-of-core data are refused, naming X."""
    X = jittered_digits(1500)
    resumed = KernelPCA(6, kernel="rbf", eigen_solver="ritz").partial_fit(X[:1000])
    first_passes = resumed._state.pass_
    resumed.partial_fit(X[1000:])
    assert resumed._state.pass_ > first_passes and resumed.X_fit_.shape == (1500, 64)  # resumed, not restarted
    exact = KernelPCA(6, kernel="rbf", eigen_solver="dense").fit(X)
    np.testing.assert_allclose(resumed.eigenvalues_, exact.eigenvalues_, rtol=1e-6)
    angles = scipy.linalg.subspace_angles(resumed.eigenvectors_, exact.eigenvectors_)
    assert np.degrees(angles.max()) < 0.5
    dense = KernelPCA(4, kernel="rbf").partial_fit(X[:100]).partial_fit(X[100:150])
    np.testing.assert_allclose(dense.transform(X[:5]), KernelPCA(4, kernel="rbf").fit(X[:150]).transform(X[:5]),
                               atol=1e-12)
    assert not hasattr(KernelPCA(2, kernel="precomputed"), "partial_fit")  # no rows to append to a matrix
    sparse = KernelPCA(3, kernel="rbf").partial_fit(scipy.sparse.csr_matrix(X[:80]))
    sparse.partial_fit(scipy.sparse.csr_matrix(X[80:120]))
    np.testing.assert_allclose(sparse.transform(X[:5]), KernelPCA(3, kernel="rbf").fit(X[:120]).transform(X[:5]),
                               atol=1e-9)
