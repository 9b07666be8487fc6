"""Default gains on data and kernels the defaults were not tuned on."""

import pytest
import scipy.linalg
from sklearn.datasets import make_blobs

from kpca.driver import run_passes
from kpca.kernels import KernelSpec
from kpca.metrics import excess_error, minimal_error
from kpca.rows import DenseRows, KernelRows
from tests.naive import start_state


@pytest.mark.parametrize("name,spec", [
    ("blobs", KernelSpec("gaussian", sigma=2.0)),
    ("blobs", KernelSpec("laplacian", sigma=5.0)),
    ("digits-wide", KernelSpec("gaussian", sigma=8.0)),
])
def test_default_gains_converge_on_unseen_data(name, spec, digits):
    X = make_blobs(500, n_features=10, centers=6, random_state=3)[0] if name == "blobs" else digits[1200:1700]
    rows = KernelRows(X, spec)
    rows.fit_centering()
    Kc = rows.dense()
    e_min = minimal_error(scipy.linalg.eigvalsh(Kc), 8)
    for solver, bound in (("kha-et", 0.1), ("kha-smd", 0.05)):
        state = start_state(solver, 8, rows, seed=0)
        state, _ = run_passes(DenseRows(Kc), state, 15, 100)
        assert excess_error(Kc, state["AK"], e_min) < bound, (solver, spec)
