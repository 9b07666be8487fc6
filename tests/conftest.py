import os
from collections import Counter

import numpy as np
import pytest
from sklearn.datasets import load_digits

from tests.service.browser import empty_artefacts
from tests.sklearn_upstream.upstream import write_upstream_tests

# Services the tests start (in this process or as subprocesses) do not warm their workers' jitted code:
# each module starts its own cluster, and the code is compiled by the first test that needs it anyway.
# tests/workers/test_warm_up.py turns it on.
os.environ.setdefault("KPCA_WARM_WORKERS", "0")


def pytest_configure(config):
    """Before collection: scikit-learn's own KernelPCA tests, from the installed scikit-learn, with our class
    imported (tests/sklearn_upstream)."""
    write_upstream_tests()


def pytest_sessionstart(session):
    """Once per run, in the process that leads it (not in each pytest-xdist worker): an empty folder for
    the dashboard's screenshots."""
    if not hasattr(session.config, "workerinput"):
        empty_artefacts()


# The order in which pytest-xdist hands out test files (`make test`: --dist loadfile, a file at a time,
# and --no-loadscope-reorder, without which xdist sorts the files by their number of tests and undoes
# this order): the folders whose modules start services and clusters, each long, first; then the short
# numerical modules, those with the most tests (the longest of them) first, so that the shortest fill the
# workers' ends instead of one long module running alone at the end.
FIRST_FOLDERS = ("service", "workers", "e2e")


def pytest_collection_modifyitems(session, config, items):
    """Items of `FIRST_FOLDERS` first, in collection order; the rest after, a file's items together,
    files with more tests first (a stable sort)."""
    tests = os.path.dirname(__file__)
    per_file = Counter(str(item.path) for item in items)

    def order(item) -> tuple[bool, int]:
        late = os.path.relpath(str(item.path), tests).split(os.sep)[0] not in FIRST_FOLDERS
        return late, -per_file[str(item.path)] if late else 0

    items.sort(key=order)


@pytest.fixture
def rng():
    """A fresh, seeded generator per test (never a global seed)."""
    return np.random.default_rng(20061204)


@pytest.fixture(scope="session")
def digits():
    """sklearn's bundled 8x8 digits (a stand-in for USPS), pixels scaled to [0, 1]."""
    return load_digits().data / 16.0
