"""Placement of a fit (`workers.placement`): how many shards a fit gets for ``placement.workers``."""

import pytest

from workers.placement import SHARD_MIN_ROWS, shard_count, shard_min_rows


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


def test_shard_count_follows_min_rows(monkeypatch):
    assert shard_count(None, 1000, 3, min_rows=1000) == 3
    assert shard_count(None, 999, 3, min_rows=1000) == 1
    assert SHARD_MIN_ROWS == 50_000
    with pytest.raises(ValueError, match="workers"):
        shard_count("many", 1000, 3)
    monkeypatch.setenv("KPCA_SHARD_MIN_ROWS", "1234")
    assert shard_min_rows() == 1234
    monkeypatch.delenv("KPCA_SHARD_MIN_ROWS")
    assert shard_min_rows() == SHARD_MIN_ROWS
