"""`ObjectStore` over an S3-compatible object store (AWS S3, MinIO, Ceph, R2, moto), through obstore.

``s3://bucket/prefix`` names it; the endpoint, the credentials and the region are the standard variables
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, and
``AWS_ALLOW_HTTP=true`` for an ``http://`` endpoint), read by obstore itself. Why obstore and not
fsspec/s3fs: the records and leases need compare-and-swap, and obstore (Rust's object_store) has it as a put
mode (``mode="create"``: ``If-None-Match: *``; ``mode={"e_tag": ...}``: ``If-Match``), while fsspec's interface
has at most create-once; obstore also retries a store that cannot be reached with backoff, and zarr 3 reads
and writes through it (``zarr.storage.ObjectStore``).

A transient failure (the store down, a connection reset, a 5xx) is retried for up to `RETRY_SECONDS` with
exponential backoff (obstore's retry), then is `StoreUnavailable`. A conditional delete is a version check
then a delete (obstore has no conditional delete): a write between the two is lost; the leases
(`store.objects.leases`) release by compare-and-swap instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING

import obstore
from obstore import exceptions as errors
from obstore.store import S3Store

from store.objects.interface import (
    Described,
    ObjectExists,
    ObjectMissing,
    ObjectStore,
    ObjectStoreError,
    Stored,
    StoreRefused,
    StoreUnavailable,
    VersionMismatch,
    check_key,
)
from store.objects.urls import parse_url

if TYPE_CHECKING:
    from obstore.store import RetryConfig

RETRY_SECONDS = 30.0  # how long a transient failure is retried before it is `StoreUnavailable`


class S3Objects(ObjectStore):
    """Objects in ``bucket`` under ``prefix``. Each call is one or two HTTP requests (a conditional delete two);
    `keys` lists in pages of 1,000."""

    def __init__(self, url: str, retry_seconds: float = RETRY_SECONDS):
        bucket, prefix = parse_url(url)
        self.url = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
        self._bucket, self._prefix = bucket, prefix
        self._retry: RetryConfig = {"max_retries": 1000, "retry_timeout": timedelta(seconds=retry_seconds),
                       "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=2),
                                   "base": 2.0}}
        self._store = self._s3(prefix)

    def _s3(self, prefix: str) -> S3Store:
        """obstore's client of the objects under ``prefix`` (the endpoint, credentials, region and
        AWS_ALLOW_HTTP: read by obstore from the environment)."""
        return S3Store(self._bucket, prefix=prefix or None, conditional_put="etag", retry_config=self._retry)

    def _failed(self, key: str | None, exc: Exception) -> ObjectStoreError:
        """Our error for obstore's ``exc``."""
        where = key or self.url
        if isinstance(exc, FileNotFoundError):
            return ObjectMissing(f"{where}: no such object in {self.url}", key)
        if isinstance(exc, errors.AlreadyExistsError):
            return ObjectExists(f"{where}: an object is there already", key)
        if isinstance(exc, errors.PreconditionError):
            return VersionMismatch(f"{where}: changed since it was read (or deleted); read it again", key)
        if isinstance(exc, (errors.PermissionDeniedError, errors.UnauthenticatedError)):
            return StoreRefused(f"{where}: {self.url} refused the request ({exc}); check AWS_ACCESS_KEY_ID, "
                                "AWS_SECRET_ACCESS_KEY and the bucket's policy", key)
        return StoreUnavailable(f"{where}: {self.url} could not be reached or failed ({str(exc)[:300]}); retried "
                                "for the store's retry time: check AWS_ENDPOINT_URL and the store, then try again", key)

    def get(self, key: str) -> Stored:
        check_key(key)
        try:
            got = obstore.get(self._store, key)
            return Stored(bytes(got.bytes()), str(got.meta["e_tag"]))
        except Exception as exc:
            raise self._failed(key, exc) from exc

    def version(self, key: str) -> str | None:
        check_key(key)
        try:
            return str(obstore.head(self._store, key)["e_tag"])
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise self._failed(key, exc) from exc

    def describe(self, key: str) -> Described | None:
        check_key(key)
        try:
            meta = obstore.head(self._store, key)
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise self._failed(key, exc) from exc
        return Described(int(meta["size"]), meta["last_modified"].timestamp())

    def _put(self, key: str, data: bytes, mode) -> str:
        check_key(key)
        try:
            return str(obstore.put(self._store, key, bytes(data), mode=mode)["e_tag"])
        except Exception as exc:
            raise self._failed(key, exc) from exc

    def put(self, key: str, data: bytes) -> str:
        return self._put(key, data, "overwrite")

    def create(self, key: str, data: bytes) -> str:
        return self._put(key, data, "create")

    def replace(self, key: str, data: bytes, version: str) -> str:
        return self._put(key, data, {"e_tag": version})

    def delete(self, key: str, version: str | None = None) -> None:
        if version is not None:
            current = self.version(key)
            if current != version:
                raise VersionMismatch(f"{key}: changed since it was read (or deleted); read it again", key)
        check_key(key)
        try:
            obstore.delete(self._store, key)
        except FileNotFoundError:
            return
        except Exception as exc:
            raise self._failed(key, exc) from exc

    def failure(self, exc: Exception) -> ObjectStoreError | None:
        return self._failed(None, exc) if type(exc).__module__.startswith("obstore") else None

    def delete_many(self, keys: list[str]) -> None:
        for key in keys:
            check_key(key)
        for first in range(0, len(keys), 1000):
            try:
                obstore.delete(self._store, keys[first: first + 1000])
            except FileNotFoundError:
                continue
            except Exception as exc:
                raise self._failed(None, exc) from exc

    def zarr_store(self, folder: str, read_only: bool = True):
        from zarr.storage import ObjectStore as ZarrObjectStore

        check_key(folder)
        return ZarrObjectStore(self._s3(f"{self._prefix}/{folder}" if self._prefix else folder), read_only=read_only)

    def keys(self, prefix: str = "") -> Iterator[str]:
        try:
            found = [str(meta["path"]) for page in obstore.list(self._store, prefix=prefix or None) for meta in page]
        except Exception as exc:
            raise self._failed(None, exc) from exc
        return iter(sorted(key for key in found if key.startswith(prefix)))


__all__ = ["S3Objects", "parse_url", "RETRY_SECONDS"]
