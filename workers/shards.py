"""The shards of a sharded fit as dask actors (docs/scaling.md): one `ShardActor` per worker, each
holding its rows' columns of the solver state for the whole fit, `ActorShards` (the
`kpca.sharded.messages.Shards` that sends each call to them) and the coordinator's `ActorGroup` over
them.

An actor (``client.submit(ShardActor, ..., actor=True, workers=[address])``) is a Python object kept
in one worker's memory; its method calls go from the coordinator to that worker directly, without
the scheduler, and run one at a time on the worker's actor thread, so the worker's task threads stay
free for projections. A `ShardActor` opens its own rows from the store (`store.datasets.segments.RowWindow`
over the data set version: only its chunks are read) and reads and writes its own part of each
checkpoint (`store.CheckpointStore.save_part`, `load_columns`), so nothing l-sized crosses the
network, during a pass or at a checkpoint.

A worker lost while it holds a shard makes its calls fail (distributed 2026.8: ``OSError: Unable to
contact Actor's worker``, or ``RuntimeError: Worker holding Actor was lost``); `ActorGroup` turns
that into `ShardLost`, on which the coordinator (`workers.sharded_fit`) starts over from the last
consistent checkpoint on the workers that remain.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from typing import TypeVar

import numpy as np

from kpca._threads import map_threads, tile_threads
from kpca.kernels import KernelSpec
from kpca.rows import Centering, KernelRows
from kpca.sharded.messages import Gathered, SegmentUpdate, ShardCall, shard_call, summed
from kpca.sharded.shards import Shard, ShardGroup
from kpca.solvers import KHAState
from store.datasets.segments import RowWindow
from store.places import checkpoints_at, datasets_at
from workers.placement import fit_threads, machine_cores
from workers.priority import fit_nice, keep_below_process
from workers.settings import tune_store

__all__ = ["ShardLost", "ShardActor", "ActorShards", "ActorGroup", "fit_workers", "scheduler_workers", "host_of",
           "COLUMN_KEYS"]

R = TypeVar("R")
T = TypeVar("T")

FIT_RESOURCE = "fit"  # the resource a worker offers for fits: at most one fit each (`workers.backend`)
# what a shard's checkpoint part holds: A, AK, the guard vectors and LOBPCG's previous step (Rayleigh-Ritz
# passes), B, BK (KHA-SMD)
COLUMN_KEYS = ("A", "AK", "guard_A", "guard_AK", "previous_A", "previous_AK", "B", "BK", "centering_column_means")


class ShardLost(RuntimeError):
    """A worker holding a shard of the fit was lost (or cannot be reached); ``addresses`` names it."""

    def __init__(self, message: str, addresses=()):
        super().__init__(message)
        self.addresses = tuple(addresses)


def host_of(address: str) -> str:
    """The machine part of a dask address (``tcp://10.0.0.5:40123`` -> ``tcp://10.0.0.5``)."""
    return address.rsplit(":", 1)[0]


def scheduler_workers(client) -> dict[str, dict]:
    """The scheduler's workers now, ``{address: info}`` (resources, threads, ...): one query of the
    scheduler, answered to this call alone.

    Not ``client.scheduler_info(n_workers=-1)["workers"]``: that fetches the workers into the client's
    shared copy and returns the copy, which the client's own periodic refresh (without the workers) can
    replace in between, so that it at times read no workers at all (distributed 2026.8; a sharded fit
    then placed no shards, tests/workers/test_scheduler_workers.py)."""
    return dict(client.sync(client.scheduler.identity, n_workers=-1).get("workers", {}))


def fit_workers(client) -> list[str]:
    """Addresses of the workers that offer the ``fit`` resource (every worker if none does), sorted."""
    workers = scheduler_workers(client)
    offering = [a for a, w in workers.items() if FIT_RESOURCE in (w.get("resources") or {})]
    return sorted(offering or workers)


class ShardActor(Shard):
    """A `kpca.sharded.shards.Shard` over rows ``first .. stop-1`` of a data set version, opened from the store
    on the worker it lives on, with its part of the fit's checkpoints.

    Parameters
    ----------
    data_dir : str
        The data folder the workers share.
    dataset, version : str, int or None
        The data set version the fit runs on (None: the latest committed, as `store.DatasetStore.open_array`).
    kernel : dict
        The resolved kernel (`kpca.kernels.KernelSpec.to_dict`).
    precision : str
        ``kernel_precision`` of the fit (float64 or float32).
    first, stop : int
        The shard's rows.
    unit_rows : int
        The reduction unit (`kpca.sharded.passes.reduction_unit`).
    kind_folder, kind : str
        The job registry's folder and kind (`store.jobs.registry.JobRegistry`): where the checkpoints are.
    origin : list of float or None
        The origin of the rows' local coordinates (`kpca.rows.KernelRows`), the coordinator's: the
        shards exchange points in them.
    share : int
        What shares its machine's cores: the fit's shards on that machine times the fits running. Its
        kernel tiles run on ``cores // share`` threads (`workers.placement.fit_threads`), so the shards of
        a fit alone on a machine use all of its cores, as a one-worker fit does.
    """

    def __init__(self, data_dir: str, dataset: str, version: int | None, kernel: dict, precision: str, first: int,
                 stop: int, unit_rows: int, kind_folder: str = "models", kind: str = "model", share: int = 1,
                 origin: list | None = None):
        tune_store(data_dir)  # an object store's read cache: this worker's settings
        source = RowWindow(datasets_at(data_dir).open_array(dataset, version), int(first), int(stop))
        dtype = np.dtype(precision)
        super().__init__(KernelRows(source, KernelSpec.from_dict(kernel), dtype=dtype, compute_dtype=dtype,
                                    origin=None if origin is None else np.asarray(origin, dtype=np.float64)),
                         first, unit_rows)
        self._checkpoints = checkpoints_at(data_dir, kind_folder, kind)
        self.threads = fit_threads(machine_cores(), share)

    def run_calls(self, updates: Sequence[SegmentUpdate], calls: Sequence[ShardCall]) -> list:
        """Apply the segment ``updates`` in order (`kpca.sharded.shards.Shard.apply`), then run ``calls``
        (`kpca.sharded.messages.ShardCall` s of this shard's methods) in order; their replies. One message
        of `ActorShards` carries a segment's update with the call that follows it."""
        with tile_threads(self.threads):
            for update in updates:
                self.apply(update)
            return [call.run(self) for call in calls]

    def kernel_threads(self) -> int:
        """Threads of this shard's kernel tiles in its calls (`kpca._threads.map_threads`)."""
        return map_threads()

    def pid(self) -> int:
        """The worker process's id (monitoring, fault-injection tests)."""
        return os.getpid()

    def lower_priority(self, nice: int) -> int | None:
        """Run this worker's actor thread, where every shard's calls run, ``nice`` below the worker's
        priority (`workers.priority.keep_below_process`): shards are fits. Its niceness now, or None."""
        return keep_below_process(nice)

    def save(self, job: str, pass_index: int, r: int, guards: int = 0, previous: bool = False) -> None:
        """Write this shard's part of checkpoint ``pass_index`` of ``job``: A, AK (r rows), the ``guards``
        guard vectors (guard_A, guard_AK), LOBPCG's ``previous`` step (previous_A, previous_AK), B, BK
        (KHA-SMD), and the centring's column means. O(d size) written."""
        k = r + guards
        Z, ZK, centering = self.Z, self.ZK, self.rows.centering
        if Z is None or ZK is None or centering is None:  # a checkpoint follows a pass, which needs all three
            raise RuntimeError(f"shard of rows {self.first}..{self.stop - 1}: nothing to save before its start")
        columns = {"A": Z[:r], "AK": ZK[:r], "centering_column_means": centering.column_means}
        if guards:
            columns.update(guard_A=Z[r:k], guard_AK=ZK[r:k])
        if previous:
            if self.previous is None:  # the caller asks for it only where LOBPCG's step has been taken
                raise RuntimeError(f"shard of rows {self.first}..{self.stop - 1}: no previous step to save")
            columns.update(previous_A=self.previous[0], previous_AK=self.previous[1])
        if Z.shape[0] > k:
            columns.update(B=Z[k:], BK=ZK[k:])
        self._checkpoints.save_part(job, pass_index, self.first, self.stop, columns)

    def load(self, job: str, pass_index: int, grand_mean: float, mean_diagonal: float, smd: bool,
             guards: bool = False, previous: bool = False) -> None:
        """Take this shard's columns from checkpoint ``pass_index`` of ``job`` (sharded on any split,
        or whole): the state (with the guard vectors where ``guards``, LOBPCG's previous step where
        ``previous``, B and BK for KHA-SMD) and the centring. O(d size) read."""
        skip = (() if guards else ("guard_A", "guard_AK")) + (() if previous else ("previous_A", "previous_AK")) + \
            (() if smd else ("B", "BK"))
        columns = self._checkpoints.load_columns(job, pass_index, self.first, self.stop,
                                                 [k for k in COLUMN_KEYS if k not in skip])
        stacked = [key for key in ("A", "guard_A", "B") if key in columns]
        Z, ZK = (np.concatenate([columns[key + suffix] for key in stacked]) for suffix in ("", "K"))
        self.set_columns(Z, ZK, columns["centering_column_means"], grand_mean, mean_diagonal)
        if previous:
            self.previous = (columns["previous_A"], columns["previous_AK"])


class ActorShards:
    """`kpca.sharded.messages.Shards` on dask workers: one `ShardActor` each (``actors``, on
    ``addresses``).

    Each call is sent to every shard at once and the replies collected in shard order, so the shards
    compute in parallel and the reductions keep their fixed order. Every message is one
    `ShardActor.run_calls`: an update (`apply`) returns nothing, so it is not sent on its own but held
    and sent with the next call, which every shard runs after it; `each_then` sends two calls in one
    message. ``round_trips`` counts the messages to each shard. A worker lost, or one that cannot be
    reached, is `ShardLost`.
    """

    def __init__(self, actors: list, addresses: list[str]):
        self.actors, self.addresses = list(actors), list(addresses)
        self._pending: list[SegmentUpdate] = []  # updates applied by the coordinator, not yet sent
        self.round_trips = 0

    def __len__(self) -> int:
        return len(self.actors)

    def each(self, call: ShardCall[R]) -> list[R]:
        """``call`` on every shard, after the updates held; the replies in shard order."""
        return [replies[0] for replies in self._collect(self._fire([[call]] * len(self.actors)))]

    def each_with(self, calls: Sequence[ShardCall[R]]) -> list[R]:
        """``calls[i]`` on shard i, after the updates held; the replies in shard order."""
        return [replies[0] for replies in self._collect(self._fire([[call] for call in calls]))]

    def each_then(self, first: ShardCall[R], then: ShardCall[T]) -> list[tuple[R, T]]:
        """``first``, then ``then``, on every shard in one message (after the updates held); the pairs of
        replies in shard order."""
        return [(replies[0], replies[1]) for replies in self._collect(self._fire([[first, then]] * len(self.actors)))]

    def apply(self, update: SegmentUpdate) -> None:
        """Hold ``update`` for every shard: it goes with the next call, which every shard runs after it."""
        self._pending.append(update)

    def drop_pending(self) -> None:
        """Forget the updates held (the shards' columns are released with them: nothing reads them)."""
        self._pending = []

    def _fire(self, calls_per_shard: list[list[ShardCall]]) -> list:
        """Send shard i its ``calls_per_shard[i]`` after the held updates, in one message each; the futures
        of their replies."""
        updates, self._pending = self._pending, []
        futures = []
        for i, (actor, calls) in enumerate(zip(self.actors, calls_per_shard)):
            try:
                futures.append(actor.run_calls(updates, calls))
            except RuntimeError as exc:  # "Worker holding Actor was lost"
                raise ShardLost(f"shard {i} on {self.addresses[i]}: {exc}", [self.addresses[i]]) from exc
        self.round_trips += 1
        return futures

    def _collect(self, futures: list) -> list:
        out = []
        for i, future in enumerate(futures):
            try:
                out.append(future.result())
            except OSError as exc:  # "Unable to contact Actor's worker"
                raise ShardLost(f"shard {i} on {self.addresses[i]}: {exc}", [self.addresses[i]]) from exc
            except RuntimeError as exc:
                if "Actor" in str(exc):
                    raise ShardLost(f"shard {i} on {self.addresses[i]}: {exc}", [self.addresses[i]]) from exc
                raise
        return out


class ActorGroup(ShardGroup):
    """A `kpca.sharded.shards.ShardGroup` whose shards are `ShardActor` s on dask workers (``shards``, an
    `ActorShards`).

    KHA-SMD's ``products`` go with each ``gather`` (`ActorShards.each_then`), and each segment's update
    with the next call: a segment of the stochastic passes then costs one round trip (``gather`` with
    ``products`` and the previous update) and a block one more (``norms``), instead of four messages.
    ``round_trips`` counts the messages to each shard. `close` releases the actors (their workers free
    the columns).
    """

    shards: ActorShards

    def __init__(self, futures: list, actors: list, bounds, addresses: list[str], kernel: KernelSpec,
                 n_components: int, d: int, rows_dtype):
        super().__init__(ActorShards(actors, addresses), kernel, n_components, d, rows_dtype=rows_dtype, bounds=bounds)
        self.futures, self.addresses = futures, list(addresses)
        self._products: list | None = None  # each shard's ``products`` parts, asked with the last ``gather``

    @property
    def round_trips(self) -> int:
        """Messages sent to each shard so far."""
        return self.shards.round_trips

    @classmethod
    def start(cls, client, addresses: list[str], bounds, *, data_dir: str, dataset: str, version: int | None,
              kernel: KernelSpec, precision: str, unit_rows: int, n_components: int, d: int,
              kind_folder: str = "models", kind: str = "model", running: int = 1,
              origin: np.ndarray | None = None) -> ActorGroup:
        """One `ShardActor` per ``(address, bounds)``, created on that worker (and only there); ``running``
        fits share the cores (this one included), and each machine's cores are split among the shards
        on it (`ShardActor`'s ``share``). No address is `ShardLost`: the coordinator looks for workers
        again, then gives up saying what to do (`workers.sharded_fit.fit_sharded`)."""
        if not addresses:
            raise ShardLost("no fit worker is left to hold a shard of the fit")
        tag = uuid.uuid4().hex[:12]
        hosts = [host_of(address) for address in addresses]
        futures = [client.submit(ShardActor, data_dir, dataset, version, kernel.to_dict(), precision, first, stop,
                                 unit_rows, kind_folder, kind, max(1, running) * hosts.count(hosts[i]),
                                 None if origin is None else [float(v) for v in origin], actor=True, workers=[address],
                                 allow_other_workers=False, pure=False, key=f"shard-{tag}-{i}")
                   for i, (address, (first, stop)) in enumerate(zip(addresses, bounds))]
        try:
            actors = [future.result() for future in futures]
            group = cls(futures, actors, bounds, addresses, kernel, n_components, d, np.dtype(precision))
            # the shards run at a fit's priority, below serving
            group.shards.each(shard_call(ShardActor.lower_priority, fit_nice()))
            return group
        except Exception as exc:
            for future in futures:
                future.release()
            if isinstance(exc, ShardLost):
                raise
            if isinstance(exc, OSError) or "lost" in str(exc).lower():
                raise ShardLost(f"a worker was lost while the shards were placed: {exc}") from exc
            raise

    def gather(self, indices: np.ndarray) -> Gathered:
        """`kpca.sharded.shards.ShardGroup.gather`, with KHA-SMD's ``products`` asked in the same message
        (`products` then answers from them)."""
        if self.d <= self.iterated:
            self._products = None
            return super().gather(indices)
        replies = self.shards.each_then(shard_call(Shard.gather, indices),
                                        shard_call(Shard.products, self.n_components))
        self._products = [products for _, products in replies]
        return self.gathered(indices, [gathered for gathered, _ in replies])

    def products(self) -> np.ndarray:
        """``Z AK^T`` (d, r) summed over the shards in order: from the parts sent with the last `gather`
        where there are some."""
        if self._products is None:
            return super().products()
        parts, self._products = self._products, None
        self.bytes_in += sum(p.nbytes for shard_parts in parts for p in shard_parts)
        return summed(parts)

    def save(self, job: str, pass_index: int) -> None:
        """Every shard writes its part of checkpoint ``pass_index`` (the coordinator's manifest, written
        after this returns, makes the checkpoint a consistent cut)."""
        self.shards.each(shard_call(ShardActor.save, job, pass_index, self.n_components, self.guards,
                                    self.previous_rows > 0))

    def load(self, job: str, pass_index: int, state: KHAState) -> None:
        """Every shard reads its columns of checkpoint ``pass_index``; ``state`` the coordinator's (its
        centring's grand mean and mean diagonal, ``guard_rows`` and ``previous_rows``,
        `kpca.sharded.passes.coordinator_state`)."""
        grand, diag = Centering.scalars_of(state.centering)
        self.set_guards(int(state.guard_rows or 0))
        self.previous_rows = int(state.previous_rows or 0)
        self.shards.each(shard_call(ShardActor.load, job, pass_index, grand, diag, self.d > self.iterated,
                                    self.guards > 0, self.previous_rows > 0))
        self.grand_mean, self.mean_diagonal = grand, diag

    def close(self) -> None:
        """Release the actors (an update still held is dropped with their columns: nothing reads them)."""
        self.shards.drop_pending()
        for future in self.futures:
            future.release()
        self.futures = []
