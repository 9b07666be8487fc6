"""Spectral clustering on a dask worker (seed 000 §5.3): the fit driver of a model, with labels.

`run_clustering` is the task the service submits for a clustering. It is a
model's fit (`workers.fit.FitJob`: lease, start or resume from the latest
checkpoint, passes with progress and history, cancel, errors a user can act
on) over other rows and with more to say after each pass
(`ClusteringJob`):

* the rows are those of ``M = L + c I``, ``L = D^-1/2 A D^-1/2`` with NJW's
  ``A_ii = 0``, over the clustering's data set version
  (`kpca.affinity.AffinityRows`); the centring pass is the degree pass, and
  the degrees and the shift c travel in every checkpoint
  (``affinity_degrees``, ``affinity_shift``), so a resume restores them
  instead of passing over the data again;
* after every pass (and after a one-shot ``exact`` or ``lanczos`` fit) the
  NJW labels of the current eigenvectors (`kpca.clustering.clustering_from_state`:
  k-means with ``random_state`` ``params.seed``, 0 when not given, 10
  restarts); the pass's record gets ``labels_change``, the variation of
  information between them and the previous pass's labels (the figure of a
  clustering without reference labels: 0 once the labelling settles), and,
  with ``labels_dataset``, ``variation_of_information`` against the
  reference labels; the checkpoint keeps the labels and k-means centres
  beside the solver state (`kpca.clustering.Clustering.to_state`), which a
  resume strips (`kpca.clustering.solver_state`) before the passes continue;
* the ``convergence`` figure is the model's (`workers.progress.ConvergenceFigure`)
  for the eigenvectors of M: the excess error of eq. 22 on M where l is
  below the exact limit, else the change of the eigenvalue estimates; the
  eigenvalues reported are L's, ``mu - c`` (`ClusteringFigure`);
* on completion the final labels are written to the clustering's
  ``labels.npy`` (`store.jobs.clusterings.ClusteringRegistry.save_labels`) before
  the record says ``completed``, with the final ``variation_of_information``.

Costs per pass besides the solver's: O(k^2 l) for the embedding and k-means
on l x k (10 restarts). `predict_rows` labels new points by the Nystrom
extension of the eigenvectors (one pass over the data set per request).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kpca.affinity import AffinityRows
from kpca.clustering import (
    Clustering,
    check_clustering,
    clustering_from_state,
    kept_labels,
    picture_coordinates,
    solver_state,
)
from kpca.metrics import variation_of_information
from kpca.rows import KernelRows
from kpca.solvers import SolverState
from store import ClusteringRegistry
from store.jobs.clusterings import ClusteringPassRecord, ClusteringRecord
from store.jobs.records import Convergence, JobRecord
from store.places import clusterings_at, datasets_at
from workers.fit import FitJob
from workers.priority import fit_nice, run_niced
from workers.progress import FitFigure, still_ours
from workers.serve import load_latest


def kmeans_seed(record: ClusteringRecord) -> int:
    """The k-means ``random_state`` of a clustering: ``params.seed``, 0 when not given."""
    return int(record.params.get("seed") or 0)


class ClusteringJob(FitJob):
    """A clustering as the fit driver runs it (module docstring)."""

    registry_type = ClusteringRegistry
    registry: ClusteringRegistry  # made by `FitJob.__init__` from registry_type
    shardable = False  # its rows are affinities (`kpca.affinity.AffinityRows`), not kernel rows of a store
    pass_record = ClusteringPassRecord

    def __init__(self, data_dir: str | Path):
        super().__init__(data_dir)
        self.seed = 0
        self.reference: np.ndarray | None = None  # the reference labels (l,), if given
        self.previous: np.ndarray | None = None  # the last pass's labels
        self.latest: Clustering | None = None  # the last pass's clustering

    def open_rows(self, record: JobRecord) -> AffinityRows:
        """The rows of L over the data set version; reads the reference labels (one column) as well."""
        record = clustering_record(record)
        self.seed = kmeans_seed(record)
        if record.labels_dataset is not None:
            labels = self.datasets.open_array(record.labels_dataset, record.labels_dataset_version)
            self.reference = np.asarray(labels[:, 0]).ravel()
        source = self.datasets.open_array(record.dataset, record.dataset_version)
        return AffinityRows(source, record.fit_kernel or record.kernel)

    def figure(self, record: JobRecord, rows: KernelRows) -> ClusteringFigure:
        """The model's convergence figure over the rows of M, reporting L's eigenvalues."""
        return ClusteringFigure(super().figure(record, rows))

    def check_data(self, record: JobRecord, rows: KernelRows) -> None:
        """`kpca.clustering.check_clustering`: the number of clusters, the solver and the affinity."""
        record = clustering_record(record)
        check_clustering(record.n_clusters, rows.n_rows, rows.kernel, record.solver, record.params)

    def restored(self, state: SolverState) -> SolverState:
        labels = kept_labels(state)
        if labels is not None:
            self.previous = labels
        return solver_state(state)

    def annotate(self, rows: KernelRows, state: SolverState) -> tuple[SolverState, dict]:
        clustering = clustering_from_state(state, affinity_rows(rows), self.seed)
        fields = {"labels_change": None if self.previous is None else
                  variation_of_information(self.previous, clustering.labels),
                  "variation_of_information": self._against_reference(clustering.labels)}
        self.previous, self.latest = clustering.labels, clustering
        return clustering.to_state(), fields

    def finish(self, record: JobRecord, rows: KernelRows, state: SolverState) -> dict:
        clustering = self.latest
        if clustering is None or clustering.state.pass_ != state.pass_:  # no pass ran (crash recovery)
            clustering = clustering_from_state(solver_state(state), affinity_rows(rows), self.seed)
        still_ours(self.registry, record)
        digest = self.registry.save_labels(record.name, clustering.labels)
        drawn = self.registry.save_coordinates(record.name, picture_coordinates(clustering.embedding))
        return {"variation_of_information": self._against_reference(clustering.labels), "labels_sha256": digest,
                "coordinates_sha256": drawn}

    def _against_reference(self, labels: np.ndarray) -> float | None:
        return None if self.reference is None else variation_of_information(self.reference, labels)


class ClusteringFigure:
    """`workers.progress.ConvergenceFigure` of a clustering's fit on M, with the eigenvalues of L, ``mu - c``
    (the components' Ritz values less the shift of `kpca.affinity`; 0 stays 0)."""

    def __init__(self, figure: FitFigure):
        self.figure = figure

    def __call__(self, rows: KernelRows, state: SolverState) -> tuple[Convergence, np.ndarray]:
        convergence, mu = self.figure(rows, state)
        mu = np.asarray(mu, dtype=np.float64)
        centering = affinity_rows(rows).centering
        if centering is None:  # a figure follows a pass, and every pass starts from the degree pass's centring
            raise RuntimeError("a clustering's convergence figure before its degree pass (the rows have no degrees)")
        return convergence, np.where(mu > 0, mu - centering.shift, 0.0)


def clustering_record(record: JobRecord) -> ClusteringRecord:
    """``record`` as the `ClusteringRecord` it is: a `ClusteringJob` reads its records from its
    `ClusteringRegistry`, and `FitJob`'s driver hands them back to it."""
    if not isinstance(record, ClusteringRecord):
        raise TypeError(f"a clustering job was handed a {type(record).__name__}, not a ClusteringRecord")
    return record


def affinity_rows(rows: KernelRows) -> AffinityRows:
    """``rows`` as the `AffinityRows` they are: `ClusteringJob.open_rows` opens every clustering's rows, and
    `FitJob`'s driver hands them back to it."""
    if not isinstance(rows, AffinityRows):
        raise TypeError(f"a clustering job was handed {type(rows).__name__}, not AffinityRows")
    return rows


def run_clustering(data_dir: str, name: str) -> str:
    """Cluster (or resume clustering) the named clustering at the fits' lowered priority
    (`workers.priority.fit_nice`); returns its final status (`FitJob.run`)."""
    return run_niced(ClusteringJob(data_dir).run, name, nice=fit_nice())


def load_clustering(data_dir: str, name: str) -> Clustering:
    """The clustering of the latest checkpoint (labels and k-means centres kept in it), over the rows
    of its data set version; kept by this process (`workers.serve.load_latest`)."""
    def build(record: ClusteringRecord, state: SolverState) -> Clustering:
        if record.fit_kernel is None:  # written with the fit's first pass, before the checkpoint it serves
            raise ValueError(f"clustering {name!r} has a checkpoint but its record names no fit_kernel")
        source = datasets_at(data_dir).open_array(record.dataset, record.dataset_version)
        return clustering_from_state(state, AffinityRows(source, record.fit_kernel),
                                     kmeans_seed(record))

    return load_latest(clusterings_at(data_dir), name, build)


def predict_rows(data_dir: str, name: str, X: np.ndarray) -> np.ndarray:
    """Cluster of each row of X (m, n_features): its Nystrom embedding's nearest k-means centre
    (`kpca.clustering.Clustering.predict`), shape (m,). Cost one pass over the data set, O(m l (n + k))."""
    return load_clustering(data_dir, name).predict(np.asarray(X, dtype=np.float64))
