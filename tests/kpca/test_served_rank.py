"""What every registered solver serves, for every r up to past the data's rank (issue 28).

Data of known rank: 12 distinct digits, each repeated 5 times (l = 60). With a Gaussian kernel the 12
distinct points have a positive definite kernel matrix, so the centred K' of the 60 rows has rank exactly
11. For r in {1, rank - 1, rank, rank + 5} the served model must have

* eigenvalues of shape (r,), finite, descending and non-negative;
* on the components with positive variance, ``A K' A^T = I`` (orthonormal in feature space, K' the
  centred kernel matrix of the points the model is expanded over: training rows or centres) and
  ``AK = A K'``; never more such components than the rank;
* every other component reported as such: a zero row (its projections 0), eigenvalue 0, and named in
  the warnings the estimator gives (Python warnings, and ``warnings_``).

The autoencoder solvers (seed 003) serve an encoder and a decoder, not an eigendecomposition: for
them the test checks the codes and reconstructions are finite and of the asked shape.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from kpca.estimator import KernelHebbianPCA
from kpca.model import KernelModel
from kpca.solvers import SOLVERS

DISTINCT, REPEATS = 12, 5
RANK = DISTINCT - 1
R_VALUES = (1, RANK - 1, RANK, RANK + 5)
ZERO_TOL = 1e-8  # an eigenvalue at most this times the largest counts as "no variance"
AUTOENCODER_KERNEL = {"kernel": "polynomial", "degree": 2, "offset": 0.0, "gamma": 1.0}


@pytest.fixture(scope="module")
def repeated(digits):
    """The 12 distinct digits (l = 60, rows in repeated blocks, shuffled) and the exact rank of K'."""
    X = np.repeat(digits[:DISTINCT], REPEATS, axis=0)
    return X[np.random.default_rng(5).permutation(X.shape[0])]


def cases():
    for name, solver in sorted(SOLVERS.items()):
        inits = ("auto", "random") if solver.param("init") is not None else ("auto",)
        for init in inits:
            for r in R_VALUES:
                yield pytest.param(name, init, r, id=f"{name}-{init}-r{r}")


def fitted(name: str, init: str, r: int, X: np.ndarray) -> tuple[KernelHebbianPCA, list[str]]:
    """The estimator fitted on X, and the messages of the warnings its fit gave."""
    kernel = AUTOENCODER_KERNEL if SOLVERS[name].model is not None else {"kernel": "gaussian", "sigma": 3.0}
    params = {"passes": 20} if SOLVERS[name].iterative else {}
    est = KernelHebbianPCA(r, solver=name, init=init, random_state=1, solver_params=params, **kernel)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X)
    return est, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def check_invariants(model: KernelModel, messages: list[str], r: int, rank: int) -> None:
    lam = np.asarray(model.eigenvalues, dtype=np.float64)
    assert lam.shape == (r,) and np.all(np.isfinite(lam))
    assert np.all(lam >= 0), f"negative eigenvalues served: {lam}"
    assert np.all(np.diff(lam) <= 1e-12 * lam[0]), f"eigenvalues not descending: {lam}"
    kept = lam > ZERO_TOL * lam[0]
    assert 1 <= kept.sum() <= rank, f"{kept.sum()} components with variance from data of rank {rank}: {lam}"
    Kc = model.rows.dense()  # K' of the points the components are expanded over (rows or centres)
    A, AK = model.A, model.AK
    np.testing.assert_allclose(AK, A @ Kc, atol=1e-8 * max(1.0, np.abs(AK).max()))
    G = A[kept] @ Kc @ A[kept].T
    assert np.abs(G - np.eye(int(kept.sum()))).max() < 1e-6, "kept components are not orthonormal"
    empty = ~kept
    assert np.all(lam[empty] == 0) and np.all(A[empty] == 0) and np.all(AK[empty] == 0)
    rank_messages = [m for m in messages if "carry no variance" in m]  # besides, a stochastic fit's unmet tol
    if empty.any():
        assert any(f"{int(empty.sum())} of the {r}" in m for m in rank_messages), messages
    else:
        assert rank_messages == []


@pytest.mark.parametrize("name, init, r", list(cases()))
def test_served_components_never_invent_directions(repeated, name, init, r):
    est, messages = fitted(name, init, r, repeated)
    X = repeated
    codes = est.transform(X)
    assert codes.shape == (X.shape[0], r) and np.all(np.isfinite(codes))
    if not isinstance(est.model_, KernelModel):  # an autoencoder: no eigendecomposition to check
        assert est.eigenvalues_ is None and np.all(np.isfinite(est.model_.reconstruct(X)))
        return
    check_invariants(est.model_, messages, r, RANK)
    assert est.warnings_ == messages
    np.testing.assert_array_equal(est.eigenvalues_, est.model_.eigenvalues)
    lam = est.eigenvalues_
    np.testing.assert_array_equal(codes[:, lam == 0], 0.0)  # a component past the rank projects to 0
