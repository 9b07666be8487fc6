"""What the routes of every kind of job share (``/v1/models``, ``/v1/clusterings``): starting and
submitting to the cluster, cancel, resume, delete.

Each takes the kind's registry (`store.jobs.registry.JobRegistry`); the record
(`store.jobs.records.JobRecord`) names the kind and its route in messages and
``Location`` headers. No route ever waits on a fit.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Sequence
from typing import TypeVar

from fastapi import Response, status

from service.errors import ApiError
from store.errors import Damaged, NotFound
from store.jobs.object_registry import ObjectJobRegistry
from store.jobs.records import ACTIVE, JobRecord
from store.jobs.registry import JobRegistry
from store.places import Registry, checkpoints_of
from workers.operations import PatchDataset

log = logging.getLogger(__name__)
#: the record type of the kind of job at hand (`store.jobs.records.ModelRecord`, ...)
R = TypeVar("R", bound=JobRecord)


def submit(backend, registry: Registry, name: str, response: Response | None = None) -> None:
    """Hand job ``name`` to the cluster (``Location`` set on ``response``); if the cluster cannot take
    it, the record says so and the client gets a 503."""
    try:
        backend.submit_fit(name, registry.kind_folder)
    except Exception as exc:  # the cluster, not the client, is at fault
        log.exception("could not submit the %s %r", registry.kind, name)
        message = f"the {registry.kind} could not be submitted to the compute cluster: {exc}"
        try:
            registry.update(name, status="failed", error={"code": "unavailable", "message": message})
        except Exception:
            log.exception("could not mark %s %r as failed", registry.kind, name)
        raise ApiError(503, "unavailable", message + f"; delete the {registry.kind} and retry later", None) from None
    if response is not None:
        response.headers["Location"] = f"/v1/{registry.kind_folder}/{name}"


def check_workers(backend, placement) -> None:
    """``placement.workers`` (sharded KHA-family fits), if an integer, against the workers that offer the
    fit resource now (`workers.Backend.fit_workers`): more than there are is a 422 naming it; a 503 if
    the cluster cannot be asked. Its type and bounds were checked with the request."""
    requested = placement.workers
    if not isinstance(requested, int) or isinstance(requested, bool):
        return  # left out, or "all": the fit takes what there is
    try:
        available = backend.fit_workers()
    except Exception as exc:  # the cluster, not the client, is at fault
        log.exception("could not count the cluster's fit workers")
        raise ApiError(503, "unavailable", f"could not ask the compute cluster for its workers: {exc}; "
                       "retry later", None) from None
    if requested > available:
        there = f"{available} worker{'s' if available != 1 else ''}"
        raise ApiError(422, "invalid", f"placement.workers: {requested} workers asked, but the cluster has "
                       f"{there} that offer{'s' if available == 1 else ''} fits; give at most {available}, or "
                       "\"all\" to use every one", "placement.workers")


def start(backend, registry: JobRegistry[R] | ObjectJobRegistry[R], record: R, response: Response,
          owner: str | None = None) -> R:
    """Check ``placement.workers`` against the cluster (`check_workers`), store a new job's ``queued``
    record (409 on a name clash; ``owner``: the principal that asked, `service.limits.fit_owner`) and
    submit it: the stored record."""
    check_workers(backend, record.placement)
    stored = registry.create(record.model_copy(update={"owner": owner}))
    submit(backend, registry, record.name, response)
    return stored


def delete(registry: Registry, name: str) -> Response:
    """Ask a running job to stop, then delete it with its checkpoints: 204. A job whose record is damaged
    (`store.quarantine`) is deleted all the same: a fit of it still running stops at its next write,
    which finds the job gone."""
    with contextlib.suppress(Damaged):
        registry.request_cancel(name)
    registry.delete(name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def cancel(registry: JobRegistry[R] | ObjectJobRegistry[R], name: str) -> R:
    """Ask a queued or running job to stop after its current block (409 otherwise); the record."""
    record = registry.get(name)
    if record.status not in ACTIVE:
        raise ApiError(409, "conflict", f"{record.kind} {name!r} is {record.status!r}; only a queued or running "
                       "fit can be cancelled", "name")
    registry.request_cancel(name)
    return registry.get(name)


def resume(backend, registry: JobRegistry[R] | ObjectJobRegistry[R], name: str, response: Response, passes: int | None,
           dataset_version: int | None = None, versions: Sequence[int] = ()) -> R:
    """Continue a cancelled, failed or completed job from its last intact checkpoint (`JobRecord.resumed`
    says what makes no sense, naming the field); the queued record. A completed job whose checkpoint is
    damaged goes back to its last intact one, so that the resume its 409 advises runs its passes again.
    Cost: a record read; for a completed job, a verification of its checkpoint (O(its bytes))."""
    record = registry.get(name)
    back_to = None
    if record.status == "completed" and record.checkpoint is not None:
        back_to = checkpoints_of(registry).damaged_back_to(name, record.checkpoint.pass_,
                                                            record.checkpoint.sha256)
    changes = record.resumed(passes, dataset_version, versions, back_to)
    registry.clear_cancel(name)
    registry.update(name, **changes)
    submit(backend, registry, name, response)
    return registry.get(name)


#: Most jobs a 409 on deleting a data set names.
DEPENDENTS_SHOWN = 10


def dependents(dataset: str, registries: Iterable[JobRegistry]) -> list[tuple[JobRegistry, JobRecord]]:
    """The jobs (models, clusterings) that still need data set ``dataset``: ``[(registry, record)]``.

    A job needs it if it is fit on it, except a completed model that serves
    from its checkpoint alone (`ModelRecord.serves_without_dataset`); a
    clustering still fitting needs its ``labels_dataset`` too. Cost: one
    registry listing per kind."""
    found = []
    for registry in registries:
        for record in registry.list():
            if record.dataset == dataset:
                if record.status == "completed" and getattr(record, "serves_without_dataset", False):
                    continue
                found.append((registry, record))
            elif getattr(record, "labels_dataset", None) == dataset and record.status in ACTIVE:
                found.append((registry, record))
    return found


def delete_dataset(datasets, name: str, registries, cascade: bool) -> Response:
    """Delete data set ``name``: a 409 on ``name`` naming (up to `DEPENDENTS_SHOWN` of) the models and
    clusterings that use it, unless ``cascade``, which first deletes them (asking running fits to stop);
    204. A set whose ``meta.json`` is damaged (listed as corrupt) is deleted too."""
    if not datasets.exists(name):  # 404 first
        raise NotFound("dataset", name)
    using = dependents(name, registries)
    if using and not cascade:
        names = [f"{record.kind} {record.name!r}" for _registry, record in using]
        shown = ", ".join(names[:DEPENDENTS_SHOWN]) + (f" and {len(names) - DEPENDENTS_SHOWN} more"
                                                       if len(names) > DEPENDENTS_SHOWN else "")
        raise ApiError(409, "conflict", f"data set {name!r} is used by {shown}; delete them first, or delete "
                       f"with ?cascade=true to delete them too", "name")
    for registry, record in using:
        delete(registry, record.name)
    datasets.delete(name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def start_patch_model(name: str, image, patch: int, stride: int, chosen: dict, datasets, models, backend, settings,
                      owner: str | None) -> str:
    """Data set ``name`` of the ``patch`` x ``patch`` patches of ``image`` (grid step ``stride``) and model
    ``name`` fitted to it with a Gaussian kernel of the tuned width and rank of ``chosen`` (``sigma``,
    ``n_components``), or the linear kernel where the tuning chose ``linear`` (no width): exact where
    its rows are within the exact limit, else the default solver. Returns the model's URL; the fit
    runs on the cluster."""
    from kpca.kernels import KernelSpec
    from service.job_checks import checked_fit_params
    from store.jobs.records import ModelRecord, Placement

    dataset = backend.serve(PatchDataset(name, image, patch, stride))
    linear = chosen.get("sigma") is None  # the method "linear": linear PCA of the patches
    kernel = KernelSpec("linear") if linear else KernelSpec("gaussian", sigma=float(chosen["sigma"]))
    solver = "exact" if dataset.n_rows <= settings.exact_limit else "ritz"
    r = int(chosen["n_components"])
    params = checked_fit_params(datasets, dataset, kernel, solver, r, {}, settings.exact_limit)
    record = ModelRecord.new(name, dataset, kernel=kernel, n_components=r, solver=solver, params=params,
                             checkpoint_keep=settings.checkpoint_keep,
                             placement=Placement(workers=None, exact_limit=settings.exact_limit))
    start(backend, models, record, Response(), owner)
    return f"/v1/models/{name}"
