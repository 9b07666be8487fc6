"""The data sets at a data location: the folder store for a path, the object-store one for ``s3://...``
(`store.objects.open`)."""

from __future__ import annotations

import os
from pathlib import Path

from store.datasets.dataset_store import DatasetStore
from store.datasets.object_datasets import ObjectDatasetStore
from store.objects.open import is_url, objects_at

Datasets = DatasetStore | ObjectDatasetStore


def datasets_at(where: str | Path, recent_s: float = 0.0) -> Datasets:
    """The data sets at ``where`` (`DatasetStore`, or `ObjectDatasetStore` over `objects_at`, whose ``recent_s``
    says how long a description it read may be answered again without a request: the API's). O(1)."""
    if is_url(where):
        return ObjectDatasetStore(objects_at(os.fspath(where)), recent_s)
    return DatasetStore(where)


__all__ = ["Datasets", "datasets_at"]
