"""Where `store.jobs.checkpoints.CheckpointStore` keeps its files: the data folder (`FolderPlace`, today's), or an
object store (`ObjectPlace`, issue 57), behind the few operations the checkpoint store makes of them. Paths are
the checkpoint store's own (``{root}/models/{name}/checkpoints/pass-00003.npz``); an object store keeps each file
as the object whose key is its path below ``root``.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, TypeVar

from store.atomic import remove_tree, write_via_temp
from store.npy import NpzArchive
from store.objects.interface import ObjectMissing, ObjectStore, child_names
from store.timestamps import to_iso

T = TypeVar("T")


class FolderPlace:
    """Checkpoint files in the data folder: atomic writes (temporary file, fsync, rename), ``scandir``, ``stat``."""

    def write(self, path: Path, writer: Callable[[IO[bytes]], T]) -> T:
        """``writer(handle)``'s result, the file it wrote put in place whole. O(bytes written) and two fsyncs."""
        path.parent.mkdir(parents=True, exist_ok=True)
        result: list[T] = []
        write_via_temp(path, lambda handle: result.append(writer(handle)))
        return result[0]

    def open_bytes(self, path: Path) -> IO[bytes]:
        """The file at ``path`` open for reading its bytes; `FileNotFoundError` if there is none. O(1)."""
        return open(path, "rb")

    def open(self, path: Path) -> NpzArchive:
        """The ``.npz`` at ``path``, open; `FileNotFoundError` if there is none. O(its directory)."""
        return NpzArchive(path)

    def names(self, folder: Path) -> list[str]:
        """The names in ``folder`` ([] if there is none). One listing."""
        try:
            with os.scandir(folder) as entries:
                return [entry.name for entry in entries]
        except (FileNotFoundError, NotADirectoryError):
            return []

    def remove(self, path: Path) -> None:
        """Remove the file (nothing if it is gone). O(1)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)

    def remove_tree(self, folder: Path) -> None:
        """Remove the folder and everything in it (nothing if it is gone). O(files)."""
        remove_tree(folder)

    def describe(self, path: Path) -> tuple[int, str]:
        """``(size in bytes, when written, ISO 8601)``; `FileNotFoundError` if there is none. One ``stat``."""
        info = os.stat(path)
        return info.st_size, to_iso(info.st_mtime)

    def identity(self, path: Path) -> tuple | None:
        """What changes whenever the file does (device, inode, size, mtime and ctime in ns); None if there is
        none. One ``stat``."""
        try:
            info = os.stat(path)
        except FileNotFoundError:
            return None
        return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


class ObjectPlace:
    """Checkpoint files as objects of ``objects``, keyed by their path below ``root`` (module docstring). A write
    holds the file's bytes in memory once, then puts them in one request; a read gets the whole object."""

    def __init__(self, objects: ObjectStore, root: Path):
        self.objects = objects
        self.root = Path(root)

    def _key(self, path: Path) -> str:
        return Path(path).relative_to(self.root).as_posix()

    def write(self, path: Path, writer: Callable[[IO[bytes]], T]) -> T:
        buffer = io.BytesIO()
        result = writer(buffer)
        self.objects.put(self._key(path), buffer.getbuffer().tobytes())
        return result

    def open_bytes(self, path: Path) -> IO[bytes]:
        try:
            return io.BytesIO(self.objects.get(self._key(path)).data)
        except ObjectMissing:
            raise FileNotFoundError(f"{self.objects.url}/{self._key(path)}") from None

    def open(self, path: Path) -> NpzArchive:
        try:
            data = self.objects.get(self._key(path)).data
        except ObjectMissing:
            raise FileNotFoundError(f"{self.objects.url}/{self._key(path)}") from None
        return NpzArchive(io.BytesIO(data))

    def names(self, folder: Path) -> list[str]:
        return child_names(self.objects, self._key(folder))

    def remove(self, path: Path) -> None:
        self.objects.delete(self._key(path))

    def remove_tree(self, folder: Path) -> None:
        self.objects.delete_many(list(self.objects.keys(self._key(folder) + "/")))

    def describe(self, path: Path) -> tuple[int, str]:
        described = self.objects.describe(self._key(path))
        if described is None:
            raise FileNotFoundError(f"{self.objects.url}/{self._key(path)}")
        return described.size, to_iso(described.modified)

    def identity(self, path: Path) -> tuple | None:
        version = self.objects.version(self._key(path))
        return None if version is None else (version,)


__all__ = ["FolderPlace", "ObjectPlace"]
