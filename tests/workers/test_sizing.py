"""How the embedded cluster is sized to the machine (`workers.dask_cluster.embedded_sizing`)."""

import os

import pytest

from workers.dask_cluster import EMBEDDED_MAX_WORKERS, embedded_sizing
from workers.placement import machine_cores


@pytest.mark.parametrize("cores,n_workers,expected", [
    (2, None, (2, 1)),
    (16, None, (8, 2)),
    (2, 3, (3, 1)),  # configured workers are used as they are, kernels never below one thread
    (1, None, (1, 1)),
    (0, None, (1, 1)),
    (7, None, (7, 1)),
    (64, None, (8, 8)),
    (16, 4, (4, 4)),
    (16, 1, (1, 16)),
])
def test_embedded_sizing(cores, n_workers, expected):
    assert embedded_sizing(cores, n_workers) == expected


def test_automatic_sizing_never_oversubscribes_the_cores():
    for cores in range(1, 70):
        workers, threads = embedded_sizing(cores)
        assert 1 <= workers <= min(cores, EMBEDDED_MAX_WORKERS) and workers * threads <= cores


def test_machine_cores_are_those_this_process_may_use():
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert machine_cores() == expected >= 1
