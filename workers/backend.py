"""The service's handle on the dask cluster: submit fits, run projections.

The authoritative job record lives in `store/` (written by the worker that
runs the fit); this object only places work on the cluster. Fits are submitted
with an explicit key and released with ``fire_and_forget`` so they outlive the
request (and the client) that started them (dask/distributed #2766, #3890).
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import numpy as np
from dask.distributed import Client, LocalCluster, fire_and_forget

from workers import fit as fit_task
from workers import project as project_task

log = logging.getLogger(__name__)

# BLAS threads per worker process: the embedded cluster must not oversubscribe
# the machine (workers x threads x BLAS threads <= cores).
_SINGLE_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMBA_NUM_THREADS": "1",
}


class Backend:
    """Submit fits and projections to an embedded or external dask cluster.

    Parameters
    ----------
    data_dir : path
        Root of the local data folder (shared with the workers).
    scheduler : str or None
        Address of an external scheduler (``tcp://host:8786``); ``None`` starts
        an in-process `LocalCluster` of ``n_workers`` single-threaded processes.
    n_workers : int
        Worker processes of the embedded cluster.
    """

    def __init__(self, data_dir: str | Path, scheduler: str | None = None, n_workers: int = 2):
        self.data_dir = str(Path(data_dir).resolve())
        self.scheduler = scheduler
        self.n_workers = n_workers
        self.cluster: LocalCluster | None = None
        self.client: Client | None = None

    def start(self) -> "Backend":
        """Connect to the configured scheduler, or start the embedded cluster."""
        if self.scheduler:
            self.client = Client(self.scheduler, set_as_default=False)
        else:
            import dask

            with dask.config.set({"distributed.nanny.pre-spawn-environ": _SINGLE_THREAD_ENV}):
                self.cluster = LocalCluster(
                    n_workers=self.n_workers,
                    threads_per_worker=1,
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address=None,
                    memory_limit=0,
                )
            self.client = Client(self.cluster, set_as_default=False)
        log.info("dask backend ready: %s", self.client)
        return self

    def close(self) -> None:
        """Close the client and, if embedded, the cluster."""
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.cluster is not None:
            self.cluster.close()
            self.cluster = None

    def __enter__(self) -> "Backend":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def submit_fit(self, model_name: str) -> None:
        """Start fitting the model whose record (status ``queued``) is in the store.

        Returns at once; the worker writes status, progress and checkpoints.
        """
        future = self.client.submit(
            fit_task.run_fit, self.data_dir, model_name, key=f"fit-{model_name}-{uuid.uuid4().hex}", pure=False
        )
        fire_and_forget(future)

    def project(self, model_name: str, rows: np.ndarray) -> np.ndarray:
        """Kernel principal components of ``rows`` (shape (m, n_features)) -> (m, r).

        Blocking: call it from a thread pool, not the event loop.
        """
        future = self.client.submit(
            project_task.project_rows, self.data_dir, model_name, rows, pure=False
        )
        return future.result()
