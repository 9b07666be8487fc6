import numpy as np
import pytest
from sklearn.datasets import load_digits


@pytest.fixture
def rng():
    """A fresh, seeded generator per test (never a global seed)."""
    return np.random.default_rng(20061204)


@pytest.fixture(scope="session")
def digits():
    """sklearn's bundled 8x8 digits (a stand-in for USPS), pixels scaled to [0, 1]."""
    return load_digits().data / 16.0
