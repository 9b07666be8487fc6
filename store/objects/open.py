"""The object store a data folder setting names: ``s3://bucket/prefix`` is `store.objects.s3.S3Objects`, anything
else a folder (`store.objects.folder.FolderObjects`)."""

from __future__ import annotations

import os

from store.objects.interface import ObjectStore


def open_objects(location: str | os.PathLike) -> ObjectStore:
    """The object store at ``location`` (``KPCA_DATA_DIR``'s value). O(1); an S3 store is not contacted yet."""
    text = os.fspath(location)
    if text.startswith("s3://"):
        from store.objects.s3 import S3Objects  # obstore is loaded only for an object store

        return S3Objects(text)
    from store.objects.folder import FolderObjects

    return FolderObjects(text)


__all__ = ["open_objects"]
