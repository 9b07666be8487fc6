"""Environment variables saved and put back: what a process that starts others (the nannies of an embedded
cluster, the API processes' supervisor) writes into its own environment for them, undone when they stop."""

from __future__ import annotations

import os
from collections.abc import Iterable


def saved_environ(names: Iterable[str]) -> dict[str, str | None]:
    """The current value of each of ``names`` (None: unset), for `restore_environ`. O(names)."""
    return {name: os.environ.get(name) for name in names}


def restore_environ(saved: dict[str, str | None]) -> None:
    """Put back the values `saved_environ` saved: set again, or removed where they were unset. O(saved)."""
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
