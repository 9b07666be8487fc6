"""Parameters that accept words besides numbers (`Param.words`), the ``workers`` parameter of the KHA
family, and the shard count it resolves to (`kpca.defaults.shard_count`)."""

import numpy as np
import pytest

from kpca import defaults
from kpca.defaults import SHARD_MIN_ROWS, shard_count
from kpca.estimator import KernelHebbianPCA
from kpca.params import Param, ParamError
from kpca.solvers import SOLVERS, WORKERS

KHA_FAMILY = ("kha", "kha-t", "kha-et", "kha-smd")


def test_a_word_is_returned_as_it_is_and_numbers_are_still_checked():
    param = Param("workers", int, None, low=1, high=4096, words=("all",))
    assert param.check("all", "params") == "all"
    assert param.check(3, "params") == 3
    assert param.check(None, "params") is None
    for bad in (0, -1, 1.5, "many", True, 4097):
        with pytest.raises(ParamError) as info:
            param.check(bad, "params")
        assert info.value.field == "params.workers"
    with pytest.raises(ParamError, match='an integer or "all"'):
        param.check("many", "params")


def test_the_schema_of_a_parameter_with_words_offers_the_number_or_the_words():
    schema = Param("workers", int, 1, low=1, words=("all", "half")).json_schema()
    assert schema["anyOf"] == [{"type": "integer", "minimum": 1}, {"enum": ["all", "half"]}]
    assert schema["default"] == 1
    assert "anyOf" not in Param("passes", int, 1, low=1).json_schema()


def test_workers_is_a_parameter_of_the_kha_family_only():
    for name, solver in SOLVERS.items():
        assert (WORKERS in solver.params) == (name in KHA_FAMILY), name
    schema = WORKERS.json_schema()
    assert {"enum": ["all"]} in schema["anyOf"][0]["anyOf"] and {"type": "null"} in schema["anyOf"]
    assert f"{SHARD_MIN_ROWS:,}" in WORKERS.description


@pytest.mark.parametrize("requested,n_rows,available,expected", [
    (None, SHARD_MIN_ROWS, 4, 4),
    (None, SHARD_MIN_ROWS - 1, 4, 1),
    ("all", 100, 4, 4),
    (2, 100, 4, 2),
    (8, 100, 4, 4),
    ("all", 3, 4, 3),  # never more shards than rows
    (None, SHARD_MIN_ROWS, 0, 1),  # at least one
    (1, 0, 4, 1),
])
def test_shard_count(requested, n_rows, available, expected):
    assert shard_count(requested, n_rows, available, SHARD_MIN_ROWS) == expected


def test_shard_count_follows_min_rows():
    assert shard_count(None, 1000, 3, min_rows=1000) == 3
    assert shard_count(None, 999, 3, min_rows=1000) == 1
    assert defaults.SHARD_MIN_ROWS == 50_000
    with pytest.raises(ValueError, match="workers"):
        shard_count("many", 1000, 3)


def test_the_estimator_runs_in_one_process(rng):
    X = rng.normal(size=(60, 4))
    fitted = KernelHebbianPCA(4, solver="kha", passes=1, solver_params={"workers": 1}).fit(X)
    assert fitted.params_used_["workers"] == 1
    assert KernelHebbianPCA(4, solver="kha", passes=1).fit(X).params_used_.get("workers") is None
    for workers in (2, "all"):
        with pytest.raises(ParamError, match="one process") as info:
            KernelHebbianPCA(4, solver="kha-smd", passes=1, solver_params={"workers": workers}).fit(X)
        assert info.value.field == "workers"
    with pytest.raises(ParamError) as info:  # a solver outside the KHA family does not declare it
        KernelHebbianPCA(4, solver="exact", solver_params={"workers": 1}).fit(X)
    assert info.value.field == "workers"
    assert np.isfinite(fitted.transform(X)).all()
