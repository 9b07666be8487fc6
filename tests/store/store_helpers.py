"""Helpers shared by the store tests (a uniquely named module, not conftest)."""

from __future__ import annotations

import os
from pathlib import Path


def temp_leftovers(root: Path) -> list[str]:
    """Paths under ``root`` that look like temporary or tombstone files."""
    found = []
    for folder, dirs, files in os.walk(root):
        for entry in dirs + files:
            if ".tmp" in entry or ".deleted-" in entry:
                found.append(os.path.join(folder, entry))
    return found


def all_files(path: Path) -> set[str]:
    """Every file and folder below ``path``, relative to it."""
    return {str(p.relative_to(path)) for p in path.rglob("*")}
