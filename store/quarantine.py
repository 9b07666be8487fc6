"""Stored records found damaged on read: quarantined where they are, never fatal to anything else.

A record (a data set's ``meta.json``, a model's or a clustering's record, an image job's) that is empty,
truncated, not JSON, of a ``schema_version`` this code does not read, failing its digest
(`store.atomic.read_json`), not a valid record, replaced by a folder, or missing from a folder that still
holds the resource's files, makes only its own resource unreadable: reading it is a `store.errors.Damaged`
(a 409 ``corrupt`` naming the file and what to do), a listing shows it as a `DamagedEntry` (status
``corrupt`` and the reason) or skips it where only readable records matter (the fit watchdog, the
per-key fit count), and deleting it works. Nothing is written or moved: a damage is found again, the
same, by every process and after every restart, until the resource is deleted.

`note` logs each damaged file once per process (and again only once it changes), so that a loop that
lists every few seconds (`service.app._watch_fits`) does not fill the log.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from store.errors import Damaged

log = logging.getLogger(__name__)

#: at most this many damaged files are remembered as logged (the oldest forgotten first)
_NOTED_MAX = 1024
_noted: OrderedDict[tuple, None] = OrderedDict()
_noted_lock = threading.Lock()


@dataclass(frozen=True)
class DamagedEntry:
    """A resource of a listing whose record cannot be read: its ``name``, ``status`` ``"corrupt"`` and
    the `store.errors.Damaged` ``message`` (which names the file, the reason and what to do)."""

    name: str
    message: str
    cause: str
    status: str = "corrupt"

    @classmethod
    def of(cls, name: str, error: Damaged) -> DamagedEntry:
        """The entry of resource ``name`` whose read raised ``error``. O(1)."""
        return cls(name=name, message=error.message, cause=error.cause)


def note(path: Path, error: Damaged) -> None:
    """Log ``error`` (a damaged record at ``path``) as a warning, once per process for each state of the
    file (its signature: a new damage is logged again). Cost: one ``stat``."""
    try:
        info = os.stat(path)
        key: tuple[object, ...] = (str(path), info.st_ino, info.st_mtime_ns, info.st_ctime_ns, info.st_size)
    except OSError:
        key = (str(path), None)
    with _noted_lock:
        if key in _noted:
            return
        _noted[key] = None
        while len(_noted) > _NOTED_MAX:
            _noted.popitem(last=False)
    log.warning("quarantined a damaged record (other resources are not affected): %s", error.message)


def holds_files(folder: Path, document: str) -> bool:
    """Whether ``folder`` holds anything of a resource but its ``document``: an entry whose name does not
    start with a dot (locks, temporary files and tombstones do). False if the folder does not exist.
    Cost: one folder listing."""
    try:
        with os.scandir(folder) as entries:
            return any(not entry.name.startswith(".") and entry.name != document for entry in entries)
    except (FileNotFoundError, NotADirectoryError):
        return False
