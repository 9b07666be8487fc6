"""Clustering records, labels and spectral coordinates on an `ObjectStore`: `ClusteringRegistry`'s methods over
`ObjectJobRegistry` (issue 57).

The labels (``clusterings/{name}/labels.npy``, int64) and coordinates (``coordinates.npy``, float32 (l, 2)) are
one object each, written whole by one put and checked on read against the digest the record names, as on the
folder. An intact array is kept by this process under its object's version (`store.kept`), so a page of labels
costs a HEAD request, not a download, until the object changes.
"""

from __future__ import annotations

import hashlib
import io
import time
from collections.abc import Callable

import numpy as np

from store.errors import Damaged, NotFound
from store.jobs.clusterings import _COORDINATES, _LABELS, ClusteringRecord, ClusteringRegistry, labels_page
from store.jobs.object_registry import LEASE_TTL_S, ObjectJobRegistry
from store.kept import KeptBySignature
from store.npy import read_array, write_npy
from store.objects.interface import ObjectMissing, ObjectStore

#: intact arrays read by this process, by key, under their object's version
_KEPT = KeptBySignature(64)


class ObjectClusteringRegistry(ObjectJobRegistry[ClusteringRecord]):
    """`ClusteringRegistry` on ``objects`` (module docstring); the registry's other methods as
    `ObjectJobRegistry`'s."""

    def __init__(self, objects: ObjectStore, lease_ttl: float = LEASE_TTL_S, clock: Callable[[], float] = time.time,
                 recent_s: float = 0.0):
        super().__init__(objects, ClusteringRegistry, lease_ttl, clock, recent_s)

    def save_labels(self, name: str, labels: np.ndarray) -> str:
        """As `ClusteringRegistry.save_labels`: the labels (l,) as int64, replacing earlier ones; the sha256 of
        the bytes. `NotFound` if the clustering was deleted. One put."""
        labels = np.ascontiguousarray(labels, dtype=np.int64)
        if labels.ndim != 1:
            raise ValueError(f"labels: expected a 1-D array, got shape {labels.shape}")
        return self._write_array(name, _LABELS, labels)

    def save_coordinates(self, name: str, coordinates: np.ndarray) -> str:
        """As `ClusteringRegistry.save_coordinates`: the (l, 2) coordinates as float32; the sha256. One put."""
        coordinates = np.ascontiguousarray(coordinates, dtype=np.float32)
        if coordinates.ndim != 2 or coordinates.shape[1] != 2:
            raise ValueError(f"coordinates: expected shape (rows, 2), got {coordinates.shape}")
        return self._write_array(name, _COORDINATES, coordinates)

    def _write_array(self, name: str, filename: str, array: np.ndarray) -> str:
        if self.objects.version(self._key(name, self.document)) is None:
            raise NotFound(self.kind, name)
        buffer = io.BytesIO()
        write_npy(buffer, array)
        self.objects.put(self._key(name, filename), buffer.getvalue())
        return hashlib.sha256(buffer.getbuffer()).hexdigest()

    def _array(self, name: str, filename: str, sha256: str | None) -> np.ndarray:
        """The stored array, checked against ``sha256`` where given; `ObjectMissing`, or ValueError saying what
        is wrong with it. A HEAD request while kept; else a read."""
        key = self._key(name, filename)
        version = self.objects.version(key)
        if version is None:
            raise ObjectMissing(f"{key}: no such object", key)
        kept = _KEPT.get((self.objects.url, key), (version, sha256))
        if kept is not None:
            return kept
        stored = self.objects.get(key)
        if sha256 is not None and hashlib.sha256(stored.data).hexdigest() != sha256:
            raise ValueError("it does not match its digest: altered in the store")
        array = read_array(io.BytesIO(stored.data), len(stored.data))
        array.setflags(write=False)
        _KEPT.put((self.objects.url, key), (stored.version, sha256), array)
        return array

    def coordinates(self, name: str, sha256: str) -> np.ndarray:
        """As `ClusteringRegistry.coordinates`: the (l, 2) coordinates checked against ``sha256``; `Damaged` if
        missing, unreadable, of another shape, not finite or failing the digest. O(l) when not kept."""
        try:
            stored = self._array(name, _COORDINATES, sha256)
            if stored.ndim != 2 or stored.shape[1] != 2 or not np.isfinite(stored).all():
                raise ValueError(f"not the finite (rows, 2) coordinates it should hold (shape {stored.shape})")
        except ObjectMissing:
            raise self._damaged_file(name, _COORDINATES, "it is missing") from None
        except (ValueError, EOFError) as exc:
            raise self._damaged_file(name, _COORDINATES, str(exc) or type(exc).__name__) from None
        return stored

    def labels(self, name: str, offset: int = 0, limit: int | None = None,
               sha256: str | None = None) -> tuple[list[int], int]:
        """As `ClusteringRegistry.labels`: ``(labels[offset : offset + limit], total)``; `NotFound` before the
        clustering completes, `Invalid` on ``labels_offset`` past the end, `Damaged` for damaged labels."""
        return labels_page(self._stored_labels(name, sha256), offset, limit)

    def labels_array(self, name: str, sha256: str | None = None) -> np.ndarray:
        """As `ClusteringRegistry.labels_array`: every label as one (writable) int64 array. O(l)."""
        return np.array(self._stored_labels(name, sha256), dtype=np.int64)

    def _stored_labels(self, name: str, sha256: str | None) -> np.ndarray:
        try:
            stored = self._array(name, _LABELS, sha256)
            if stored.ndim != 1:
                raise ValueError(f"a labels file holds one label a row, not shape {stored.shape}")
        except ObjectMissing:
            if sha256 is not None:
                raise self._damaged_file(name, _LABELS, "it is missing") from None
            raise NotFound("labels", name, field="name",
                           message=f"clustering {name!r} has no labels yet: they are written when it completes") \
                from None
        except (ValueError, EOFError) as exc:
            raise self._damaged_file(name, _LABELS, str(exc) or type(exc).__name__) from None
        return stored

    def _damaged_file(self, name: str, filename: str, cause: str) -> Damaged:
        what = "labels" if filename == _LABELS else "spectral coordinates"
        return Damaged(f"clustering {name!r}: its {what}, {self.kind_folder}/{name}/{filename}, cannot be read "
                       f"({cause}); delete the clustering (DELETE /v1/clusterings/{name}) and create it again",
                       field="name", cause=cause)


__all__ = ["ObjectClusteringRegistry"]
