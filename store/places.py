"""Every store the service and the workers use, opened from a data location setting: a folder's path or
``s3://bucket/prefix`` (`store.objects.open`).

A path opens the folder stores (`DatasetStore`, `ModelRegistry`, ...: ``flock`` and renames on one machine or a
shared POSIX mount); a URL opens their object-store counterparts over one `store.objects.s3.S3Objects` per process
and URL (create-once writes, compare-and-swap and expiring leases: machines that share nothing but the store,
issue 57). Each sub-package opens its own (`store.datasets.open`, `store.jobs.open`); this module gathers them,
with the image jobs and `tune`, the two figures of a process's object-store stores (the workers' settings
``lease_ttl_s`` and ``read_cache_mb``, `workers.settings`).
"""

from __future__ import annotations

from pathlib import Path

from store.datasets.object_rows import CHUNK_CACHE
from store.datasets.open import Datasets, datasets_at
from store.image_job_objects import ObjectImageJobStore
from store.image_jobs import ImageJobStore
from store.jobs.open import (
    Clusterings,
    Models,
    Registry,
    checkpoints_at,
    checkpoints_of,
    clusterings_at,
    lease_ttl,
    models_at,
    registry_at,
    set_lease_ttl,
    where_of,
)
from store.objects.open import is_url, local_folder, location, objects_at, prepared

ImageJobs = ImageJobStore | ObjectImageJobStore


def tune(lease_ttl_s: float | None = None, read_cache_mb: float | None = None) -> None:
    """Set this process's lease time to live (seconds, at least 3; `store.jobs.open.set_lease_ttl`) for the
    registries opened from now on, and its read cache's budget (MiB; 0 turns it off,
    `store.datasets.object_rows.ChunkCache.resize`). O(1)."""
    if lease_ttl_s is not None:
        set_lease_ttl(lease_ttl_s)
    if read_cache_mb is not None:
        CHUNK_CACHE.resize(int(max(0.0, float(read_cache_mb)) * 2**20))


def image_jobs_at(where: str | Path) -> ImageJobs:
    """The image jobs at ``where`` (`ImageJobStore` or `ObjectImageJobStore`). O(1)."""
    if is_url(where):
        return ObjectImageJobStore(objects_at(str(where)))
    return ImageJobStore(Path(where))


__all__ = ["is_url", "location", "prepared", "tune", "lease_ttl", "objects_at", "datasets_at", "registry_at",
           "models_at", "clusterings_at", "checkpoints_at", "checkpoints_of", "where_of", "image_jobs_at",
           "local_folder", "Datasets", "Models", "Clusterings", "Registry", "ImageJobs"]
