"""Reading and writing ``.npy`` files (staged chunks) and ``.npz`` archives (checkpoints), in any thread.

numpy reads every ``.npy`` header (``np.load``, each member of an ``.npz``) with ``ast.literal_eval``,
and CPython before 3.11.8 and 3.12.2 builds that AST with a recursion counter shared by all threads
(python/cpython#106905): two threads reading headers at once can fail with ``SystemError: AST
constructor recursion depth mismatch``. It did under bench/load.py, as a 500 on a chunk upload
(docs/development.md). So headers are parsed here (`read_header`): the ones numpy writes by a
regular expression, any other by ``ast.literal_eval`` under one lock and checked as numpy checks
them; the data are read as numpy reads them.
"""

from __future__ import annotations

import ast
import functools
import io
import math
import os
import re
import struct
import threading
import zipfile
from typing import IO, cast

import numpy as np
from numpy.lib import format as npy_format

#: the header numpy writes: ``{'descr': '<f8', 'fortran_order': False, 'shape': (32, 16), }``
_NUMPY_HEADER = re.compile(r"\{'descr': '([^'\\]+)', 'fortran_order': (True|False), "
                           r"'shape': \(((?:\d+, )*\d+,?|)\), \}\s*\Z")
_LITERAL_EVAL = threading.Lock()  # any other header: parsed by one thread at a time (module note)
_LENGTH = {1: "<H", 2: "<I", 3: "<I"}  # header length field by format version


def write_npy(handle: IO[bytes], array: np.ndarray) -> None:
    """Write ``array`` to an open binary file in ``.npy`` format (no pickles). Cost O(array bytes)."""
    npy_format.write_array(handle, array, allow_pickle=False)


def read_header(handle: IO[bytes], versions=((1, 0), (2, 0), (3, 0))) -> tuple[tuple[int, ...], bool, np.dtype]:
    """``(shape, fortran_order, dtype)`` of the ``.npy`` stream at ``handle``, left at its first data
    byte; safe in any thread (module note). `ValueError` for anything but a ``.npy`` header of one of
    the format ``versions`` (default all numpy writes: 1.0, 2.0, 3.0). Cost: a read of the header
    (usually 128 bytes)."""
    major, minor = npy_format.read_magic(handle)
    if (major, minor) not in versions:
        raise ValueError(f".npy format version {major}.{minor} is not one of "
                         f"{', '.join(f'{a}.{b}' for a, b in versions)}")
    size_field = handle.read(struct.calcsize(_LENGTH[major]))
    if len(size_field) != struct.calcsize(_LENGTH[major]):
        raise ValueError("the .npy header is truncated")
    length, = struct.unpack(_LENGTH[major], size_field)
    raw = handle.read(length)
    if len(raw) != length:
        raise ValueError("the .npy header is truncated")
    return parse_header(raw.decode("utf8" if major == 3 else "latin1"))


def parse_header(text: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    """``(shape, fortran_order, dtype)`` from the text of a ``.npy`` header (`read_header`). `ValueError`
    if it is not one numpy would read."""
    match = _NUMPY_HEADER.match(text)
    if match is not None:
        descr, fortran, shape = match.group(1), match.group(2) == "True", match.group(3)
        dtype = npy_format.descr_to_dtype(descr)  # type: ignore[arg-type]  # a str descr: numpy's stub omits it
        return tuple(int(v) for v in shape.split(",") if v.strip()), fortran, dtype
    try:
        with _LITERAL_EVAL:
            header = ast.literal_eval(text)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError) as exc:
        raise ValueError(f"cannot parse the .npy header {text[:200]!r}: {exc}") from None
    if not isinstance(header, dict) or sorted(header) != ["descr", "fortran_order", "shape"]:
        raise ValueError(f"the .npy header {text[:200]!r} is not a dict of descr, fortran_order and shape")
    shape, fortran = header["shape"], header["fortran_order"]
    if not isinstance(shape, tuple) or not all(isinstance(v, int) and v >= 0 for v in shape):
        raise ValueError(f"the .npy header's shape {shape!r} is not a tuple of sizes")
    if not isinstance(fortran, bool):
        raise ValueError(f"the .npy header's fortran_order {fortran!r} is not a bool")
    try:
        dtype = npy_format.descr_to_dtype(header["descr"])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the .npy header's descr {header['descr']!r} is not a dtype: {exc}") from None
    return shape, fortran, dtype


def read_array(handle: IO[bytes], size: int | None = None) -> np.ndarray:
    """The (writable) array of the ``.npy`` stream at ``handle`` (`read_header`; no pickles: object
    arrays are a `ValueError`, as is a stream shorter than its header says). ``size``: the stream's
    bytes when known; a header announcing more is refused before anything is allocated. Cost O(array
    bytes)."""
    shape, fortran, dtype = read_header(handle)
    if dtype.hasobject:
        raise ValueError("the .npy array holds Python objects, which are never unpickled")
    n_bytes = math.prod(shape) * dtype.itemsize
    if size is not None and handle.tell() + n_bytes > size:
        raise ValueError(f"the .npy data are truncated: its header announces {n_bytes} bytes, the file holds "
                         f"{max(0, size - handle.tell())}")
    data = bytearray(n_bytes)
    if n_bytes and cast(io.BufferedIOBase, handle).readinto(data) != n_bytes:  # binary files have readinto
        raise ValueError(f"the .npy data are truncated: its header announces {n_bytes} bytes")
    return array_in_buffer(data, shape, fortran, dtype, 0)


