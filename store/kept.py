"""Values kept under the signature of the file they came from: read again only once the file changed.

A file's signature (`store.folders.ResourceFolders.signature`: inode, mtime, ctime and size) changes with
every write, as every write is a new file renamed over the old, and an edit in place changes the ctime
even when the mtime is put back with ``utime``. A caller takes the signature *before* it reads the file,
so a value is never kept under a signature newer than its content: a write between the two is read
again next time. Used for job records (`store.jobs.registry`) and the service's encoded views of them
(`service.record_views`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable


class KeptBySignature:
    """At most ``size`` values by key, each under the signature it was made at; the least recently
    used is dropped first. Thread-safe."""

    def __init__(self, size: int):
        self.size = size
        self._values: OrderedDict[Hashable, tuple[tuple, object]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, signature: tuple):
        """The value kept for ``key`` if it was made at ``signature``, else None. O(1)."""
        with self._lock:
            kept = self._values.get(key)
            if kept is None or kept[0] != signature:
                return None
            self._values.move_to_end(key)
            return kept[1]

    def clear(self) -> None:
        """Forget every value. O(values)."""
        with self._lock:
            self._values.clear()

    def put(self, key: Hashable, signature: tuple, value) -> None:
        """Keep ``value``, made from a file that had ``signature`` before it was read. O(1)."""
        with self._lock:
            self._values[key] = (signature, value)
            self._values.move_to_end(key)
            while len(self._values) > self.size:
                self._values.popitem(last=False)
