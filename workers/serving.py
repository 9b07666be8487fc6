"""Serving on the cluster: one call (`Serving.run`) for every serving operation, each a typed object
(`Operation`; the operations themselves: `workers.operations`).

An operation holds its arguments as fields and says what one of its tasks computes on a worker
(`Operation.task`) and in which `Lane` it runs: projections ahead of everything (`PROJECTION`),
pre-images and tuned denoising behind them, one per worker, in a thread of lowered OS priority and
stopped with their request (`PREIMAGE`), the rest at dask's default (`PLAIN`). `Serving` places the
tasks, waits for them with the request's deadline and disconnection watched (`workers.watch`), and
when the request ends cancels those not run and raises its stop flag (`store.stop_flags`) so that the
running ones stop at their next step. Blocking: the service calls `Serving.run` from a thread pool.
`Serving.start` sends an operation that outlives its request (a background image job).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from dask.distributed import fire_and_forget

from store.stop_flags import StopFlags
from workers.dask_cluster import PREIMAGE_RESOURCE, DaskCluster
from workers.priority import run_niced
from workers.settings import tune_store
from workers.shards import scheduler_workers
from workers.watch import RequestEnded, Watch, watched_results

#: dask priorities of serving tasks: projections run before queued pre-image blocks (higher first).
SERVING_PRIORITY = 10
PREIMAGE_PRIORITY = -10
#: Pre-image blocks of one request on the cluster at a time, per worker offering `PREIMAGE_RESOURCE`: one
#: running and one waiting for it, the next submitted as one ends (`watched_results`).
BLOCKS_IN_FLIGHT = 2
#: seconds between two questions to the scheduler about which workers offer `PREIMAGE_RESOURCE`
OFFER_KEPT_S = 30.0


@dataclass(frozen=True)
class Lane:
    """How an operation's tasks are placed: their dask ``priority`` (higher first); ``preimage``: on the
    workers offering `PREIMAGE_RESOURCE` where some do (at most one such task each), in a thread of
    lowered OS priority (`workers.priority.run_niced`); ``stoppable``: a task still running when its request
    ends is asked to stop through the request's stop flag, not only the queued ones cancelled."""

    priority: int = 0
    preimage: bool = False
    stoppable: bool = False


#: projections: ahead of queued pre-image blocks
PROJECTION = Lane(priority=SERVING_PRIORITY)
#: pre-images and tuned denoising: behind projections, one per worker, niced, stopped with their request
PREIMAGE = Lane(priority=PREIMAGE_PRIORITY, preimage=True, stoppable=True)
#: the rest: dask's default priority, any thread
PLAIN = Lane()
#: as `PLAIN`, stopped with its request (the one-call image denoising)
PLAIN_STOPPABLE = Lane(stoppable=True)


class Operation:
    """A serving operation: its arguments as the fields of a frozen dataclass, what one task computes on a
    worker (`task`), its `lane` and the prefix of its tasks' dask keys (`key`, what the scheduler shows).

    `run` (what `Serving.run` calls) submits the operation as one task and answers its result; an
    operation of several tasks overrides `run` and sends them through `Serving.results`."""

    key: ClassVar[str] = "serve"
    lane: ClassVar[Lane] = PLAIN

    def task(self, data_dir: str, stop: str | None) -> Any:
        """What one task computes, on a worker (data folder ``data_dir``); ``stop``: the request's stop flag
        (`store.stop_flags`) in a stoppable lane, else None."""
        raise NotImplementedError

    def run(self, serving: Serving, watch: Watch | None) -> Any:
        """The operation's answer: its one task's result (`Serving.results`). Blocking."""
        return serving.results(self, [self], watch)[0]


def run_task(operation: Operation, data_dir: str, stop: str | None) -> Any:
    """On a worker: ``operation.task``, in a thread of lowered OS priority in the pre-image lane."""
    tune_store(data_dir)  # an object store's read cache: this worker's settings
    if operation.lane.preimage:
        return run_niced(operation.task, data_dir, stop)
    return operation.task(data_dir, stop)


