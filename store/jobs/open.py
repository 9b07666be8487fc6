"""The job registries and checkpoints at a data location: the folder ones for a path, the object-store ones for
``s3://...`` (`store.objects.open`), whose fit leases live `lease_ttl` seconds after their last renewal (how long
a fit whose worker died waits before another runner takes it over; `set_lease_ttl`, the same in every process
of a deployment)."""

from __future__ import annotations

import os
from pathlib import Path

from store.jobs.checkpoints import CheckpointStore
from store.jobs.clusterings import ClusteringRegistry
from store.jobs.models import ModelRegistry
from store.jobs.object_clusterings import ObjectClusteringRegistry
from store.jobs.object_registry import LEASE_TTL_S, ObjectJobRegistry
from store.jobs.registry import JobRegistry
from store.objects.open import is_url, objects_at

Models = ModelRegistry | ObjectJobRegistry
Clusterings = ClusteringRegistry | ObjectClusteringRegistry
Registry = JobRegistry | ObjectJobRegistry

_LEASE = {"ttl_s": LEASE_TTL_S}


def set_lease_ttl(seconds: float) -> None:
    """The lease time to live of the object registries opened from now on in this process (at least 3 s). O(1)."""
    _LEASE["ttl_s"] = max(3.0, float(seconds))


def lease_ttl() -> float:
    """The lease time to live `set_lease_ttl` set (`LEASE_TTL_S` unless set). O(1)."""
    return _LEASE["ttl_s"]


def registry_at(kind: type[JobRegistry], where: str | Path) -> Registry:
    """The registry of jobs of ``kind`` (`ModelRegistry`, `ClusteringRegistry`, a subclass of `JobRegistry`) at
    ``where``: that class on a folder, its object-store counterpart on an object store. O(1)."""
    if is_url(where):
        if issubclass(kind, ClusteringRegistry):
            return ObjectClusteringRegistry(objects_at(os.fspath(where)), lease_ttl())
        return ObjectJobRegistry(objects_at(os.fspath(where)), kind, lease_ttl())
    return kind(where)


def models_at(where: str | Path, recent_s: float = 0.0) -> Models:
    """The model registry at ``where`` (as `registry_at`); on an object store, ``recent_s``: how long a record it
    read may be answered again without a request (`ObjectJobRegistry.get`; the API's). O(1)."""
    if is_url(where):
        return ObjectJobRegistry(objects_at(os.fspath(where)), ModelRegistry, lease_ttl(), recent_s=recent_s)
    return ModelRegistry(where)


def clusterings_at(where: str | Path, recent_s: float = 0.0) -> Clusterings:
    """The clustering registry at ``where`` (as `models_at`). O(1)."""
    if is_url(where):
        return ObjectClusteringRegistry(objects_at(os.fspath(where)), lease_ttl(), recent_s=recent_s)
    return ClusteringRegistry(where)


def checkpoints_at(where: str | Path, kind_folder: str = "models", kind: str = "model") -> CheckpointStore:
    """The checkpoints of the jobs of a kind at ``where`` (`CheckpointStore`, on a folder or on objects). O(1)."""
    if is_url(where):
        return CheckpointStore.on_objects(objects_at(os.fspath(where)), kind_folder, kind)
    return CheckpointStore(where, kind_folder, kind)


def checkpoints_of(registry: Registry) -> CheckpointStore:
    """The checkpoints of the jobs of ``registry`` (a folder or object registry), where it keeps them. O(1)."""
    if isinstance(registry, ObjectJobRegistry):
        return CheckpointStore.on_objects(registry.objects, registry.kind_folder, registry.kind)
    return CheckpointStore.of(registry)


def where_of(registry: Registry) -> str:
    """The location a folder or object registry keeps its jobs at. O(1)."""
    return registry.objects.url if isinstance(registry, ObjectJobRegistry) else str(registry.root)


__all__ = ["Models", "Clusterings", "Registry", "set_lease_ttl", "lease_ttl", "registry_at", "models_at",
           "clusterings_at", "checkpoints_at", "checkpoints_of", "where_of"]
