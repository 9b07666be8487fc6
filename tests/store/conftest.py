"""Fixtures for the store conformance suite: a fresh data folder per test, seeded RNG, and an S3 API on loopback
(moto's server, `bench._s3_server`) with a fresh prefix of its bucket per test (issue 57)."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240531)


@pytest.fixture(scope="module")
def s3_server():
    """moto's S3 server on loopback for a test module, stopped after it."""
    from bench._s3_server import s3_server as running

    with running() as server:
        yield server


@pytest.fixture
def s3_url(s3_server, monkeypatch) -> str:
    """``s3://{bucket}/{fresh prefix}`` on `s3_server`, the variables an S3 client reads to reach it set for this
    test."""
    from bench._s3_server import BUCKET

    for name, value in s3_server.environment().items():
        monkeypatch.setenv(name, value)
    return f"s3://{BUCKET}/{uuid.uuid4().hex}"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    return data