class Serving:
    """Serving operations on a started ``cluster`` whose workers read the data folder ``data_dir``.

    ``local_projections``: ``(values, work)``: a projection of a model of at most ``values`` training
    values (points x features) asking at most ``work`` (rows x values) is computed in this process (the
    model cached here as on a worker) instead of on the cluster; ``(0, 0)`` sends every projection to the
    cluster. ``projections`` counts where they ran (the service's metrics)."""

    def __init__(self, cluster: DaskCluster, data_dir: str, local_projections: tuple[int, int] = (0, 0)):
        self.cluster = cluster
        self.data_dir = data_dir
        self.local_projections = tuple(int(v) for v in local_projections)
        self.projections = {"api": 0, "workers": 0}  # projections computed here and on the cluster (metrics)
        self._offer: tuple[float, dict | None, int] | None = None

    def run(self, operation: Operation, watch: Watch | None = None) -> Any:
        """The answer of ``operation`` (`Operation.run`); ``watch``: the request's deadline and
        disconnection (`workers.watch.RequestEnded` when it ends first). Blocking."""
        return operation.run(self, watch)

    def projects_here(self, model_values: int, n_rows: int) -> bool:
        """Whether a projection of ``n_rows`` rows through a model of ``model_values`` training values
        (points x features) runs in this process (``local_projections``). O(1)."""
        values, work = self.local_projections
        return 0 < model_values <= values and n_rows * model_values <= work

    def submit(self, operation: Operation, stop: str | None = None):
        """One task of ``operation`` on the cluster, in its lane; its future."""
        lane = operation.lane
        return self.cluster.running_client.submit(
            run_task, operation, self.data_dir, stop, key=f"{operation.key}-{uuid.uuid4().hex}", pure=False,
            priority=lane.priority, resources=self._preimage_offer()[0] if lane.preimage else None)

    def start(self, operation: Operation) -> None:
        """One task of ``operation`` on the cluster that outlives the request and the client that sent it
        (``fire_and_forget``): its answer goes where the operation keeps it (a background image job's
        store), not to the caller. Returns once submitted."""
        fire_and_forget(self.submit(operation))

    def results(self, operation: Operation, tasks: Iterable[Operation], watch: Watch | None,
                window: int | None = None) -> list:
        """The results of ``tasks`` (operations of ``operation``'s lane; a list, or with ``window`` a stream
        submitted as drawn, at most ``window`` in flight), in order, watched (`watched_results`); when the
        request ends in a stoppable lane its stop flag is raised so that a running task stops at its next
        step instead of running to its end. Blocking."""
        token = StopFlags.new_token() if operation.lane.stoppable else None
        if window is None:
            futures: Any = [self.submit(task, token) for task in tasks]
        else:
            futures = (self.submit(task, token) for task in tasks)
        try:
            return watched_results(self.cluster.running_client, futures, watch, window=window)
        except RequestEnded:
            if token is not None:
                StopFlags(self.data_dir).raise_flag(token)
            raise

    def preimage_workers(self) -> int:
        """Workers that run pre-image tasks (those offering the resource, else all; at least 1), asked of
        the scheduler at most every `OFFER_KEPT_S` seconds."""
        return self._preimage_offer()[1]

    def _preimage_offer(self) -> tuple[dict | None, int]:
        """``({"preimage": 1} if some worker offers it else None, workers running pre-images)``, kept
        `OFFER_KEPT_S` seconds."""
        now = time.monotonic()
        if self._offer is None or now - self._offer[0] > OFFER_KEPT_S:
            workers = scheduler_workers(self.cluster.running_client)
            offering = sum(PREIMAGE_RESOURCE in (w.get("resources") or {}) for w in workers.values())
            self._offer = (now, {PREIMAGE_RESOURCE: 1} if offering else None, max(1, offering or len(workers)))
        return self._offer[1], self._offer[2]
