"""The clustering registry: one `ClusteringRecord` per spectral clustering, and its labels.

A clustering (seed 000 §5.3; `kpca.clustering`) is a job like a model's fit
(`store.jobs.registry`): the same data set, kernel, solver and parameters, status,
progress and history, checkpoints, cancel flag and lease. Layout under the
data folder ``root``::

    clusterings/{name}/clustering.json   the record (`ClusteringRecord`, schema_version 2; version 1 is
                                         migrated on read, `store.jobs.records.migrate_placement`)
    clusterings/{name}/labels.npy        the labels of a completed clustering: int64, one per row
    clusterings/{name}/cancel, .lock, .fit, checkpoints/
                                         as a model's (`store.jobs.registry`, `store.jobs.checkpoints`)

What a clustering adds to a model's record: ``n_clusters`` (k, the
eigenvectors its solver fits: ``n_components``), the reference labels
(``labels_dataset``, a committed data set with one column and a row per row
of the data set, pinned to its version at creation) and the figures they
give: each pass's `ClusteringPassRecord` has ``variation_of_information``
against them (Meila's VI, nats; `kpca.metrics.variation_of_information`)
and ``labels_change``, the VI between consecutive passes' labellings (with
or without reference labels); the record keeps the final
``variation_of_information``. The labels themselves are one ``.npy`` file,
written atomically when the clustering completes, its sha256 kept in the record (``labels_sha256``), and
read a page at a time (`ClusteringRegistry.labels`, which checks that digest), so the record stays small
whatever the rows.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
from pathlib import Path
from typing import ClassVar

import numpy as np
from pydantic import Field

from kpca import defaults
from store import quarantine
from store.atomic import write_via_temp
from store.datasets.records import DatasetInfo
from store.errors import Damaged, Invalid, NotFound
from store.jobs.records import JobRecord, PassRecord, Placement, dataset_fields, migrate_checkpoint, migrate_placement
from store.jobs.registry import JobRegistry
from store.kept import KeptBySignature
from store.npy import map_npy, write_npy

CLUSTERING_SCHEMA_VERSION = 3
_LABELS = "labels.npy"
_COORDINATES = "coordinates.npy"


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
    history: list[ClusteringPassRecord] = Field(  # type: ignore[assignment]  # a clustering's passes say more
        default_factory=list, description="one record per completed pass")
    variation_of_information: float | None = Field(
        default=None, description="VI (nats) of the final labels against the reference labels")
    labels_sha256: str | None = Field(default=None, description="sha256 of labels.npy as written when the "
                                      "clustering completed, checked when they are read; None before, and in "
                                      "records written before it was kept")
    coordinates_sha256: str | None = Field(
        default=None, description="sha256 of coordinates.npy, the rows' two leading spectral coordinates that "
        "clusters.png draws, as written when the clustering completed; None before, and in records written "
        "before they were kept")

    @property
    def n_components(self) -> int:
        """The eigenvectors of L the solver fits: one per cluster (NJW)."""
        return self.n_clusters

    @classmethod
    def new(cls, name: str, dataset: DatasetInfo, labels: DatasetInfo | None = None, *, kernel, n_clusters: int,
            solver: str, params: dict, placement: Placement | None = None,
            checkpoint_keep: int = defaults.CHECKPOINT_KEEP) -> ClusteringRecord:
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


class ClusteringRegistry(JobRegistry[ClusteringRecord]):
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

    def save_labels(self, name: str, labels: np.ndarray) -> str:
        """Write the labels (l,) of clustering ``name`` atomically as int64, replacing earlier ones; the
        sha256 of the file written (for the record's ``labels_sha256``). `NotFound` if the clustering was
        deleted. Cost O(l) plus two fsyncs."""
        labels = np.ascontiguousarray(labels, dtype=np.int64)
        if labels.ndim != 1:
            raise ValueError(f"labels: expected a 1-D array, got shape {labels.shape}")
        return self._write_array(name, _LABELS, labels)

    def save_coordinates(self, name: str, coordinates: np.ndarray) -> str:
        """Write the rows' two spectral coordinates (l, 2) of clustering ``name`` atomically as float32; the
        sha256 of the file written (for the record's ``coordinates_sha256``). `NotFound` if the clustering was
        deleted. Cost O(l) plus two fsyncs."""
        coordinates = np.ascontiguousarray(coordinates, dtype=np.float32)
        if coordinates.ndim != 2 or coordinates.shape[1] != 2:
            raise ValueError(f"coordinates: expected shape (rows, 2), got {coordinates.shape}")
        return self._write_array(name, _COORDINATES, coordinates)

    def coordinates(self, name: str, sha256: str) -> np.ndarray:
        """The rows' two spectral coordinates (l, 2) of clustering ``name``, checked against the record's
        ``coordinates_sha256``: a file missing, unreadable, of another shape, not finite or failing that digest
        is a `store.errors.Damaged` (409 ``corrupt`` naming it). Cost O(l)."""
        path = self.folders.path(name) / _COORDINATES
        try:
            _check_digest(path, sha256)
            stored = np.asarray(map_npy(path))
            if stored.ndim != 2 or stored.shape[1] != 2 or not np.isfinite(stored).all():
                raise ValueError(f"not the finite (rows, 2) coordinates it should hold (shape {stored.shape})")
        except (FileNotFoundError, NotADirectoryError):
            raise self._damaged_file(name, _COORDINATES, "it is missing") from None
        except (ValueError, OSError, EOFError) as exc:
            raise self._damaged_file(name, _COORDINATES, str(exc) or type(exc).__name__) from None
        return stored

    def _write_array(self, name: str, filename: str, array: np.ndarray) -> str:
        """Write ``array`` as ``filename`` in the clustering's folder atomically; the sha256 of the bytes."""
        buffer = io.BytesIO()
        write_npy(buffer, array)
        try:
            write_via_temp(self.folders.path(name) / filename, lambda handle: handle.write(buffer.getbuffer()))
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound(self.kind, name) from None
        return hashlib.sha256(buffer.getbuffer()).hexdigest()

    def labels(self, name: str, offset: int = 0, limit: int | None = None,
               sha256: str | None = None) -> tuple[list[int], int]:
        """``(labels[offset : offset + limit], total)`` of clustering ``name``; `NotFound` (field ``name``)
        if it has no labels (not completed), `Invalid` naming ``labels_offset`` past the end. With
        ``sha256`` (the record's ``labels_sha256``: the labels were written), a labels file that is
        missing, unreadable or fails that digest is a `store.errors.Damaged` (a 409 ``corrupt`` naming
        it). The file is memory-mapped: cost O(limit), whatever the rows, plus one hash of the file
        (O(l)) the first time this process reads it after it changed (`store.kept`)."""
        return labels_page(self._stored_labels(name, sha256), offset, limit)

    def labels_array(self, name: str, sha256: str | None = None) -> np.ndarray:
        """Every label of clustering ``name`` as one int64 array (for a picture of them), checked as `labels`
        checks them, with its errors. O(l)."""
        return np.array(self._stored_labels(name, sha256), dtype=np.int64)

    def _stored_labels(self, name: str, sha256: str | None) -> np.ndarray:
        """The labels file memory-mapped, its digest checked against ``sha256`` where given (`labels`)."""
        path = self._labels_path(name)
        try:
            if sha256 is not None:
                _check_digest(path, sha256)
            stored = map_npy(path)
            if stored.ndim != 1:
                raise ValueError(f"a labels file holds one label a row, not shape {stored.shape}")
        except (FileNotFoundError, NotADirectoryError):
            if sha256 is not None:
                raise self._damaged_labels(name, "it is missing") from None
            raise NotFound("labels", name, field="name",
                           message=f"clustering {name!r} has no labels yet: they are written when it completes") \
                from None
        except (ValueError, OSError, EOFError) as exc:
            raise self._damaged_labels(name, str(exc) or type(exc).__name__) from None
        return stored

    def _labels_path(self, name: str) -> Path:
        return self.folders.path(name) / _LABELS

    def _damaged_labels(self, name: str, cause: str) -> Damaged:
        return self._damaged_file(name, _LABELS, cause)

    def _damaged_file(self, name: str, filename: str, cause: str) -> Damaged:
        what = "labels" if filename == _LABELS else "spectral coordinates"
        error = Damaged(f"clustering {name!r}: its {what}, {self.kind_folder}/{name}/{filename}, cannot be read "
                        f"({cause}); delete the clustering (DELETE /v1/clusterings/{name}) and create it again",
                        field="name", cause=cause)
        quarantine.note(self.folders.path(name) / filename, error)
        return error


def labels_page(stored: np.ndarray, offset: int, limit: int | None) -> tuple[list[int], int]:
    """``(stored[offset : offset + limit], total)`` of a clustering's labels; `Invalid` naming ``labels_offset``
    past the end. O(limit)."""
    total = int(stored.shape[0])
    if offset > total:
        raise Invalid("labels_offset", f"labels_offset must be at most the {total} labels, got {offset}")
    stop = total if limit is None else min(total, offset + limit)
    return np.asarray(stored[offset:stop]).tolist(), total


#: the labels files this process found intact, by path, under their file's signature (`store.kept`)
_INTACT = KeptBySignature(256)


def _check_digest(path: Path, sha256: str) -> None:
    """A ValueError unless the file at ``path`` has the digest ``sha256``; an intact file is hashed once
    per change (`_INTACT`). `FileNotFoundError` if it is missing. Cost: a ``stat``; O(file) when hashed."""
    info = os.stat(path)
    if stat.S_ISDIR(info.st_mode):
        raise ValueError("a folder stands in its place")
    signature = (info.st_ino, info.st_mtime_ns, info.st_ctime_ns, info.st_size)
    if _INTACT.get(str(path), signature) == sha256:
        return
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    if digest.hexdigest() != sha256:
        raise ValueError("it does not match its digest: altered on disk")
    _INTACT.put(str(path), signature, sha256)
