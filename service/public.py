"""The one place where stored records become the API's answers: one function per resource.

A stored record (`store.jobs.records.ModelRecord`, `store.jobs.clusterings.ClusteringRecord`,
`store.image_jobs.ImageJobRecord`, `store.datasets.records.DatasetInfo`, a checkpoint's description) is
the store's; the public view (`service.schemas`) is the API's. Each function below names every field of
the view it fills and where in the record it comes from, so that renaming a stored field touches the
store and this module only, and a field the API does not show (a record's ``schema_version``, ``owner``,
``placement.exact_limit``, ``fit_kernel`` except as ``params_used.kernel``) stays out of the answer.

Every function costs O(record size) and reads nothing but its arguments.
"""

from __future__ import annotations

from typing import Any

from service.schemas.clusterings import ClusteringLabelled, ClusteringPublic
from service.schemas.datasets import DatasetPublic, DatasetVerified, DatasetVersion, ZarrSource
from service.schemas.image_jobs import ImageJobPublic, ImageStep
from service.schemas.jobs import (
    BestCheckpoint,
    CheckpointRef,
    ClusteringPassRecord,
    Convergence,
    FitError,
    JobDamaged,
    PassRecord,
    PlacementPublic,
    Progress,
)
from service.schemas.models import CheckpointPublic, CheckpointsPublic, ModelPublic, ModelSummary
from store.datasets.records import DatasetInfo
from store.image_jobs import ImageJobRecord
from store.jobs.clusterings import ClusteringRecord
from store.jobs.records import JobRecord, ModelRecord
from store.quarantine import DamagedEntry


def model_public(record: ModelRecord) -> ModelPublic:
    """``GET /v1/models/{name}``: a model's record as the API shows it."""
    return ModelPublic(**_job_fields(record, PassRecord), n_components=record.n_components)


def model_summary(record: ModelRecord, full: bool) -> ModelSummary:
    """A model in the list: where its fit stands, without its history; ``full``: every field of
    `model_public`, the summary's first."""
    document = model_public(record).model_dump(by_alias=True)
    if not full:
        document = {key: document.get(key) for key in ModelSummary.model_fields}
    return ModelSummary.model_validate(document)


def clustering_public(record: ClusteringRecord) -> ClusteringPublic:
    """A clustering's record as the API shows it (in a list, and the answer of create, cancel, resume)."""
    return ClusteringPublic(**_clustering_fields(record))


def clustering_labelled(record: ClusteringRecord, **labels: Any) -> ClusteringLabelled:
    """``GET /v1/clusterings/{name}``: a clustering and, once completed, a page of its labels (``labels``,
    ``labels_offset``, ``labels_total``, ``next``)."""
    return ClusteringLabelled(**_clustering_fields(record), **labels)


def job_damaged(entry: DamagedEntry) -> JobDamaged:
    """The list entry of a job whose record cannot be read (`store.quarantine`)."""
    return JobDamaged(name=entry.name, error=FitError(code="corrupt", message=entry.message))


def listed(entry: JobRecord | DamagedEntry, view):
    """A list's entry: ``view(record)`` for a readable job, `job_damaged` for a damaged one."""
    return job_damaged(entry) if isinstance(entry, DamagedEntry) else view(entry)


def image_job_public(record: ImageJobRecord) -> ImageJobPublic:
    """``GET /v1/image-jobs/{job}``: an image request's progress and the fraction of its step done."""
    return ImageJobPublic(
        name=record.name, kind=record.kind, status=record.status, phase=record.phase, done=record.done,
        total=record.total, elapsed_s=record.elapsed_s,
        steps=[ImageStep(step=step.step, seconds=step.seconds) for step in record.steps],
        chosen=record.chosen, error=record.error, created_at=record.created_at, updated_at=record.updated_at,
        fraction=record.fraction, step_left_s=record.phase_left_s, background=record.background)


def dataset_public(info: DatasetInfo) -> DatasetPublic:
    """``GET /v1/datasets/{name}``: a data set's metadata (`store.DatasetStore.get`)."""
    return DatasetPublic(
        name=info.name, n_features=info.n_features, dtype=info.dtype, status=info.status, n_rows=info.n_rows,
        chunks=list(info.chunks), checksum=info.checksum, created_at=info.created_at,
        committed_at=info.committed_at, version=info.version,
        versions=[DatasetVersion(version=v.version, n_rows=v.n_rows, n_chunks=v.n_chunks, checksum=v.checksum,
                                 committed_at=v.committed_at) for v in info.versions],
        staged=list(info.staged), zarr_chunk_rows=info.zarr_chunk_rows,
        source=None if info.source is None else ZarrSource(zarr=info.source.zarr), source_dtype=info.source_dtype,
        corrupt_chunks=list(info.corrupt_chunks), damaged_staged=list(info.damaged_staged), error=info.error)


