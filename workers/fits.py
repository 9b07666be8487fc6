"""Fits on the cluster: submit a job's fit, move fits waiting for a busy worker, resubmit the ones that
lost their runner.

The authoritative job record lives in `store/` (written by the worker that runs the fit); this module
only places fits on the cluster. Fits are submitted with an explicit key and released with
``fire_and_forget`` so they outlive the request (and the client) that started them (dask/distributed
#2766, #3890).
"""

from __future__ import annotations

import logging
import uuid

from dask.distributed import Future, fire_and_forget

from store.atomic import try_file_lock
from store.places import local_folder
from store.timestamps import seconds_since
from workers import cluster as cluster_task
from workers import fit as fit_task
from workers.dask_cluster import DaskCluster
from workers.fit_balance import balance_fits
from workers.shards import FIT_RESOURCE

log = logging.getLogger(__name__)

FIT_TASKS = {"models": fit_task.run_fit, "clusterings": cluster_task.run_clustering}  # by registry kind_folder

#: A queued job younger than this is not recovered by `Fits.recover`: its submitter's task may still be
#: on its way to the scheduler.
SUBMITTED_RECENTLY_S = 10.0


def _fit_tasks(prefix: str, dask_scheduler=None) -> set[str]:
    """On the scheduler (``Client.run_on_scheduler``): the job names of the fit tasks it holds not yet
    finished, from their keys ``{prefix}{name}-{hex}`` (`Fits.submit`). O(tasks)."""
    return {key[len(prefix):].rsplit("-", 1)[0] for key, task in dask_scheduler.tasks.items()
            if isinstance(key, str) and key.startswith(prefix) and task.state not in ("memory", "erred", "forgotten")}


class Fits:
    """The fits (of models, of clusterings) this process placed on ``cluster``, whose workers read and
    write the data folder ``data_dir``."""

    def __init__(self, cluster: DaskCluster, data_dir: str):
        self.cluster = cluster
        self.data_dir = data_dir
        self._futures: dict[tuple[str, str], Future] = {}  # (kind, name) -> the Future of its latest submitted fit

    def submit(self, name: str, kind: str = "models") -> None:
        """Start the job whose record (status ``queued``) is in the store: a model's fit (``kind``
        ``"models"``) or a clustering (``"clusterings"``), the registry's ``kind_folder``.

        Returns at once; the worker writes status, progress and checkpoints.
        The task survives this client (``fire_and_forget``); if its worker dies,
        dask runs it again elsewhere and it resumes from the last checkpoint.
        """
        future = self.cluster.running_client.submit(
            FIT_TASKS[kind], self.data_dir, name, key=f"fit-{kind}-{name}-{uuid.uuid4().hex}",
            pure=False, resources=self.cluster.fit_resources(),
        )
        fire_and_forget(future)
        self._futures[(kind, name)] = future

    def balance(self) -> list[tuple[str, str, str]]:
        """Move the fits that wait for a fit slot on one worker while another worker's slot is free
        (`workers.fit_balance`: after a worker died, the fits submitted while its replacement started all
        queued on the survivors). ``(key, from, to)`` of each move asked. One scheduler call."""
        return self.cluster.running_client.run_on_scheduler(balance_fits, FIT_RESOURCE)

    def recover(self, registry, recent_s: float = SUBMITTED_RECENTLY_S) -> list[str]:
        """Resubmit the jobs of a registry (models, clusterings) that should be running but are not:
        returns their names.

        A job whose record is ``queued`` or ``running`` but whose fit lease no
        live process holds, and which has no task on the cluster (submitted by
        this process or by another client of the scheduler: the service's other
        API processes), lost its runner (the service restarted, or a worker died
        and dask gave up on the task). Its new run resumes from the last
        checkpoint. A job queued less than ``recent_s`` seconds ago is left to the
        process that queued it: its submission may not have reached the scheduler
        yet (it travels on another connection than the query). One recovery at a
        time among the processes sharing the data folder (an flock), so two never
        resubmit the same job; with an object store, among this machine's
        (`store.places.local_folder`): API processes on two machines may both
        resubmit a job, whose fit lease then lets one run. Cost: one registry
        listing and one scheduler query.
        """
        with try_file_lock(local_folder(self.data_dir) / ".recover.lock") as ours:  # this machine's, on objects
            return self._recover(registry, recent_s) if ours else []

    def _recover(self, registry, recent_s: float) -> list[str]:
        kind = registry.kind_folder
        on_cluster = None  # the names with a fit task on the scheduler, asked once and only if needed
        resubmitted = []
        for record in registry.list():
            name = record.name
            if record.status not in ("queued", "running"):
                self._futures.pop((kind, name), None)
                continue
            future = self._futures.get((kind, name))
            if future is not None and not future.done():
                continue
            if record.status == "queued" and seconds_since(record.updated_at) < recent_s:
                continue
            try:
                if registry.fit_alive(name):
                    continue
            except Exception:  # deleted meanwhile
                continue
            if on_cluster is None:
                on_cluster = self.cluster.running_client.run_on_scheduler(_fit_tasks, f"fit-{kind}-")
            if name in on_cluster:
                continue
            log.warning("fit of %s %s has no live runner; resubmitting (it resumes from its checkpoint)",
                        registry.kind, name)
            self.submit(name, kind)
            resubmitted.append(name)
        return resubmitted
