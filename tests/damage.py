"""The damages of the fault-injection matrix (docs/security.md, *Damaged files*), done to a stored file
as a disk, a crash or a hand would: shared by the store's and the API's matrix tests."""

from __future__ import annotations

import os
from pathlib import Path

#: every damage a stored file is put through
DAMAGES = ("emptied", "truncated", "bit-flipped", "deleted", "folder")


def damage(path: Path, how: str) -> None:
    """Damage the file at ``path`` (one of `DAMAGES`): emptied or cut to half its bytes in place; one bit
    of its middle byte flipped in place with its mtime put back (same inode, size and mtime: only the
    ctime tells); deleted; or replaced by an empty folder."""
    path = Path(path)
    info = os.stat(path)
    if how == "emptied":
        os.truncate(path, 0)
    elif how == "truncated":
        os.truncate(path, info.st_size // 2)
    elif how == "bit-flipped":
        with open(path, "r+b") as handle:
            handle.seek(info.st_size // 2)
            byte = handle.read(1)[0]
            handle.seek(info.st_size // 2)
            handle.write(bytes([byte ^ 0x01]))
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
        after = os.stat(path)
        assert (after.st_ino, after.st_size, after.st_mtime_ns) == (info.st_ino, info.st_size, info.st_mtime_ns)
    elif how == "deleted":
        os.unlink(path)
    elif how == "folder":
        os.unlink(path)
        os.mkdir(path)
    else:
        raise ValueError(f"unknown damage {how!r}; one of {DAMAGES}")

