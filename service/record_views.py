"""The JSON of job records' public views, kept per record version: a status poll costs a ``stat``.

A running fit's record grows by one history entry per pass; clients poll it many times per pass. Reading,
validating and re-serialising the whole record for each poll cost about 3 ms of the API process's
interpreter at 150 passes (bench/load.py spends 40 % of its requests on polls). `RecordViews` keeps
the encoded view under the record file's signature (`store.jobs.registry.JobRegistry.signature`:
inode, times and size, which every write changes, as every write is a new file renamed over the old);
the signature is taken before the record is read, so a view is never kept under a signature newer than
its content.
"""

from __future__ import annotations

from collections.abc import Callable

from store.errors import NotFound
from store.jobs.object_registry import ObjectJobRegistry
from store.kept import KeptBySignature

#: views kept at most (the least recently used is dropped)
MAX_VIEWS = 256


class RecordViews:
    """Encoded public views of job records by ``(kind, name)``, each under the signature it was made at."""

    def __init__(self, max_views: int = MAX_VIEWS):
        self._views = KeptBySignature(max_views)

    def kept(self, registry, name: str) -> bytes | None:
        """The kept view of the current record of ``name``, or None when it was written since (or never
        viewed). `store.errors.NotFound` if there is none. Cost: one ``stat``, so that an async route may
        call it on the event loop and go to the thread pool only for `json`. None at once for a registry on an
        object store, whose signature may be a request: the route takes it to the thread pool (`json`)."""
        if isinstance(registry, ObjectJobRegistry):
            return None
        return self._lookup(registry, name)[1]

    def json(self, registry, name: str, render: Callable[[object], bytes]) -> bytes:
        """``render(record)`` of the current record of ``name`` in ``registry``, made again only when the
        record was written since. `store.errors.NotFound` if there is none. Cost: a ``stat``; on a miss a
        record read and ``render``."""
        signature, body = self._lookup(registry, name)
        if body is not None:
            return body
        body = render(registry.get(name))  # read after the signature was taken (module note)
        self._views.put((registry.kind, name), signature, body)
        return body

    def _lookup(self, registry, name: str) -> tuple[tuple, bytes | None]:
        """``(signature, kept view or None)`` of the record of ``name`` now. One ``stat`` (and, if the record
        is missing, a look for the job's files without it: `store.errors.Damaged` then, not `NotFound`)."""
        try:
            signature = registry.signature(name)
        except NotFound:
            registry.get(name)  # raises Damaged where the job's files are there without its record
            raise
        return signature, self._views.get((registry.kind, name), signature)
