"""KernelHebbianPCA as scikit-learn sees it: check_estimator, kernel names, inverse_transform, feature names."""

import numpy as np
import pytest
from sklearn.decomposition import KernelPCA
from sklearn.utils.estimator_checks import parametrize_with_checks

from kpca import KernelHebbianPCA
from kpca.preimage import reconstruct


@parametrize_with_checks([KernelHebbianPCA(n_components=2, passes=2)])
def test_sklearn_check_estimator(estimator, check):
    """Every check of sklearn.utils.estimator_checks, on small fits (2 components, 2 passes)."""
    check(estimator)


def test_import_from_package_is_the_estimator():
    from kpca.estimator import KernelHebbianPCA as direct

    assert KernelHebbianPCA is direct


def test_arguments_past_n_components_are_keyword_only():
    """scikit-learn's convention (issue 56): ``KernelHebbianPCA(4, "rbf")`` is a TypeError, not a kernel."""
    assert KernelHebbianPCA(4, kernel="rbf").kernel == "rbf"
    with pytest.raises(TypeError):
        KernelHebbianPCA(4, "rbf")


@pytest.mark.parametrize(("sklearn_args", "project_args"), [
    ({"kernel": "rbf", "gamma": 1 / 18}, {"kernel": "gaussian", "sigma": 3.0}),
    ({"kernel": "poly", "gamma": 0.5, "degree": 2, "coef0": 0.5},
     {"kernel": "polynomial", "gamma": 0.5, "degree": 2, "offset": 0.5}),
    ({"kernel": "sigmoid", "gamma": 0.01, "coef0": 0.0}, {"kernel": "tanh", "gamma": 0.01, "offset": 0.0}),
])
def test_sklearn_kernel_names_equal_the_projects(digits, sklearn_args, project_args):
    X = digits[:200]
    named = KernelHebbianPCA(4, passes=3, **sklearn_args).fit(X)
    own = KernelHebbianPCA(4, passes=3, **project_args).fit(X)
    assert named.kernel_ == own.kernel_
    np.testing.assert_allclose(named.transform(digits[300:320]), own.transform(digits[300:320]), atol=1e-12)


def test_sklearn_kernel_defaults_follow_kernelpca(digits):
    """gamma None is 1 / n_features, degree 3, coef0 1, as in sklearn's KernelPCA; offset and coef0 clash."""
    X = digits[:100]
    assert KernelHebbianPCA(2, kernel="rbf", passes=1).fit(X).kernel_["sigma"] == pytest.approx(np.sqrt(32))
    assert KernelHebbianPCA(2, kernel="poly", passes=1).fit(X).kernel_ == {
        "type": "polynomial", "degree": 3, "offset": 1.0, "gamma": 1 / 64}
    with pytest.raises(ValueError, match="gamma") as caught:
        KernelHebbianPCA(2, kernel="rbf", gamma=-1.0).fit(X)
    assert caught.value.field == "gamma"
    with pytest.raises(ValueError, match="coef0"):
        KernelHebbianPCA(2, kernel="poly", coef0=1.0, offset=1.0).fit(X)


def test_inverse_transform_reconstructs_digits_as_the_service_does(digits):
    """Pre-images of the training digits' components: those of the service's reconstruct ("auto", fixed
    point for the Gaussian), and close to sklearn's KernelPCA inverse (a learned ridge map)."""
    X = digits[:300]
    est = KernelHebbianPCA(8, kernel="rbf", gamma=1 / 18, passes=5).fit(X)
    Z = est.transform(X[:20])
    R = est.inverse_transform(Z)
    assert R.shape == (20, 64)
    served = reconstruct(est.model_, X[:20])
    np.testing.assert_allclose(R, served, atol=1e-5)
    sk = KernelPCA(8, kernel="rbf", gamma=1 / 18, fit_inverse_transform=True, alpha=1e-3).fit(X)
    R_sk = sk.inverse_transform(sk.transform(X[:20]))
    assert np.linalg.norm(R - R_sk) / np.linalg.norm(R_sk) < 0.2
    assert np.linalg.norm(R - X[:20]) / np.linalg.norm(X[:20]) < 0.4


def test_inverse_transform_methods_and_decoder(digits):
    X = digits[:200]
    est = KernelHebbianPCA(4, kernel="poly", degree=2, passes=2, inverse_method="kwok-tsang").fit(X)
    assert est.inverse_transform(est.transform(X[:5])).shape == (5, 64)
    est.set_params(inverse_method="learned", inverse_params={"n_samples": 100})
    assert np.isfinite(est.inverse_transform(est.transform(X[:5]))).all()
    with pytest.raises(ValueError, match="components"):
        est.inverse_transform(np.zeros((2, 3)))
    ae = KernelHebbianPCA(4, kernel="polynomial", degree=2, offset=0.0, gamma=1.0, solver="akpca",
                          solver_params={"passes": 2, "seed": 1}).fit(X)
    np.testing.assert_allclose(ae.inverse_transform(ae.transform(X[:5])), ae.model_.reconstruct(X[:5]), atol=1e-10)


def test_get_feature_names_out(digits):
    est = KernelHebbianPCA(3, passes=1).fit(digits[:50])
    assert list(est.get_feature_names_out()) == ["kernelhebbianpca0", "kernelhebbianpca1", "kernelhebbianpca2"]
