"""Flags that ask a running task to stop: one empty file each, ``{root}/.stops/{token}``.

A serving request that ends early (past its deadline, or its client gone) cancels its tasks on the
cluster, but a task already running is not interrupted by dask: it runs to its end. A task given a
token looks at its flag between steps (a ``stat``) and stops when it is raised
(`workers.image_jobs.JobProgress`, `checker`); the file lives in the data folder that the API processes
and the workers share, so any process can raise it. A one-task request's task clears its flag when it
ends; the flag of a request run as several blocks (`workers.operations.Reconstruct`) is left for
all of its running blocks to see, and removed with the stale ones.

On an object store (a data location ``s3://...``, `store.places`) a flag is an empty object
``stops/{token}`` instead, and a look is a HEAD request: `checker` looks at most every `OBJECT_LOOK_S`.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

STOPS_FOLDER = ".stops"
#: a flag older than this was left behind (a task that never ran, a request's blocks): removed when another
#: is raised
STALE_S = 600.0
OBJECT_FOLDER = "stops"
#: the least time between two looks at a flag kept on an object store (a request each)
OBJECT_LOOK_S = 1.0


class StopFlags:
    """The stop flags of a data folder (or of an object store: module docstring)."""

    def __init__(self, root):
        from store.objects.open import is_url, objects_at

        self.objects = objects_at(str(root)) if is_url(root) else None
        self.folder = Path(STOPS_FOLDER) if self.objects is not None else Path(root) / STOPS_FOLDER

    @staticmethod
    def new_token() -> str:
        """A fresh token (32 hex digits). O(1)."""
        return uuid.uuid4().hex

    def raise_flag(self, token: str, now: float | None = None) -> None:
        """Ask the task holding ``token`` to stop; flags older than `STALE_S` are removed on the way.
        Cost: one file created, one listing of the folder."""
        if self.objects is not None:
            self.objects.put(f"{OBJECT_FOLDER}/{_checked(token)}", b"")
            now = time.time() if now is None else now
            for key in self.objects.keys(f"{OBJECT_FOLDER}/"):
                seen = self.objects.describe(key)
                if seen is not None and now - seen.modified > STALE_S:
                    self.objects.delete(key)
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / _checked(token)).touch()
        now = time.time() if now is None else now
        for entry in self.folder.iterdir():
            try:
                if now - entry.stat().st_mtime > STALE_S:
                    entry.unlink()
            except FileNotFoundError:
                continue

    def raised(self, token: str | None) -> bool:
        """Whether ``token``'s flag is raised (False for None). One ``stat`` (a HEAD request on objects)."""
        if token is not None and self.objects is not None:
            return self.objects.version(f"{OBJECT_FOLDER}/{_checked(token)}") is not None
        return token is not None and (self.folder / _checked(token)).exists()

    def checker(self, token: str | None, every_s: float = 0.1):
        """A callable that answers whether ``token``'s flag is raised, looking (one ``stat``) at most
        every ``every_s`` seconds and answering its last look in between: cheap enough to be asked
        before every step of a numerical loop. None for a None token. O(1) a call."""
        if token is None:
            return None
        _checked(token)
        if self.objects is not None:
            every_s = max(every_s, OBJECT_LOOK_S)
        last = {"at": -float("inf"), "raised": False}

        def raised() -> bool:
            now = time.monotonic()
            if not last["raised"] and now - last["at"] >= every_s:
                last["at"], last["raised"] = now, self.raised(token)
            return bool(last["raised"])

        return raised

    def clear(self, token: str | None) -> None:
        """Remove ``token``'s flag, if any. O(1)."""
        if token is not None and self.objects is not None:
            self.objects.delete(f"{OBJECT_FOLDER}/{_checked(token)}")
        elif token is not None:
            (self.folder / _checked(token)).unlink(missing_ok=True)


def _checked(token: str) -> str:
    if not (isinstance(token, str) and len(token) == 32 and all(c in "0123456789abcdef" for c in token)):
        raise ValueError(f"not a stop token: {token!r}")
    return token
