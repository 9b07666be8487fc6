"""What a data location setting names: a folder's path, or an S3-compatible object store as ``s3://bucket/prefix``
(read by `store.objects.open`, `store.objects.s3` and the service's settings, without loading an S3 client)."""

from __future__ import annotations

import os

URL_SCHEME = "s3://"


def is_url(location: str | os.PathLike) -> bool:
    """Whether ``location`` names an object store (``s3://...``) rather than a folder. O(1)."""
    return os.fspath(location).startswith(URL_SCHEME)


def parse_url(url: str) -> tuple[str, str]:
    """``(bucket, prefix)`` of ``s3://bucket/prefix`` (prefix without slashes at its ends; may be "");
    ValueError naming the URL otherwise. O(len(url))."""
    rest = url[len(URL_SCHEME):]
    if not is_url(url) or not rest.split("/", 1)[0]:
        raise ValueError(f"KPCA_DATA_DIR: {url!r} is not s3://bucket[/prefix]")
    bucket, _, prefix = rest.partition("/")
    return bucket, prefix.strip("/")


__all__ = ["URL_SCHEME", "is_url", "parse_url"]
