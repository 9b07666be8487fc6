"""Reading and writing the ``.npy`` files that hold staged chunks."""

from __future__ import annotations

import functools
import os
from typing import IO

import numpy as np
from numpy.lib import format as npy_format


def write_npy(handle: IO[bytes], array: np.ndarray) -> None:
    """Write ``array`` to an open binary file in ``.npy`` format (no pickles). Cost O(array bytes)."""
    npy_format.write_array(handle, array, allow_pickle=False)


def read_npy(path: str | os.PathLike) -> np.ndarray:
    """Load a whole ``.npy`` file (no pickles). Cost O(file size) time and memory."""
    return np.load(path, allow_pickle=False)


def npy_shape(path: str | os.PathLike) -> tuple[int, ...]:
    """Shape of the array in a ``.npy`` file, read from its header only.

    Cost: one open and a read of the header (about 128 bytes), independent of
    the array size.
    """
    with open(path, "rb") as handle:
        version = npy_format.read_magic(handle)
        if version == (1, 0):
            shape, _fortran, _dtype = npy_format.read_array_header_1_0(handle)
        else:
            shape, _fortran, _dtype = npy_format.read_array_header_2_0(handle)
    return tuple(shape)


DAMAGED = -1
"""`npy_rows` of a file whose header cannot be read or whose size disagrees with it."""


def npy_damage(path: str | os.PathLike, size: int | None = None) -> str | None:
    """Why a ``.npy`` file is damaged (unreadable header, not 2-D, or a size other than the header's
    plus its data), or None if it looks whole. Cost: one header read."""
    try:
        with open(path, "rb") as handle:
            version = npy_format.read_magic(handle)
            read_header = npy_format.read_array_header_1_0 if version == (1, 0) else npy_format.read_array_header_2_0
            shape, _fortran, dtype = read_header(handle)
            offset = handle.tell()
        expected = offset + int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        actual = os.stat(path).st_size if size is None else size
    except (OSError, ValueError, TypeError, SyntaxError) as exc:
        return f"unreadable header ({type(exc).__name__})"
    if len(shape) != 2:
        return f"holds a {len(shape)}-D array"
    if actual != expected:
        return f"{actual} bytes where its header announces {expected} (truncated or extended)"
    return None


@functools.lru_cache(maxsize=1 << 16)
def _cached_rows(path: str, inode: int, size: int, mtime_ns: int) -> int:
    if npy_damage(path, size) is not None:
        return DAMAGED
    return npy_shape(path)[0]


def npy_rows(entry: os.DirEntry) -> int:
    """Rows (first dimension) of the array in a staged ``.npy`` file; `DAMAGED` (-1) if it is damaged
    (see `npy_damage`).

    Staged files are written once, so the answer is cached per (path, inode,
    size, mtime). Cost: one ``stat``; plus a header read the first time.
    """
    info = entry.stat()
    return _cached_rows(entry.path, info.st_ino, info.st_size, info.st_mtime_ns)
