"""The interface every place the store keeps bytes in offers: `ObjectStore`, in the spirit of zarr 3's store
ABC (``zarr.abc.store.Store``), with what atomic records and leases need on top of get, put, list and delete.

Keys are ``/``-separated relative paths (``models/m1/record.json``). Every stored object has a *version*, an
opaque string that changes whenever its bytes do (an S3 ETag; a folder's sha256 of the content), and the writes
are atomic: a reader sees an object whole, old or new, never part of one. Three writes:

* `ObjectStore.put`: replace (or create) unconditionally;
* `ObjectStore.create`: create once, `ObjectExists` if the key is taken (S3 ``If-None-Match: *``; a folder's
  ``os.link``);
* `ObjectStore.replace`: compare-and-swap, `VersionMismatch` unless the object is still at the version read
  (S3 ``If-Match``; a folder's lock around read, compare and rename).

With them a record is updated without a lost update (read, change, `replace`, retry on a mismatch), and a
lease is taken by one holder only (`store.objects.leases`). Failures a caller can act on have their own
class: `ObjectMissing`, `ObjectExists`, `VersionMismatch`, `StoreUnavailable` (the store cannot be reached:
retry later), `StoreRefused` (it refused a write: full, or not allowed).
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass


class ObjectStoreError(Exception):
    """Base class of the object stores' failures; ``key`` names the object (None for the store itself)."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


class ObjectMissing(ObjectStoreError, KeyError):
    """No object at the key."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0])


class ObjectExists(ObjectStoreError):
    """`ObjectStore.create` of a key that is taken."""


class VersionMismatch(ObjectStoreError):
    """`ObjectStore.replace` or a conditional delete of an object that changed since it was read (or is gone)."""


class StoreUnavailable(ObjectStoreError):
    """The store could not be reached (after the retries its implementation makes): try again later."""


class StoreRefused(ObjectStoreError):
    """The store refused a write: no space, a quota, or no permission. Nothing was half-written."""


@dataclass(frozen=True)
class Stored:
    """An object as read: its bytes and its version."""

    data: bytes
    version: str


@dataclass(frozen=True)
class Described:
    """What a listing says of an object without reading it: its size in bytes and when it was last written
    (epoch seconds)."""

    size: int
    modified: float


def check_key(key: str) -> str:
    """The key itself, or ValueError: a relative ``/``-separated path without empty, ``.`` or ``..`` parts and
    without a part starting with ``.`` (names the folder store keeps to itself). O(len(key))."""
    parts = key.split("/")
    if not key or key.startswith("/") or any(p in ("", ".", "..") or p.startswith(".") for p in parts):
        raise ValueError(f"key: {key!r} is not a relative path of non-empty parts without '.' or '..' "
                         "(nor parts starting with '.')")
    return key


class ObjectStore(abc.ABC):
    """Objects by key, each with a version (module docstring). Thread-safe; implementations say what a write
    costs."""

    url: str  # where it is: a folder's path, or s3://bucket/prefix

    @abc.abstractmethod
    def get(self, key: str) -> Stored:
        """The object's bytes and version; `ObjectMissing` if there is none."""

    @abc.abstractmethod
    def version(self, key: str) -> str | None:
        """The object's version, None if there is none (no bytes read where the store can avoid it)."""

    @abc.abstractmethod
    def describe(self, key: str) -> Described | None:
        """The object's size and time of writing, None if there is none; no bytes read."""

    @abc.abstractmethod
    def put(self, key: str, data: bytes) -> str:
        """Store ``data`` at ``key`` atomically, replacing what is there; the new version."""

    @abc.abstractmethod
    def create(self, key: str, data: bytes) -> str:
        """Store ``data`` at ``key`` only if there is no object there (atomically); its version, or
        `ObjectExists`."""

    @abc.abstractmethod
    def replace(self, key: str, data: bytes, version: str) -> str:
        """Store ``data`` at ``key`` only if the object there is still at ``version`` (compare-and-swap); the
        new version, or `VersionMismatch` (changed, or deleted)."""

    @abc.abstractmethod
    def delete(self, key: str, version: str | None = None) -> None:
        """Remove the object (nothing if there is none); with ``version``, only if it is still at it
        (`VersionMismatch` otherwise)."""

    def failure(self, exc: Exception) -> ObjectStoreError | None:
        """The failure of this interface that ``exc``, raised by a library writing or reading through
        `zarr_store`, stands for (a refused write, a store out of reach), None if it is none of them. O(1)."""
        return None

    def delete_many(self, keys: list[str]) -> None:
        """Remove the objects at ``keys`` (those that are there), unconditionally: `delete` of each here; one
        request per thousand keys where the store can (S3's DeleteObjects)."""
        for key in keys:
            self.delete(key)

    @abc.abstractmethod
    def keys(self, prefix: str = "") -> Iterator[str]:
        """The keys under ``prefix`` (a folder's path, ``models/``; "" for all), in sorted order."""

    @abc.abstractmethod
    def zarr_store(self, folder: str, read_only: bool = True):
        """A zarr 3 store (``zarr.abc.store.Store``) of the objects under ``folder`` (a key prefix without its
        trailing ``/``): how a data set's rows are written and read as a zarr array here. Its writes are
        zarr's own, one object per chunk, not the atomic writes above: a caller writes an array under a
        fresh name and publishes it afterwards (`store.datasets.object_datasets`). O(1)."""


def child_names(objects: ObjectStore, folder: str, folders_only: bool = False) -> list[str]:
    """The names directly under ``folder`` (a key prefix, without its trailing ``/``), sorted: each key's next
    part; with ``folders_only``, only the names that have objects beneath them. One listing."""
    prefix = folder + "/"
    found = set()
    for key in objects.keys(prefix):
        part, below, _ = key[len(prefix):].partition("/")
        if below or not folders_only:
            found.add(part)
    return sorted(found)


__all__ = ["ObjectStore", "Stored", "Described", "child_names", "ObjectStoreError", "ObjectMissing", "ObjectExists",
           "VersionMismatch", "StoreUnavailable", "StoreRefused", "check_key"]
