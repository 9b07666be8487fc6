"""Persistence: zarr data sets in immutable versions, atomic versioned checkpoints, the model and
clustering records (`store.jobs`: one registry per kind of job).

No HTTP and no dask here; numpy, zarr, pydantic (the typed records: a model's,
`store.records`; a data set's, `store.dataset_meta`) and the standard library. Every write is atomic (temporary
name, fsync, rename) and every stored document carries a ``schema_version``
(model records 2, the others 1). Names are validated by `validate_name`, so
no input can address a path outside the data folder.
"""

from store.checkpoints import CheckpointStore
from store.clusterings import ClusteringRecord, ClusteringRegistry
from store.dataset_meta import DatasetInfo, DatasetRecord
from store.datasets import DatasetStore
from store.errors import Conflict, Invalid, NotFound, StoreError
from store.models import ModelRegistry
from store.names import validate_name
from store.records import ModelRecord
from store.segments import RowWindow, SegmentedRows

__all__ = [
    "CheckpointStore",
    "ClusteringRecord",
    "ClusteringRegistry",
    "Conflict",
    "DatasetInfo",
    "DatasetRecord",
    "DatasetStore",
    "Invalid",
    "ModelRecord",
    "ModelRegistry",
    "NotFound",
    "RowWindow",
    "SegmentedRows",
    "StoreError",
    "validate_name",
]
