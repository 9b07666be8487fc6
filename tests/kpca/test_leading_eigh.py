"""`kpca._dense.leading_eigh`: ARPACK where few pairs of a large matrix are asked, with the same answer as
LAPACK's eigh, and LAPACK wherever ARPACK's answer could be wrong; LAPACK without Python's lock
(`kpca._lapack`) below `KRYLOV_MIN_ORDER`, and up to `NOGIL_MAX_ORDER` inside `unlocked_eigh`."""

import contextlib

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse.linalg
from sklearn.datasets import load_digits

from kpca import _dense
from kpca._dense import leading_eigh
from kpca.solvers import exact_components


@pytest.fixture
def calls(monkeypatch):
    """The names of the eigensolvers called ("eigh", "eigsh"), in order."""
    seen = []
    real_eigh, real_eigsh = scipy.linalg.eigh, scipy.sparse.linalg.eigsh

    def eigh(*args, **options):
        seen.append("eigh")
        return real_eigh(*args, **options)

    def eigsh(*args, **options):
        seen.append("eigsh")
        return real_eigsh(*args, **options)

    monkeypatch.setattr(scipy.linalg, "eigh", eigh)
    monkeypatch.setattr(scipy.sparse.linalg, "eigsh", eigsh)
    return seen


def centred_digits_kernel(n: int, sigma: float = 3.0) -> np.ndarray:
    X = load_digits().data[:n] / 16.0
    sq = (X * X).sum(axis=1)
    K = np.exp(-np.maximum(sq[:, None] + sq[None, :] - 2.0 * X @ X.T, 0.0) / (2.0 * sigma**2))
    return K - K.mean(axis=0) - K.mean(axis=1)[:, None] + K.mean()


def with_spectrum(rng, spectrum) -> np.ndarray:
    """A symmetric matrix of the given eigenvalues and random eigenvectors."""
    Q, _ = np.linalg.qr(rng.normal(size=(len(spectrum), len(spectrum))))
    return (Q * np.asarray(spectrum)) @ Q.T


def assert_same_pairs(a, q, w, V):
    """w, V are the q largest eigenpairs of a, as LAPACK gives them (the same subspace)."""
    n = a.shape[0]
    w0, V0 = scipy.linalg.eigh(a, subset_by_index=[n - q, n - 1])
    np.testing.assert_allclose(w, w0, rtol=0, atol=1e-11 * abs(w0[-1]))
    np.testing.assert_allclose(V.T @ V, np.eye(q), atol=1e-10)
    cosines = np.linalg.svd(V0.T @ V, compute_uv=False)  # of the principal angles between the two subspaces
    np.testing.assert_allclose(cosines, 1.0, atol=1e-8)


@pytest.mark.parametrize("q", [4, 16])
def test_few_pairs_of_a_kernel_matrix_come_from_arpack_and_equal_lapack(calls, q):
    Kc = centred_digits_kernel(600)
    w, V = leading_eigh(Kc, q)
    assert calls[0] == "eigsh" and "eigh" not in calls, calls
    assert_same_pairs(Kc, q, w, V)


def test_a_multiple_eigenvalue_that_lanczos_leaves_copies_of_is_answered_by_lapack(rng, calls):
    """Twenty copies of the largest eigenvalue and 24 pairs asked: ARPACK returns true eigenpairs but
    leaves copies out (the next eigenvalue down in their place); the check sees it."""
    a = with_spectrum(rng, [1.0] * 20 + list(np.linspace(0.9, 0.0, 780)))
    w, V = leading_eigh(a, 24)
    assert calls[:1] == ["eigsh"] and calls[-1] == "eigh", calls
    assert_same_pairs(a, 24, w, V)


def test_a_rank_deficient_matrix_is_answered_by_lapack(rng, calls):
    X = rng.normal(size=(500, 3))
    a = X @ X.T  # rank 3, 8 pairs asked
    w, V = leading_eigh(a, 8)
    assert calls[-1] == "eigh", calls
    np.testing.assert_allclose(w[:5], 0.0, atol=1e-9 * w[-1])
    np.testing.assert_allclose(V.T @ V, np.eye(8), atol=1e-10)  # the null space's basis is arbitrary
    np.testing.assert_allclose(np.sort(w[-3:]), np.sort(np.linalg.eigvalsh(X.T @ X)), rtol=1e-10)


