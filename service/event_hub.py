"""One watcher per model per API process for the ``/events`` streams (issue 30, item 8).

Each stream used to read its model's record from disk every `EVENT_POLL_S` seconds: 300 streams were
1,200 record reads a second, and pushed ``/healthz`` to a 1 s median. Now the streams of one model share
one `_Watcher`, which reads the record once per interval (in a worker thread) and wakes its subscribers
only when the record changed; a subscriber turns the record into its own events. The disk reads per
second no longer depend on the number of streams, and at most ``max_event_streams`` are open at once
(`EventHub.reserve`: one more is a 503 with ``Retry-After``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from starlette.concurrency import run_in_threadpool

from service.errors import ApiError
from store.errors import NotFound
from store.jobs.records import TERMINAL

#: Seconds between two reads of a watched model's record.
EVENT_POLL_S = 0.25


class StreamsBusy(ApiError):
    """503: ``limit`` event streams are open in this process."""

    RETRY_AFTER_S = 5

    def __init__(self, limit: int):
        super().__init__(503, "unavailable", f"{limit} event streams are open, the limit of this service "
                         "(KPCA_MAX_EVENT_STREAMS); close one, or poll GET /v1/models/{name}, and retry", "name")
        self.headers = {"Retry-After": str(self.RETRY_AFTER_S)}


class Slot:
    """One reserved stream of an `EventHub`; `release` (or garbage collection) gives it back once."""

    def __init__(self, hub: EventHub):
        self._hub: EventHub | None = hub  # None once released

    def release(self) -> None:
        """Give the slot back (a second call does nothing)."""
        hub, self._hub = self._hub, None
        if hub is not None:
            hub.open -= 1

    def __del__(self) -> None:  # a stream whose generator never ran (its client left first)
        self.release()


class EventHub:
    """The event watchers of one app: `reserve` a slot (the cap), then `watch` a model's record.

    ``read`` is the record reader (``ModelRegistry.get``: raises `NotFound`); ``reads`` counts its calls
    (exported as ``kpca_event_record_reads_total``), ``open`` the streams open."""

    def __init__(self, read: Callable, max_streams: int, poll_s: float = EVENT_POLL_S):
        self.read = read
        self.max_streams = max_streams
        self.poll_s = poll_s
        self.open = 0
        self.reads = 0
        self._watchers: dict[str, _Watcher] = {}

    def reserve(self) -> Slot:
        """A stream slot, or `StreamsBusy` (503) when ``max_streams`` are open. Cost O(1)."""
        if self.open >= self.max_streams:
            raise StreamsBusy(self.max_streams)
        self.open += 1
        return Slot(self)

    def watch(self, name: str) -> _Subscription:
        """A subscription to model ``name``'s record (``async with``), sharing the model's watcher with
        every other stream of it in this process. Cost O(1); the watcher's reads are shared."""
        return _Subscription(self, name)

    async def _read_record(self, name: str):
        self.reads += 1
        return await run_in_threadpool(self.read, name)


class _Watcher:
    """Reads one model's record every ``poll_s`` while it has subscribers; publishes it when it changed."""

    def __init__(self, hub: EventHub, name: str):
        self.hub, self.name = hub, name
        self.subscribers = 0
        self.version = 0
        self.record = None  # the latest record; None once the model is deleted
        self.error: BaseException | None = None
        self.cache: dict = {}  # what subscribers made of the current record, shared (`_Subscription.shared`)
        self.changed = asyncio.Condition()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            try:
                record, error = await self.hub._read_record(self.name), None
            except NotFound:
                record, error = None, None
            except Exception as exc:  # passed to the subscribers, which raise it as the old streams did
                record, error = None, exc
            if self.version == 0 or error is not None or record != self.record:
                async with self.changed:
                    self.record, self.error = record, error
                    self.version += 1
                    self.cache = {}
                    self.changed.notify_all()
            if error is not None or record is None or record.status in TERMINAL:
                return  # nothing more will change; a later subscriber starts a new watcher
            await asyncio.sleep(self.hub.poll_s)


class _Subscription:
    """One stream's view of a `_Watcher`: `next` waits for a record newer than the last one seen."""

    def __init__(self, hub: EventHub, name: str):
        self.hub, self.name = hub, name
        self.seen = 0
        self.watcher: _Watcher | None = None

    async def __aenter__(self) -> _Subscription:
        watcher = self.hub._watchers.get(self.name)
        if watcher is None or watcher.task.done():
            watcher = self.hub._watchers[self.name] = _Watcher(self.hub, self.name)
        watcher.subscribers += 1
        self.watcher = watcher
        return self

    def _entered(self) -> _Watcher:
        """The model's watcher, which `__aenter__` sets: a subscription is used inside ``async with``."""
        if self.watcher is None:
            raise RuntimeError(f"a subscription to {self.name!r} used outside its async with")
        return self.watcher

    async def __aexit__(self, *exc) -> None:
        watcher = self._entered()
        watcher.subscribers -= 1
        if watcher.subscribers == 0 and self.hub._watchers.get(self.name) is watcher:
            del self.hub._watchers[self.name]
            watcher.task.cancel()

    async def next(self, timeout: float):
        """``(changed, record)``: the watcher's record once it is newer than the last one this
        subscription saw (``changed`` True), or after ``timeout`` seconds without news (False, the
        same record). Raises what reading the record raised (other than `NotFound`, a None record)."""
        watcher = self._entered()
        async with watcher.changed:
            if watcher.version == self.seen:
                try:
                    await asyncio.wait_for(watcher.changed.wait(), timeout)
                except TimeoutError:
                    return False, watcher.record
            self.seen = watcher.version
            if watcher.error is not None:
                raise watcher.error
            return True, watcher.record

    def shared(self, key, make: Callable):
        """``make()``, computed once per record (the one `next` returned) and ``key`` for all the
        subscriptions of the model: streams that had seen the same get the same events, encoded once."""
        cache = self._entered().cache
        if key not in cache:
            cache[key] = make()
        return cache[key]
