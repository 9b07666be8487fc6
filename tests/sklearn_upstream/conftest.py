"""What scikit-learn's own conftest gives its test_kernel_pca.py: the ``global_random_seed`` fixture (seed 42,
or the seeds of ``SKLEARN_TESTS_GLOBAL_RANDOM_SEED``: one integer, or ``all`` for 0 to 99, as scikit-learn
reads it); and the documented differences (`tests.sklearn_upstream.upstream.DIFFERENCES`) as strict xfails."""

import os

import pytest

from tests.sklearn_upstream.upstream import DIFFERENCES, TARGET


def _seeds() -> list[int]:
    value = os.environ.get("SKLEARN_TESTS_GLOBAL_RANDOM_SEED", "42")
    return list(range(100)) if value == "all" else [int(value)]


def pytest_generate_tests(metafunc):
    if "global_random_seed" in metafunc.fixturenames:
        metafunc.parametrize("global_random_seed", _seeds())


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path == TARGET and item.name in DIFFERENCES:
            item.add_marker(pytest.mark.xfail(reason=DIFFERENCES[item.name], strict=True))
