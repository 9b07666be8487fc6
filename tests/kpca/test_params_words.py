"""Parameters that accept words besides numbers (`Param.words`), and what solvers declare about
themselves besides their parameters (`Solver.shardable`, ``clusterable``, ``gain_scale``): where a fit
runs is not one of its parameters."""

import numpy as np
import pytest

from kpca.clustering import clustering_solvers
from kpca.estimator import KernelHebbianPCA
from kpca.params import Param, ParamError
from kpca.solvers import SOLVERS

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


def test_solvers_declare_what_they_are():
    """The KHA family shards and clusters and has a gain scale (the rule of kpca.defaults); exact and
    lanczos cluster; no solver has a ``workers`` parameter (placement is the job's)."""
    for name, solver in SOLVERS.items():
        assert solver.shardable == (name in (*KHA_FAMILY, "ritz")), name  # ritz: the family's passes, no gains
        assert (solver.gain_scale is not None) == (name in KHA_FAMILY), name
        assert solver.param("workers") is None, name
    assert set(clustering_solvers()) == {*KHA_FAMILY, "ritz", "exact", "lanczos"}
    assert [SOLVERS[name].gain_scale for name in KHA_FAMILY] == [0.05, 0.5, 0.1, 0.05]


def test_the_estimator_has_no_workers_parameter(rng):
    X = rng.normal(size=(60, 4))
    fitted = KernelHebbianPCA(4, solver="kha", passes=1).fit(X)
    assert "workers" not in fitted.params_used_ and np.isfinite(fitted.transform(X)).all()
    for solver in ("kha-smd", "exact"):
        with pytest.raises(ParamError, match="not a parameter") as info:
            KernelHebbianPCA(4, solver=solver, passes=1, solver_params={"workers": 1}).fit(X)
        assert info.value.field == "workers"
