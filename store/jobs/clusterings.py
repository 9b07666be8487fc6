"""The clustering registry: one `ClusteringRecord` per spectral clustering, and its labels.

A clustering (seed 000 §5.3; `kpca.clustering`) is a job like a model's fit
(`store.jobs.registry`): the same data set, kernel, solver and parameters, status,
progress and history, checkpoints, cancel flag and lease. Layout under the
data folder ``root``::

    clusterings/{name}/clustering.json   the record (`ClusteringRecord`, schema_version 2; version 1 is
                                         migrated on read, `store.jobs.records.migrate_placement`)
    clusterings/{name}/labels.npy        the labels of a completed clustering: int64, one per row
    clusterings/{name}/cancel, .lock, .fit, checkpoints/   as a model's (`store.jobs.registry`, `store.jobs.checkpoints`)

What a clustering adds to a model's record: ``n_clusters`` (k, the
eigenvectors its solver fits: ``n_components``), the reference labels
(``labels_dataset``, a committed data set with one column and a row per row
of the data set, pinned to its version at creation) and the figures they
give: each pass's `ClusteringPassRecord` has ``variation_of_information``
against them (Meila's VI, nats; `kpca.metrics.variation_of_information`)
and ``labels_change``, the VI between consecutive passes' labellings (with
or without reference labels); the record keeps the final
``variation_of_information``. The labels themselves are one ``.npy`` file,
written atomically when the clustering completes and read a page at a time
(`ClusteringRegistry.labels`), so the record stays small whatever the rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
from pydantic import Field

from kpca import defaults
from store.atomic import write_via_temp
from store.datasets.records import DatasetInfo
from store.errors import Invalid, NotFound
from store.jobs.registry import JobRegistry
from store.npy import map_npy, write_npy
from store.jobs.records import JobRecord, PassRecord, Placement, dataset_fields, migrate_checkpoint, migrate_placement

CLUSTERING_SCHEMA_VERSION = 3
_LABELS = "labels.npy"


class ClusteringPassRecord(PassRecord):
    """One completed pass of a clustering: a model's pass record (``convergence`` of the eigenvectors of
    L, their eigenvalues) and the figures of its labels."""

    variation_of_information: float | None = Field(
        default=None, description="VI (nats) between this pass's labels and the reference labels "
                                  "(labels_dataset); None without them. 0: the same partition")
    labels_change: float | None = Field(
        default=None, description="VI (nats) between this pass's labels and the previous pass's; 0: the "
                                  "labelling did not change. None at the first pass")


class ClusteringRecord(JobRecord):
    """A spectral clustering: its configuration, its fit's state and its figures (module docstring)."""

    kind: ClassVar[str] = "clustering"
    route: ClassVar[str] = "/v1/clusterings"

    schema_version: int = Field(default=CLUSTERING_SCHEMA_VERSION, description="version of this record's layout")
    n_clusters: int = Field(ge=2, description="number of clusters k (and of eigenvectors of L fitted)")
    n_rows: int | None = Field(default=None, description="rows of the data set version: the number of labels")
    labels_dataset: str | None = Field(default=None, description="data set of reference labels (one column)")
    labels_dataset_version: int | None = Field(default=None, description="its version, pinned at creation")
    history: list[ClusteringPassRecord] = Field(default_factory=list, description="one record per completed pass")
    variation_of_information: float | None = Field(
        default=None, description="VI (nats) of the final labels against the reference labels")

    @property
    def n_components(self) -> int:
        """The eigenvectors of L the solver fits: one per cluster (NJW)."""
        return self.n_clusters

    @classmethod
    def new(cls, name: str, dataset: DatasetInfo, labels: DatasetInfo | None = None, *, kernel, n_clusters: int,
            solver: str, params: dict, placement: Placement | None = None,
            checkpoint_keep: int = defaults.CHECKPOINT_KEEP) -> "ClusteringRecord":
        """A ``queued`` record for a clustering of ``dataset`` (its public metadata, `store.DatasetStore.get`)
        with reference ``labels`` (the labels data set's metadata, or None), the request's fields
        already checked (`service`). `Invalid` naming ``labels_dataset`` when the labels are not one column
        with a row per row of the data set. Cost O(1)."""
        n_rows = dataset.n_rows
        if labels is not None:
            if labels.n_features != 1:
                raise Invalid("labels_dataset", f"labels_dataset: data set {labels.name!r} has "
                                                f"{labels.n_features} columns; reference labels are one "
                                                "column, a label per row")
            if labels.n_rows != n_rows:
                raise Invalid("labels_dataset", f"labels_dataset: data set {labels.name!r} has {labels.n_rows} "
                                                f"rows; the labels of {dataset.name!r} are one per row, "
                                                f"{n_rows}")
        return cls(name=name, **dataset_fields(dataset), n_rows=n_rows, kernel=kernel, n_clusters=n_clusters,
                   solver=solver, params=params, placement=placement or Placement(), checkpoint_keep=checkpoint_keep,
                   labels_dataset=None if labels is None else labels.name,
                   labels_dataset_version=None if labels is None else labels.version)


class ClusteringRegistry(JobRegistry):
    """Clustering records and labels under ``root/clusterings`` (`store.jobs.registry.JobRegistry`)."""

    record_type = ClusteringRecord
    kind_folder = "clusterings"
    kind = "clustering"
    document = "clustering.json"
    leftovers = ("cancel", _LABELS)

    def migrate(self, doc: dict) -> dict:
        """Version 1 records (``exact_limit`` and ``params.workers`` beside the solver's parameters) to
        version 2 (`store.jobs.records.migrate_placement`), version 2 (no ``checkpoint``) to version 3
        (`store.jobs.records.migrate_checkpoint`)."""
        if doc.get("schema_version", 1) < 2:
            doc = migrate_placement(doc, 2)
        if doc["schema_version"] < 3:
            doc = migrate_checkpoint(doc, 3)
        return doc

    def save_labels(self, name: str, labels: np.ndarray) -> None:
        """Write the labels (l,) of clustering ``name`` atomically as int64, replacing earlier ones;
        `NotFound` if the clustering was deleted. Cost O(l) plus two fsyncs."""
        labels = np.ascontiguousarray(labels, dtype=np.int64)
        if labels.ndim != 1:
            raise ValueError(f"labels: expected a 1-D array, got shape {labels.shape}")
        try:
            write_via_temp(self._labels_path(name), lambda handle: write_npy(handle, labels))
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound(self.kind, name) from None

    def labels(self, name: str, offset: int = 0, limit: int | None = None) -> tuple[list[int], int]:
        """``(labels[offset : offset + limit], total)`` of clustering ``name``; `NotFound` (field ``name``)
        if it has no labels (not completed), `Invalid` naming ``labels_offset`` past the end. The file
        is memory-mapped: cost O(limit), whatever the rows."""
        try:
            stored = map_npy(self._labels_path(name))
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound("labels", name, field="name",
                           message=f"clustering {name!r} has no labels yet: they are written when it completes") \
                from None
        total = int(stored.shape[0])
        if offset > total:
            raise Invalid("labels_offset", f"labels_offset must be at most the {total} labels, got {offset}")
        stop = total if limit is None else min(total, offset + limit)
        return np.asarray(stored[offset:stop]).tolist(), total

    def _labels_path(self, name: str) -> Path:
        return self.folders.path(name) / _LABELS
