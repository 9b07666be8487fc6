"""Serving trained models on dask workers: projection, pre-images, image denoising, whole data sets.

Each worker process keeps the few most recently used models in memory (the
kernel-row source, centring, coefficients A and A K', and a learned inverse
map once asked for), keyed by the checkpoint they came from, so repeated
requests do not reload them. A model over centres (a reduced-set solver,
`kpca.solvers.Solver.serves`) never opens its training rows.

Costs for m rows against l points of n features, r components: projection
``2 m l n + 2 m l r`` flops; a pre-image costs a few kernel rows per
iteration (see `kpca.preimage`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from kpca.model import KernelModel
from kpca.preimage import LearnedInverse, reconstruct
from kpca.solvers import SolverState, as_state, get_solver, served_model
from store.errors import DamagedCheckpoint
from store.jobs.records import ModelRecord
from store.places import checkpoints_of, datasets_at, models_at, where_of
from store.stop_flags import StopFlags
from workers.fit import open_rows

_MAX_MODELS = 4


@dataclass
class LoadedModel:
    """A model ready to serve: `kpca.model.KernelModel` plus per-model caches."""

    model: KernelModel
    record: ModelRecord
    inverse: LearnedInverse | None = field(default=None)


_LOADED: OrderedDict[tuple, object] = OrderedDict()
_LOADED_LOCK = threading.Lock()  # dask's threads, and the API process's (`workers.operations.Project`)


def load_latest(registry, name: str, build):
    """What job ``name`` serves, built by ``build(record, state)`` from its checkpoint once and kept by
    this process (the few most recently used), keyed by the record's creation, the checkpoint's pass,
    digest and file identity (`store.CheckpointStore.identity`: a file changed since is read, and
    checked, again) and the data set version: a refit or a resume builds it again.

    A completed job serves the checkpoint its record names (``checkpoint``), read back against its
    digest: a missing or damaged one is `store.errors.DamagedCheckpoint` (a 409 ``corrupt``), never an
    older pass. Another job (cancelled, failed: no such name) serves its latest checkpoint, its members
    checked against their digests. Cost: a record read and a ``stat``; plus ``build`` and the
    checkpoint's read when not kept."""
    record = registry.get(name)
    checkpoints = checkpoints_of(registry)
    named = getattr(record, "checkpoint", None) if record.status == "completed" else None
    if named is not None:
        served, expect = named.pass_, named.sha256
        identity = checkpoints.identity(name, served)
        if identity is None:
            raise DamagedCheckpoint(f"{registry.kind} {name!r} completed with its checkpoint of pass {served}, "
                                    "which is missing; it cannot be served. Resume the fit (it goes back to its "
                                    "last intact checkpoint) or fit it again", field="name",
                                    cause="FileNotFoundError")
    else:
        served, expect = checkpoints.latest_pass(name), None
        identity = None if served is None else checkpoints.identity(name, served)
    key = (where_of(registry), registry.kind, name, record.created_at, served, expect, identity,
           record.dataset_version)
    with _LOADED_LOCK:
        hit = _LOADED.get(key)
        if hit is not None:
            _LOADED.move_to_end(key)
            return hit
    # outside the lock: it reads the store; the entries are read as the solver's state (`kpca.solvers.as_state`)
    entry = build(record, as_state(checkpoints.load(name, served, expect=expect)))
    with _LOADED_LOCK:
        _LOADED[key] = entry
        while len(_LOADED) > _MAX_MODELS:
            _LOADED.popitem(last=False)
    return entry


def load_model(data_dir: str, model_name: str) -> LoadedModel:
    """The model's latest checkpoint as a `LoadedModel`, cached per process (`load_latest`)."""
    def build(record: ModelRecord, state: SolverState) -> LoadedModel:
        over_centres = get_solver(record.solver).serves == "centres"
        rows = None if over_centres else open_rows(datasets_at(data_dir), record)
        return LoadedModel(served_model(state, rows, record.fit_kernel), record)

    return load_latest(models_at(data_dir), model_name, build)


def project_rows(data_dir: str, model_name: str, X: np.ndarray) -> np.ndarray:
    """Kernel principal components ``A k'(x)`` of the rows of X, shape (m, r)."""
    return load_model(data_dir, model_name).model.project(np.asarray(X, dtype=np.float64))


def reconstruct_rows(data_dir: str, model_name: str, X: np.ndarray, method: str = "auto",
                     options: dict | None = None, stop: str | None = None) -> np.ndarray:
    """Pre-images of the projections of the rows of X onto the model's components, shape (m, n).

    ``method``: "auto" or a method of `kpca.preimage.METHODS`; "learned" (a
    kernel ridge map from components to inputs) is fitted once per model and
    kept by this worker. ``stop``: the request's stop flag (`store.stop_flags`), looked at between
    the iterative methods' steps (`kpca.errors.Stopped` once it is raised).
    """
    loaded = load_model(data_dir, model_name)
    X = np.asarray(X, dtype=np.float64)
    if method == "learned" and isinstance(loaded.model, KernelModel):  # else `reconstruct` says it does not apply
        if loaded.inverse is None:
            loaded.inverse = LearnedInverse.fit(loaded.model, rng=np.random.default_rng(0))
        return loaded.inverse(X)
    return reconstruct(loaded.model, X, method=method, stop=StopFlags(data_dir).checker(stop), **(options or {}))


def component_images(data_dir: str, model_name: str, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The leading ``count`` components in input space (`kpca.model.KernelModel.input_space_components`,
    shape (count, n)) and their eigenvalue estimates (count,). ValueError for a model that is not a
    kernel expansion (one with its own decoder). Cost: one pass over the model's rows, O(count l n)."""
    model = load_model(data_dir, model_name).model
    if not isinstance(model, KernelModel):
        raise ValueError("name: this model has its own decoder, not a kernel expansion over its rows; its "
                         "components have no input-space image")
    eigenvalues = model.eigenvalues if model.eigenvalues is not None else np.full(model.n_components, np.nan)
    return model.input_space_components(count), np.asarray(eigenvalues[:count], dtype=np.float64)


def transform_chunk(data_dir: str, model_name: str, dataset: str, version: int | None, start: int, stop: int,
                    operation: str, method: str = "auto", options: dict | None = None) -> np.ndarray:
    """Rows ``start:stop`` of a data set (version) projected (``"project"``, shape (b, r))
    or denoised (``"denoise"``, shape (b, n)) through the model: one task of a chunked transform."""
    X = np.asarray(datasets_at(data_dir).open_array(dataset, version)[start:stop], dtype=np.float64)
    if operation == "project":
        return project_rows(data_dir, model_name, X)
    return reconstruct_rows(data_dir, model_name, X, method, options)
