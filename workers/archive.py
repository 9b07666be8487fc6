"""Importing a model archive: the check that needs the numerics, then the store's import.

`store.jobs.archive.import_archive` verifies an archive's members, record, rows and
checkpoint format, and creates the model; whether the checkpoint actually serves
the record's components over the rows takes a served model and a projection, so
it is done here (`check_served`) and handed to the store (`import_model`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kpca.rows import KernelRows
from kpca.solvers import as_state, served_model
from store.jobs.archive import CHECKPOINT, RECORD, ROWS, import_archive
from store.jobs.records import ModelRecord


def check_served(state: dict, record: ModelRecord, rows: np.ndarray) -> None:
    """Raise ValueError, saying why, unless the checkpoint's entries ``state`` (read as their solver's state,
    `kpca.solvers.as_state`) serve ``record``'s components over
    ``rows`` (shape (l, n)): the served model (`kpca.solvers.served_model`) is built with the record's kernel
    and the first row projected, which must give ``record.n_components`` finite values.

    Cost: the solver's components from the state, plus one kernel row, O(l n).
    """
    try:
        if record.fit_kernel is None:  # written with the fit's first pass: a fitted model's record has it
            raise ValueError("the record names no fit_kernel")
        model = served_model(as_state(state), KernelRows(rows, record.fit_kernel), record.fit_kernel)
        projected = np.asarray(model.project(np.asarray(rows[:1], dtype=np.float64)))
    except Exception as exc:  # any mismatch of shapes or keys between the record, the checkpoint and the rows
        raise ValueError(f"{CHECKPOINT} does not serve {RECORD} over {ROWS}: {exc}") from None
    if projected.shape != (1, record.n_components) or not np.isfinite(projected).all():
        raise ValueError(f"{CHECKPOINT} serves {projected.shape[-1]} components, {RECORD} says "
                         f"{record.n_components}")


def import_model(data_dir: str | Path, path: str | Path, name: str | None = None, dataset: str | None = None,
                 owner: str | None = None) -> ModelRecord:
    """Import the model archive at ``path`` into data folder ``data_dir``: `store.jobs.archive.import_archive`
    with `check_served`; the stored, completed record. Errors as there (`store.errors.Invalid` on
    ``body`` for a refused archive, `store.errors.Conflict` on ``name`` or ``dataset``).

    Cost: the archive's bytes read about three times, one projection, one commit of the rows.
    """
    return import_archive(data_dir, path, name, dataset, owner, check_served=check_served)
