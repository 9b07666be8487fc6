"""Where a data location setting points, and the object store it names.

``KPCA_DATA_DIR`` (``--data-dir``) is a folder's path or ``s3://bucket/prefix``. `open_objects` gives the
`ObjectStore` of either (`store.objects.s3.S3Objects` for a URL, `store.objects.folder.FolderObjects` for a
path), `objects_at` one per process and URL. The location travels to the dask workers as the string `location`
returns, never as a `pathlib.Path` (which would mangle a URL). What belongs to one machine stays on one even with
an object store (`local_folder`): the requests running in this host's API processes, the lock that makes one of
them recover fits, an import's unpacked archive.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path

from store.objects.interface import ObjectStore
from store.objects.urls import URL_SCHEME, is_url, parse_url


def open_objects(location: str | os.PathLike) -> ObjectStore:
    """The object store at ``location`` (``KPCA_DATA_DIR``'s value). O(1); an S3 store is not contacted yet."""
    text = os.fspath(location)
    if is_url(text):
        from store.objects.s3 import S3Objects  # obstore is loaded only for an object store

        return S3Objects(text)
    from store.objects.folder import FolderObjects

    return FolderObjects(text)


def location(setting: str | os.PathLike) -> str:
    """The data location as every process passes it on: a URL as given (without a trailing ``/``), a folder as
    its absolute path. O(1)."""
    text = os.fspath(setting)
    return text.rstrip("/") if is_url(text) else str(Path(text).resolve())


def prepared(setting: str | os.PathLike) -> str:
    """`location` of the setting, a folder created if missing; an S3 URL checked (`ValueError` naming the
    setting: not ``s3://bucket[/prefix]``) but not contacted. O(1)."""
    where = location(setting)
    if is_url(where):
        parse_url(where)
    else:
        Path(where).mkdir(parents=True, exist_ok=True)
    return where


@functools.lru_cache(maxsize=16)
def objects_at(url: str) -> ObjectStore:
    """The object store at ``url``, one per process and URL (its client and connections reused). O(1)."""
    return open_objects(url)


def local_folder(where: str | os.PathLike) -> Path:
    """A folder of this machine for what stays on one machine (module docstring): the data folder itself, or for
    an object store a folder of the system's temporary folder named after its URL (created). O(1)."""
    if not is_url(where):
        return Path(where)
    folder = Path(tempfile.gettempdir()) / f"kpca-stream-{hashlib.sha256(os.fspath(where).encode()).hexdigest()[:16]}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


__all__ = ["open_objects", "parse_url", "is_url", "location", "prepared", "objects_at", "local_folder", "URL_SCHEME"]
