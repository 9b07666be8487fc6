"""The model registry: one `store.jobs.records.ModelRecord` per model, the authoritative job state.

Layout under the data folder ``root`` (`store.jobs.registry`, the registry of every kind of job)::

    models/{name}/model.json    the record (`ModelRecord`, schema_version 4; older versions are migrated on read)
    models/{name}/cancel        flag: a cancel was requested (a small JSON document)
    models/{name}/.lock         flock taken by create, write, update, delete
    models/{name}/.fit          flock held by the one process running the model's fit (`fit_lease`)
    models/{name}/checkpoints/  see `store.jobs.checkpoints`

The service creates records and reads them; the worker running the fit
writes status, progress and history with `update`. The registry manages
``name``, ``schema_version``, ``created_at`` and ``updated_at``.
"""

from __future__ import annotations

from store.jobs.records import ModelRecord, migrate
from store.jobs.registry import MANAGED_FIELDS, JobRegistry

__all__ = ["MANAGED_FIELDS", "ModelRegistry"]


class ModelRegistry(JobRegistry[ModelRecord]):
    """Model records under ``root/models``; safe across threads and processes (`store.jobs.registry.JobRegistry`).

    Parameters
    ----------
    root : Path
        The data folder.
    """

    record_type = ModelRecord
    kind_folder = "models"
    kind = "model"
    document = "model.json"

    def migrate(self, doc: dict) -> dict:
        """Version 1 records (written before the solver registry) to version 2 (`store.jobs.records.migrate`)."""
        return migrate(doc)
