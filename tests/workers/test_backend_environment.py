"""The embedded cluster leaves the environment of the process that started it as it found it.

distributed's nannies write their workers' pre-spawn environment (BLAS and numba thread counts,
PYTHONHASHSEED) into the starting process before every worker (re)start; left there, a later cluster
or in-process fit of the same process reads ``NUMBA_NUM_THREADS=1`` and sizes itself wrong. The
workers' own settings (`workers.settings`) reach them the same way: the service's values, flags included."""

from __future__ import annotations

import os

from workers import Backend
from workers.placement import shard_min_rows
from workers.priority import fit_nice, preimage_nice
from workers.settings import WorkerSettings


def test_closing_the_embedded_cluster_gives_this_process_its_environment_back(tmp_path, monkeypatch):
    for key in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "PYTHONHASHSEED", "KPCA_FIT_NICE", "KPCA_PREIMAGE_NICE",
                "KPCA_SHARD_MIN_ROWS"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "7")  # set by the user: the nannies keep it
    before = _environment()
    given = WorkerSettings(fit_nice=3, preimage_nice=2, shard_min_rows=1234).worker_environ()  # as flags give them
    with Backend(tmp_path, n_workers=1, worker_environ=given) as backend:
        assert os.environ["OMP_NUM_THREADS"] == "1"  # written by the nanny: the case this test is about
        assert os.environ["MKL_NUM_THREADS"] == "7"
        backend.client.restart()  # a nanny's restart writes it again
        assert set(backend.client.run(fit_nice).values()) == {3}  # the service's values, on every worker
        assert set(backend.client.run(preimage_nice).values()) == {2}
        assert set(backend.client.run(shard_min_rows).values()) == {1234}
    assert _environment() == before


def _environment() -> dict[str, str]:
    """This process's environment but distributed's own marker for process titles (``__DASK_PARENT_PID``)."""
    return {key: value for key, value in os.environ.items() if not key.startswith("__DASK")}
