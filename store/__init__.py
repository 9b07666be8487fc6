"""Persistence, one sub-package per resource: data sets (`store.datasets`: zarr rows in immutable
versions) and jobs (`store.jobs`: the model and clustering records, one registry per kind, their
atomic versioned checkpoints and model archives); what both use stays here (atomic writes, folders
and locks, names, errors, checksums, .npy files, timestamps).

No HTTP and no dask here; numpy, zarr, pydantic (the typed records: a model's,
`store.jobs.records`; a data set's, `store.datasets.records`) and the standard library. Every write
is atomic (temporary name, fsync, rename) and every stored document carries a ``schema_version``
(model records 4, clustering records 3, the others 1) and the sha256 of its own content, checked when it
is read; a damaged record is quarantined, never fatal to another resource (`store.quarantine`). Names
are validated by `validate_name`, so no input can address a path outside the data folder.
"""

from store.datasets.dataset_store import DatasetStore
from store.datasets.records import DatasetInfo, DatasetRecord
from store.datasets.segments import RowWindow, SegmentedRows
from store.errors import Conflict, Invalid, NotFound, StoreError
from store.jobs.checkpoints import CheckpointStore
from store.jobs.clusterings import ClusteringRecord, ClusteringRegistry
from store.jobs.models import ModelRegistry
from store.jobs.records import ModelRecord
from store.names import validate_name

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
