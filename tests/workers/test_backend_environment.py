"""The embedded cluster leaves the environment of the process that started it as it found it.

distributed's nannies write their workers' pre-spawn environment (BLAS and numba thread counts,
PYTHONHASHSEED) into the starting process before every worker (re)start; left there, a later cluster
or in-process fit of the same process reads ``NUMBA_NUM_THREADS=1`` and sizes itself wrong."""

from __future__ import annotations

import os

from workers import Backend


def test_closing_the_embedded_cluster_gives_this_process_its_environment_back(tmp_path, monkeypatch):
    for key in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "PYTHONHASHSEED"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "7")  # set by the user: the nannies keep it
    before = _environment()
    with Backend(tmp_path, n_workers=1) as backend:
        assert os.environ["OMP_NUM_THREADS"] == "1"  # written by the nanny: the case this test is about
        assert os.environ["MKL_NUM_THREADS"] == "7"
        backend.client.restart()  # a nanny's restart writes it again
    assert _environment() == before


def _environment() -> dict[str, str]:
    """This process's environment but distributed's own marker for process titles (``__DASK_PARENT_PID``)."""
    return {key: value for key, value in os.environ.items() if not key.startswith("__DASK")}
