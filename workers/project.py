"""Projection through a trained model, run as a dask task on a worker.

Each worker process keeps the few most recently used models in memory (the
training data's kernel-row source, centring and coefficients), so repeated
projections do not reload them. Cost per call: ``2 m l n`` flops for m rows
against l training points, plus ``2 m l r`` for the coefficients.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np

from store import CheckpointStore, DatasetStore, ModelRegistry
from workers.fit import centering_from_state, open_rows

_MODELS: OrderedDict = OrderedDict()
_MAX_MODELS = 4


def load_model(data_dir: str, model_name: str):
    """``(rows, A)`` of the model's latest checkpoint, cached per process by checkpoint identity."""
    root = Path(data_dir)
    record = ModelRegistry(root).get(model_name)
    checkpoints = CheckpointStore(root)
    latest = checkpoints.latest_pass(model_name)
    key = (data_dir, model_name, record.get("created_at"), latest)
    hit = _MODELS.get(key)
    if hit is not None:
        _MODELS.move_to_end(key)
        return hit
    state = checkpoints.load(model_name, latest)
    rows = open_rows(DatasetStore(root), record)
    rows.centering = centering_from_state(state)
    entry = (rows, np.ascontiguousarray(state["A"]))
    _MODELS[key] = entry
    while len(_MODELS) > _MAX_MODELS:
        _MODELS.popitem(last=False)
    return entry


def project_rows(data_dir: str, model_name: str, X: np.ndarray) -> np.ndarray:
    """Kernel principal components ``A k'(x)`` of the rows of X, shape (m, r)."""
    rows, A = load_model(data_dir, model_name)
    return rows.transform_block(np.asarray(X, dtype=np.float64)) @ A.T
