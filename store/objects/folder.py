"""`ObjectStore` over a local folder: today's store on one machine (or a shared POSIX mount).

An object is a file under the root at its key's path. Writes are the store's atomic writes
(`store.atomic.write_via_temp`: a hidden temporary file, fsynced, renamed or hard-linked into place), so a
reader sees a whole file; a version is the sha256 of the file's bytes. The writes of one key are serialised
by an advisory lock on a hidden file beside it (``.{name}.lock``, `store.atomic.file_lock`), which makes
`FolderObjects.replace` a compare-and-swap and a conditional delete exact between the threads and processes
of one machine (``flock`` is not reliable over NFS: an object store is what several machines share).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from store.atomic import atomic_write_bytes, disk_full, file_lock
from store.objects.interface import (
    Described,
    ObjectExists,
    ObjectMissing,
    ObjectStore,
    Stored,
    StoreRefused,
    VersionMismatch,
    check_key,
)


def _version(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FolderObjects(ObjectStore):
    """Objects as files under ``root`` (created if missing). A write costs the bytes, two fsyncs and a lock;
    `version` reads and hashes the file, O(size)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.url = str(self.root)

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def _lock(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        return file_lock(path.with_name(f".{path.name}.lock"))

    @staticmethod
    def _read(path: Path) -> bytes | None:
        try:
            return path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def _write(self, key: str, path: Path, data: bytes, exclusive: bool = False) -> str:
        try:
            atomic_write_bytes(path, bytes(data), exclusive=exclusive)
        except FileExistsError:
            raise ObjectExists(f"{key}: an object is there already", key) from None
        except OSError as exc:
            if disk_full(exc) or isinstance(exc, PermissionError):
                raise StoreRefused(f"{key}: the folder {self.root} refused the write ({exc}); nothing was "
                                   "written: free space or fix its permissions", key) from exc
            raise
        return _version(data)

    def get(self, key: str) -> Stored:
        data = self._read(self._path(key))
        if data is None:
            raise ObjectMissing(f"{key}: no such object in {self.url}", key)
        return Stored(data, _version(data))

    def version(self, key: str) -> str | None:
        data = self._read(self._path(key))
        return None if data is None else _version(data)

    def describe(self, key: str) -> Described | None:
        try:
            info = os.stat(self._path(key))
        except (FileNotFoundError, NotADirectoryError):
            return None
        return Described(info.st_size, info.st_mtime)

    def put(self, key: str, data: bytes) -> str:
        path = self._path(key)
        with self._lock(path):
            return self._write(key, path, data)

    def create(self, key: str, data: bytes) -> str:
        path = self._path(key)
        with self._lock(path):
            return self._write(key, path, data, exclusive=True)

    def replace(self, key: str, data: bytes, version: str) -> str:
        path = self._path(key)
        with self._lock(path):
            current = self._read(path)
            if current is None or _version(current) != version:
                raise VersionMismatch(f"{key}: changed since it was read (or deleted); read it again", key)
            return self._write(key, path, data)

    def delete(self, key: str, version: str | None = None) -> None:
        path = self._path(key)
        if not path.parent.is_dir():  # no object, nor a folder to lock in: deleted since read, where a version says
            if version is not None:
                raise VersionMismatch(f"{key}: deleted since it was read", key)
            return
        with self._lock(path):
            current = self._read(path)
            if current is None:
                if version is not None:
                    raise VersionMismatch(f"{key}: deleted since it was read", key)
                return
            if version is not None and _version(current) != version:
                raise VersionMismatch(f"{key}: changed since it was read; read it again", key)
            path.unlink()

    def zarr_store(self, folder: str, read_only: bool = True):
        from zarr.storage import LocalStore

        return LocalStore(self._path(folder), read_only=read_only)

    def keys(self, prefix: str = "") -> Iterator[str]:
        folder = self.root / prefix.rsplit("/", 1)[0] if "/" in prefix else self.root
        found = []
        for top, dirs, files in os.walk(folder):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in files:
                if not name.startswith("."):
                    key = Path(top, name).relative_to(self.root).as_posix()
                    if key.startswith(prefix):
                        found.append(key)
        return iter(sorted(found))


__all__ = ["FolderObjects"]
