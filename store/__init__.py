"""Persistence: zarr data sets in immutable versions, atomic versioned checkpoints, the model registry.

No HTTP and no dask here; numpy, zarr and the standard library only. Every
write is atomic (temporary name, fsync, rename) and every stored document
carries ``schema_version`` 1. Names are validated by `validate_name`, so no
input can address a path outside the data folder.
"""

from store.checkpoints import CheckpointStore
from store.datasets import DatasetStore
from store.errors import Conflict, Invalid, NotFound, StoreError
from store.models import ModelRegistry
from store.names import validate_name
from store.segments import SegmentedRows

__all__ = [
    "CheckpointStore",
    "Conflict",
    "DatasetStore",
    "Invalid",
    "ModelRegistry",
    "NotFound",
    "SegmentedRows",
    "StoreError",
    "validate_name",
]
