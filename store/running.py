"""Requests running now, by principal, seen by every API process that shares the data folder: what a
request that computes like a fit but keeps no record (``POST /v1/denoise-image``) holds while it runs, so
that it counts against ``KPCA_MAX_FITS_PER_KEY`` as fits do (`service.limits.fit_owner`).

Layout under the data folder ``root``::

    running/{owner}.{hex}      one running request of principal ``owner`` (``anonymous`` without keys),
                               under an exclusive flock held by the process that runs it

The kernel drops the lock when its holder exits or dies, so a file without its lock is a request that
ended without removing it (a crash), and `RunningRequests.count` removes it. A file is locked under a
hidden temporary name and then renamed into place: a counter never sees it unlocked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

ANONYMOUS = "anonymous"


class RunningRequests:
    """The running requests of each principal under ``root/running`` (module docstring); safe across
    threads and processes."""

    def __init__(self, root: Path | str):
        self.folder = Path(root) / "running"

    @staticmethod
    def _owner(owner: str | None) -> str:
        name = owner or ANONYMOUS
        if not name.isalnum():  # a key id is hex: anything else would be a path
            raise ValueError(f"owner {owner!r} is not a key id")
        return name

    @contextlib.contextmanager
    def hold(self, owner: str | None) -> Iterator[None]:
        """Count one running request of ``owner`` for the ``with`` block. Cost: a file created, locked,
        renamed and removed."""
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"{self._owner(owner)}.{uuid.uuid4().hex[:16]}"
        temporary, path = self.folder / f".{name}", self.folder / name
        fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.rename(temporary, path)
            try:
                yield
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        finally:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)

    def count(self, owner: str | None) -> int:
        """Running requests of ``owner`` (held files); files left by requests whose process died are
        removed. Cost: a listing and one open and flock per file of ``owner``."""
        prefix = f"{self._owner(owner)}."
        try:
            names = [entry.name for entry in os.scandir(self.folder) if entry.name.startswith(prefix)]
        except FileNotFoundError:
            return 0
        held = 0
        for name in names:
            try:
                fd = os.open(self.folder / name, os.O_RDONLY)
            except FileNotFoundError:
                continue  # ended meanwhile
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                held += 1
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.folder / name)  # its holder died without removing it
            finally:
                os.close(fd)
        return held