@pytest.mark.parametrize("n, q", [(600, 600 // _dense.KRYLOV_MAX_SHARE + 17)])
def test_many_pairs_go_to_lapack(rng, calls, n, q):
    a = with_spectrum(rng, np.linspace(1.0, 0.0, n))
    w, V = leading_eigh(a, q)
    assert calls == ["eigh"]
    assert_same_pairs(a, q, w, V)


@pytest.mark.parametrize("n, q, unlocked", [(5, 1, False), (5, 5, False), (_dense.KRYLOV_MIN_ORDER - 1, 4, False),
                                             (512, 8, True), (_dense.NOGIL_MAX_ORDER, 40, True)])
def test_small_matrices_go_to_lapack_without_the_gil_and_equal_its_eigh(rng, calls, n, q, unlocked):
    """Issue 55: below `KRYLOV_MIN_ORDER`, and up to `NOGIL_MAX_ORDER` inside `unlocked_eigh` (an image's tiles),
    LAPACK's dsyevr answers from a jitted function that releases the GIL (neither SciPy's eigh nor ARPACK is
    called), with eigh's numbers to rounding (the same driver)."""
    from kpca._lapack import _dsyevr_leading

    assert _dsyevr_leading.targetoptions["nogil"]
    a = with_spectrum(rng, np.linspace(1.0, 0.0, n))
    if unlocked:
        leading_eigh(a, q)
        assert calls[:1] in (["eigsh"], ["eigh"])  # outside the block ARPACK (or SciPy's eigh) answers
        calls.clear()
    with _dense.unlocked_eigh() if unlocked else contextlib.nullcontext():
        w, V = leading_eigh(a, q)
    assert calls == [] and w.shape == (q,) and V.shape == (n, q)
    assert_same_pairs(a, q, w, V)
    w0, V0 = scipy.linalg.eigh(a, subset_by_index=[n - q, n - 1], driver="evr")
    np.testing.assert_allclose(w, w0, rtol=1e-13)
    np.testing.assert_allclose(np.abs(V), np.abs(V0), rtol=0, atol=1e-12)
    calls.clear()
    X = rng.normal(size=(n, 3))  # rank deficient: its zero eigenvalues' pairs an orthonormal basis
    with _dense.unlocked_eigh() if unlocked else contextlib.nullcontext():
        w, V = leading_eigh(X @ X.T, min(q, n))
    assert calls == []
    np.testing.assert_allclose(V.T @ V, np.eye(V.shape[1]), atol=1e-10)
    np.testing.assert_allclose((X @ X.T) @ V, V * w, atol=1e-9 * abs(w[-1]))


def test_a_matrix_that_is_not_finite_gets_eigh_s_error(calls):
    a = np.eye(6)
    a[2, 3] = a[3, 2] = np.nan
    with pytest.raises(ValueError, match="infs or NaNs"):
        leading_eigh(a, 2)
    assert calls == ["eigh"]


def test_the_exact_solver_takes_the_arpack_path_and_its_components_are_unchanged(calls):
    Kc = centred_digits_kernel(700)
    eigenvalues, A = exact_components(Kc, 8)
    assert calls[0] == "eigsh", calls
    w0, V0 = scipy.linalg.eigh(Kc, subset_by_index=[700 - 8, 699])
    np.testing.assert_allclose(eigenvalues, w0[::-1], rtol=1e-11)
    np.testing.assert_allclose(A @ Kc @ A.T, np.eye(8), atol=1e-9)  # the components are orthonormal
    signs = np.sign(V0[np.abs(V0).argmax(axis=0), np.arange(8)])[::-1]
    np.testing.assert_allclose(A, (V0[:, ::-1] * signs / np.sqrt(w0[::-1])).T, atol=1e-8 * np.abs(A).max())





def identity_kernel_matrix() -> np.ndarray:
    """K' of a Gaussian kernel a thousand times narrower than the rows' distances: I - 1 1^T / n to
    rounding (the adversarial suite's case, 400 digits)."""
    from bench._adversarial import digits, median_distance
    from kpca.kernels import KernelSpec
    from kpca.rows import KernelRows

    X = digits(400)
    rows = KernelRows(X, KernelSpec("gaussian", sigma=1e-3 * median_distance(X)))
    rows.fit_centering()
    return rows.dense()


def test_a_matrix_with_one_eigenvalue_of_multiplicity_n_minus_1_gets_its_pairs():
    """Issue 51: the exact solver failed there, ARPACK stopping with "no shifts could be applied", and
    LAPACK's index range (``subset_by_index``) returning no pair at all. Both now answer (LAPACK's whole
    decomposition where its range comes back short)."""
    a = identity_kernel_matrix()
    n = a.shape[0]
    w, V = _dense.eigh(a, subset_by_index=[n - 8, n - 1])
    assert w.shape == (8,) and V.shape == (n, 8)
    for w, V in ((w, V), leading_eigh(a, 8)):
        np.testing.assert_allclose(w, 1.0, rtol=1e-12)
        np.testing.assert_allclose(V.T @ V, np.eye(8), atol=1e-10)
        np.testing.assert_allclose(a @ V, V * w, atol=1e-10)