#: the most bytes a ``.npy`` header in memory may take (`read_buffer_header`): numpy's own limit on the
#: header it reads (``max_header_size``), with the magic and length fields
MAX_BUFFER_HEADER_BYTES = 16 * 1024


def read_buffer_header(buffer: bytes | bytearray) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """``(shape, fortran_order, dtype, offset of the data)`` of the ``.npy`` bytes in ``buffer``
    (`read_header`); only the header's bytes are copied. `ValueError` as `read_header`, and for a header
    over `MAX_BUFFER_HEADER_BYTES`. Cost O(header)."""
    head = io.BytesIO(memoryview(buffer)[:MAX_BUFFER_HEADER_BYTES])
    shape, fortran, dtype = read_header(head)
    return shape, fortran, dtype, head.tell()


def array_in_buffer(buffer: bytes | bytearray, shape: tuple[int, ...], fortran: bool, dtype: np.dtype,
                    offset: int) -> np.ndarray:
    """The array of the ``.npy`` bytes in ``buffer`` whose header `read_buffer_header` read: a view on
    ``buffer``, no copy (writable if ``buffer`` is), unless the data are not aligned for their type (a
    header not padded as numpy pads it): then a copy, which is. `ValueError` for Python objects (never
    unpickled) or a buffer shorter than the header says. Cost O(1); O(array) for a copy."""
    if dtype.hasobject:
        raise ValueError("the .npy array holds Python objects, which are never unpickled")
    count = math.prod(shape)
    if offset + count * dtype.itemsize > len(buffer):
        raise ValueError(f"the .npy data are truncated: its header announces {count * dtype.itemsize} bytes")
    flat = np.frombuffer(buffer, dtype=dtype, count=count, offset=offset) if count else np.empty(0, dtype=dtype)
    if not flat.flags.aligned:
        flat = flat.copy()
    return flat.reshape(shape[::-1]).transpose() if fortran else flat.reshape(shape)


def read_npy(path: str | os.PathLike) -> np.ndarray:
    """Load a whole ``.npy`` file (`read_array`). Cost O(file size) time and memory."""
    with open(path, "rb") as handle:
        return read_array(handle, os.fstat(handle.fileno()).st_size)


def map_npy(path: str | os.PathLike) -> np.memmap:
    """A read-only memory map of the array in a ``.npy`` file (``np.load(path, mmap_mode="r")``, with
    its header read by `read_header`). Cost: a header read; pages are read as they are touched."""
    with open(path, "rb") as handle:
        shape, fortran, dtype = read_header(handle)
        offset = handle.tell()
    if dtype.hasobject:
        raise ValueError("the .npy array holds Python objects, which are never unpickled")
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C")


class NpzArchive:
    """An open ``.npz`` archive, as ``np.load(path)`` opens one (no pickles), and a context manager that
    closes it: ``files`` names its members (without ``.npy``), ``archive[key]`` reads one (`read_array`;
    `KeyError` if there is none). A missing file is a `FileNotFoundError`, a damaged archive a
    `zipfile.BadZipFile` or a `ValueError`. Cost: the zip's directory when opened, O(member bytes) per
    member read."""

    def __init__(self, path: str | os.PathLike | IO[bytes]):
        self._zip = zipfile.ZipFile(path)
        self._members = {name[:-4]: name for name in self._zip.namelist() if name.endswith(".npy")}
        self.files = list(self._members)

    def __contains__(self, key: str) -> bool:
        return key in self._members

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self._members:
            raise KeyError(f"{key} is not a file in the archive")
        info = self._zip.getinfo(self._members[key])
        with self._zip.open(info) as member:
            return read_array(member, info.file_size)

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> NpzArchive:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def npy_shape(path: str | os.PathLike) -> tuple[int, ...]:
    """Shape of the array in a ``.npy`` file, read from its header only (`read_header`).

    Cost: one open and a read of the header (about 128 bytes), independent of
    the array size.
    """
    with open(path, "rb") as handle:
        shape, _fortran, _dtype = read_header(handle)
    return tuple(shape)


DAMAGED = -1
"""`npy_rows` of a file whose header cannot be read or whose size disagrees with it."""


def npy_damage(path: str | os.PathLike, size: int | None = None) -> str | None:
    """Why a ``.npy`` file is damaged (unreadable header, not 2-D, or a size other than the header's
    plus its data), or None if it looks whole. Cost: one header read."""
    try:
        with open(path, "rb") as handle:
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
