"""Atomic file writes, JSON documents and advisory locks.

Every file the store writes goes through `write_via_temp`: the content is
written to a hidden temporary name in the destination folder
(``.{name}.tmp-{random}``), flushed and fsynced, then renamed over the final
name (``os.replace``) or linked to it when the name must not exist yet
(``os.link``, atomic exclusive creation). A reader therefore sees the old file,
the new file or no file, never a partial one; a crash leaves at most a hidden
temporary file, which listings ignore.

Every JSON document carries the sha256 of its own content (`DIGEST_KEY`, `document_digest`), checked by
`read_json` whenever it is read: a document damaged on disk (a bit flipped, a value edited, the file's
mtime put back) is a `DamagedDocument`, never a record read as if it were intact. A document without
the key (written before digests were kept) is read unchecked.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

SCHEMA_VERSION = 1
"""Version of every JSON document and checkpoint the store writes."""

#: the key of a stored JSON document that holds the sha256 of the rest of it (`document_digest`)
DIGEST_KEY = "document_sha256"

_LINK_UNSUPPORTED = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK}


_DISK_FULL = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}
_SHORT_WRITE = re.compile(r"\d+ requested and \d+ written")  # numpy's report of a write the disk cut short


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk (or the process's file-size limit) refused a write: ENOSPC, EFBIG,
    EDQUOT, or numpy's short-write OSError, which carries no errno. O(1)."""
    return isinstance(exc, OSError) and (exc.errno in _DISK_FULL or bool(_SHORT_WRITE.search(str(exc))))


