"""Fits waiting for a fit slot on one worker while another worker's slot is free: moved there.

dask places a task on a worker when it becomes ready, among the workers that offer the resources it
asks (a fit asks for ``fit``, `workers.shards.FIT_RESOURCE`, and each worker offers one), and a task
whose worker's slot is taken waits *on that worker*. dask's work stealing, which would move it, counts
threads, not resources: a worker with more threads than tasks is never a victim. So after a worker
dies, the fits submitted while its replacement starts (a few seconds) all queue on the survivors, and
each waits there for the fit before it to end, minutes or hours, while the replacement sits idle.
Seen in tests/workers/test_recovery.py and reproduced by tests/workers/test_fit_balance.py.

`balance_fits` runs on the scheduler (``Client.run_on_scheduler``) and asks dask's stealing extension to
move each such waiting task to a worker whose slot is free. The move is dask's own protocol: the worker
holding the task gives it up only if it has not started (a started fit is never moved; the request is
then refused and nothing changes), and the scheduler then sends it to the new worker. The fit watchdog
(`service.app`) calls it every round, through `workers.fits.Fits.balance`.
"""

from __future__ import annotations

from distributed.core import Status


def _slots_used(worker, resource: str) -> float:
    """How much of ``resource`` the tasks processing on ``worker`` ask for (started or waiting). O(tasks)."""
    return sum((ts.resource_restrictions or {}).get(resource, 0) for ts in worker.processing)


def _movable(ts, resource: str) -> bool:
    """Whether ``ts`` asks for ``resource`` and nothing else ties it to its worker (no worker or host
    restriction). O(1)."""
    return bool(ts.resource_restrictions and resource in ts.resource_restrictions
                and not ts.worker_restrictions and not ts.host_restrictions)


def balance_fits(resource: str, dask_scheduler=None) -> list[tuple[str, str, str]]:
    """On the scheduler: ask to move each task that waits for ``resource`` on a worker whose slots are
    taken to a running worker with a free slot (module note). Returns ``(key, from, to)`` of each move
    asked; the worker refuses one whose task has meanwhile started. Nothing without dask's stealing
    extension. O(tasks processing on the workers that offer ``resource``)."""
    stealing = dask_scheduler.extensions.get("stealing")
    if stealing is None:
        return []
    offering = [ws for ws in dask_scheduler.workers.values()
                if ws.resources.get(resource, 0) > 0 and ws.status == Status.running]
    free = {ws: ws.resources[resource] - _slots_used(ws, resource) for ws in offering}
    moves: list[tuple[str, str, str]] = []
    for victim in offering:
        if free[victim] >= 0:
            continue
        started = set(victim.executing)  # as its last heartbeat said; a started task's move is refused anyway
        waiting = sorted((ts for ts in victim.processing if _movable(ts, resource) and ts not in started
                          and ts not in stealing.in_flight), key=lambda ts: str(ts.key))
        for ts in waiting:
            if free[victim] >= 0:
                break
            need = ts.resource_restrictions[resource]
            thief = max((ws for ws in offering if ws is not victim), key=lambda ws: free[ws], default=None)
            if thief is None or free[thief] < need:
                return moves
            stealing.move_task_request(ts, victim, thief)
            free[thief] -= need
            free[victim] += need
            moves.append((str(ts.key), victim.address, thief.address))
    return moves


__all__ = ["balance_fits"]