def dataset_verified(report: dict) -> DatasetVerified:
    """``GET /v1/datasets/{name}/verify``: the store's re-hash of a version (`store.DatasetStore.verify`)."""
    return DatasetVerified(ok=report["ok"], version=report["version"], chunks_checked=report["chunks_checked"],
                           corrupt_chunks=list(report["corrupt_chunks"]))


def checkpoints_public(described: list[dict], best_pass: int | None) -> CheckpointsPublic:
    """``GET /v1/models/{name}/checkpoints``: the checkpoints the store describes
    (`store.jobs.checkpoints.CheckpointStore.list`), the one of pass ``best_pass`` marked best."""
    return CheckpointsPublic(checkpoints=[
        CheckpointPublic.model_validate({"pass": c["pass"], "size_bytes": c["size_bytes"],
                                         "created_at": c["created_at"], "best": c["pass"] == best_pass})
        for c in described])


def _clustering_fields(record: ClusteringRecord) -> dict[str, Any]:
    """The fields of a clustering's view (`ClusteringPublic`), from ``record``."""
    return dict(_job_fields(record, ClusteringPassRecord), n_clusters=record.n_clusters, n_rows=record.n_rows,
                labels_dataset=record.labels_dataset, labels_dataset_version=record.labels_dataset_version,
                variation_of_information=record.variation_of_information, labels_sha256=record.labels_sha256,
                coordinates_sha256=record.coordinates_sha256, pictures={} if record.coordinates_sha256 is None else
                {"clusters": f"/v1/clusterings/{record.name}/clusters.png"})


def _job_fields(record: JobRecord, pass_view: type[PassRecord]) -> dict[str, Any]:
    """The fields every job's view shows (`service.schemas.jobs.JobPublic`), from ``record``; each pass of
    its history as ``pass_view``."""
    used = record.params_used
    if used is not None:
        used = dict(used)
        if record.fit_kernel is not None:
            used["kernel"] = record.fit_kernel.to_dict()
    placement = record.placement
    return dict(
        name=record.name, dataset=record.dataset, dataset_version=record.dataset_version,
        dataset_checksum=record.dataset_checksum, n_features=record.n_features, kernel=record.kernel.to_dict(),
        solver=record.solver, params=dict(record.params),
        placement=PlacementPublic(workers=placement.workers, device=placement.device),
        checkpoint_keep=record.checkpoint_keep, status=record.status,
        progress=None if record.progress is None else _progress(record.progress),
        history=[_pass(entry, pass_view) for entry in record.history],
        error=None if record.error is None else FitError(code=record.error.code, message=record.error.message),
        params_used=used, stopped_early=record.stopped_early, warnings=list(record.warnings),
        best_checkpoint=None if record.best_checkpoint is None else BestCheckpoint(
            pass_=record.best_checkpoint.pass_, value=record.best_checkpoint.value),
        checkpoint=None if record.checkpoint is None else CheckpointRef(
            pass_=record.checkpoint.pass_, sha256=record.checkpoint.sha256),
        created_at=record.created_at, updated_at=record.updated_at)


def _convergence(stored) -> Convergence:
    return Convergence(metric=stored.metric, value=stored.value, iterate=stored.iterate, residual=stored.residual)


def _progress(stored) -> Progress:
    return Progress(pass_=stored.pass_, passes=stored.passes, t=stored.t, fraction=stored.fraction,
                    elapsed_s=stored.elapsed_s, remaining_s=stored.remaining_s, eigenvalues=list(stored.eigenvalues),
                    gains=None if stored.gains is None else list(stored.gains),
                    convergence=_convergence(stored.convergence), workers=stored.workers)


def _pass(stored, view: type[PassRecord]) -> PassRecord:
    fields = dict(pass_=stored.pass_, elapsed_s=stored.elapsed_s, convergence=_convergence(stored.convergence),
                  eigenvalues=list(stored.eigenvalues), workers=stored.workers)
    if view is ClusteringPassRecord:
        fields.update(variation_of_information=stored.variation_of_information, labels_change=stored.labels_change)
    return view(**fields)