def temp_path(path: Path) -> Path:
    """A fresh hidden temporary name next to ``path``: ``.{name}.tmp-{hex}``. Cost O(1)."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:12]}")


def fsync_dir(directory: Path) -> None:
    """Flush a directory's entries (renames, creations) to disk. Cost one fsync."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: Path) -> None:
    """Fsync every file and directory under ``root`` (before renaming the tree). Cost one fsync per entry."""
    for folder, _dirs, files in os.walk(root):
        for file_name in files:
            fd = os.open(os.path.join(folder, file_name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(folder))


def write_via_temp(path: Path, write: Callable[[IO[bytes]], object], exclusive: bool = False) -> None:
    """Write a file atomically: ``write(f)`` fills a temporary file that then takes the name ``path``.

    Parameters
    ----------
    path : Path
        Final name; its folder must exist.
    write : callable
        Called once with a binary file object open for writing.
    exclusive : bool
        If true, fail with `FileExistsError` when ``path`` already exists
        (atomic create-once via ``os.link``); otherwise replace it.

    Notes
    -----
    Cost: the bytes written plus two fsyncs (file and folder). On failure the
    temporary file is removed and ``path`` is untouched.
    """
    path = Path(path)
    tmp = temp_path(path)
    try:
        with open(tmp, "xb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        if exclusive:
            _link_exclusive(tmp, path)
        else:
            os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    fsync_dir(path.parent)


def _link_exclusive(tmp: Path, path: Path) -> None:
    try:
        os.link(tmp, path)
    except OSError as exc:
        if isinstance(exc, FileExistsError) or exc.errno not in _LINK_UNSUPPORTED:
            raise
        # File systems without hard links: serialise creators with a lock instead.
        with file_lock(path.parent / ".create.lock", shared=False):
            if path.exists():
                raise FileExistsError(errno.EEXIST, "file exists", str(path)) from None
            os.replace(tmp, path)


def atomic_write_bytes(path: Path, data: bytes, exclusive: bool = False) -> None:
    """Write ``data`` to ``path`` atomically (see `write_via_temp`). Cost O(len(data)) plus two fsyncs."""
    write_via_temp(path, lambda handle: handle.write(data), exclusive=exclusive)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def document_digest(doc: dict) -> str:
    """The sha256 (hex) of a JSON document's canonical text: its plain JSON values (`_json_default`) with
    sorted keys and no white space, `DIGEST_KEY` left out, so that it is the same before the document is
    written and after it is read back. Cost O(size of the document)."""
    plain = json.loads(json.dumps({k: v for k, v in doc.items() if k != DIGEST_KEY}, default=_json_default,
                                  allow_nan=False))  # keys as strings, numbers as Python's: as read back
    text = json.dumps(plain, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def dump_json(obj: dict) -> bytes:
    """Encode a stored document as strict UTF-8 JSON, under its digest (`DIGEST_KEY`).

    The document must be a dict carrying ``"schema_version"``. numpy scalars
    and arrays are converted to Python values; NaN and infinities are refused
    (`ValueError`) because they are not JSON. Cost O(size of the document).
    """
    if not isinstance(obj, dict) or "schema_version" not in obj:
        raise ValueError("a stored JSON document must be a dict with a 'schema_version'")
    signed = {**obj, DIGEST_KEY: document_digest(obj)}
    text = json.dumps(signed, default=_json_default, allow_nan=False, indent=1, sort_keys=True)
    return (text + "\n").encode("utf-8")


def atomic_write_json(path: Path, obj: dict, exclusive: bool = False) -> None:
    """Write the JSON document ``obj`` (see `dump_json`) to ``path`` atomically.

    Cost O(document size) plus two fsyncs.
    """
    atomic_write_bytes(path, dump_json(obj), exclusive=exclusive)


class DamagedDocument(ValueError):
    """A stored JSON document that cannot be trusted: empty, truncated or otherwise not JSON, not an
    object, of a ``schema_version`` this code does not read, failing its digest, or a folder in its
    place. ``cause`` says which, in a few words (the message names the file too)."""

    def __init__(self, path: Path | str, cause: str):
        super().__init__(f"{path}: {cause}")
        self.path = Path(path)
        self.cause = cause


def read_json(path: Path, max_version: int = SCHEMA_VERSION) -> dict:
    """Read a stored JSON document, checked against its digest (`DIGEST_KEY`, which is left out of the
    returned dict).

    Raises `FileNotFoundError` (or `NotADirectoryError`) if it is missing and
    `DamagedDocument` (a ValueError) if it is empty or not JSON, not a dict,
    has a ``schema_version`` above ``max_version`` (newer than this code
    understands), fails its digest, or is a folder. Cost O(size of the file).
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except IsADirectoryError:
        raise DamagedDocument(path, "a folder stands in its place") from None
    return parse_json(data, path, max_version)


def parse_json(data: bytes, where: Path | str, max_version: int = SCHEMA_VERSION) -> dict:
    """A stored JSON document from its bytes (`dump_json`'s), checked as `read_json` checks it; ``where`` (a
    path, an object's key) is named by `DamagedDocument`. Cost O(len(data))."""
    if not data.strip():
        raise DamagedDocument(where, "the file is empty")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise DamagedDocument(where, f"not JSON, truncated or altered: {type(exc).__name__}") from None
    if not isinstance(doc, dict):
        raise DamagedDocument(where, "not a JSON object")
    version = doc.get("schema_version")
    if not isinstance(version, int) or version > max_version:
        raise DamagedDocument(where, f"unsupported schema_version {version!r}")
    recorded = doc.pop(DIGEST_KEY, None)
    if recorded is not None and recorded != document_digest(doc):
        raise DamagedDocument(where, "its content does not match its digest: altered on disk")
    return doc


@contextlib.contextmanager
def file_lock(path: Path, shared: bool = False) -> Iterator[None]:
    """Hold an advisory ``fcntl.flock`` on ``path`` (created if missing) for the ``with`` block.

    Shared holders run together; an exclusive holder runs alone. Each call
    opens its own descriptor, so the lock works between threads of one
    process as well as between processes. If the lock file is renamed away
    (its folder deleted) while waiting, the lock is taken again on the current
    file; if the folder no longer exists, `FileNotFoundError` is raised.

    Parameters
    ----------
    path : Path
        Lock file; its folder must exist.
    shared : bool
        Shared (reader) lock instead of an exclusive one.

    Notes
    -----
    Cost: an open, a flock and two stats; blocks while a conflicting lock is held.
    """
    operation = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, operation)
            try:
                on_disk = os.stat(path)
            except FileNotFoundError:
                on_disk = None
            held = os.fstat(fd)
        except BaseException:
            os.close(fd)
            raise
        if on_disk is not None and (on_disk.st_ino, on_disk.st_dev) == (held.st_ino, held.st_dev):
            break
        os.close(fd)  # the file we locked was renamed away: lock the current one
    try:
        yield
    finally:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


@contextlib.contextmanager
def try_file_lock(path: Path, shared: bool = False) -> Iterator[bool]:
    """Try to take an exclusive (or ``shared``) ``flock`` on ``path`` without waiting.

    Yields True while the lock is held, False if another descriptor (thread
    or process) holds it (exclusively, for a shared lock). The kernel releases
    the lock when its holder dies, so a held lock means a live holder. Cost:
    an open and a flock.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def remove_tree(path: Path) -> bool:
    """Delete a folder so that it is never seen half-deleted.

    The folder is first renamed to a hidden tombstone next to it
    (``.{name}.deleted-{hex}``), then removed. Returns False if ``path`` did
    not exist. Cost: one rename plus O(files) unlinks.
    """
    path = Path(path)
    tombstone = path.with_name(f".{path.name}.deleted-{uuid.uuid4().hex[:12]}")
    try:
        os.rename(path, tombstone)
    except FileNotFoundError:
        return False
    fsync_dir(path.parent)
    shutil.rmtree(tombstone, ignore_errors=True)
    return True
