"""The serving operations, one typed object each, run by `workers.serving.Serving.run`.

Each is a frozen dataclass of its arguments with the task it runs on a worker (`task`), its lane and
the prefix of its tasks' keys (`workers.serving.Operation`). A new serving operation is one more class
here, its request and answer schemas (`service.schemas.serving`) and its route (`service.routes`);
nothing else changes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from store import DatasetInfo, NotFound
from store.errors import Conflict
from store.jobs.records import ModelRecord
from store.places import datasets_at, models_at
from workers import archive as archive_task
from workers import cluster as cluster_task
from workers import image_jobs as image_job_task
from workers import images as image_task
from workers import serve as serve_task
from workers.serving import BLOCKS_IN_FLIGHT, PLAIN_STOPPABLE, PREIMAGE, PROJECTION, Operation, Serving
from workers.watch import Watch


@dataclass(frozen=True, eq=False)
class Project(Operation):
    """Kernel principal components of ``rows`` (m, n_features) -> (m, r) (`workers.serve.project_rows`):
    in this process when the model is small (``model_values``, its points x features, within
    `Serving.local_projections`: a dask round trip costs more than such a projection, and a busy worker
    would make it wait), else on the cluster ahead of queued pre-image blocks."""

    model: str
    rows: np.ndarray
    model_values: int | None = None

    key = "project_rows"
    lane = PROJECTION

    def task(self, data_dir: str, stop: str | None) -> np.ndarray:
        return serve_task.project_rows(data_dir, self.model, self.rows)

    def run(self, serving: Serving, watch: Watch | None) -> np.ndarray:
        if self.model_values is not None and serving.projects_here(self.model_values, len(self.rows)):
            serving.projections["api"] += 1
            return self.task(serving.data_dir, None)
        serving.projections["workers"] += 1
        return super().run(serving, watch)


@dataclass(frozen=True, eq=False)
class Reconstruct(Operation):
    """Pre-images (m, n_features) of the rows' projections (`workers.serve.reconstruct_rows`), as tasks of
    ``block_rows`` rows (all in one without it), `BLOCKS_IN_FLIGHT` per pre-image worker at a time, so
    that a projection submitted meanwhile runs before the blocks still queued and a request that ends
    cancels the blocks not yet run and stops the running ones at their next step."""

    model: str
    rows: np.ndarray
    method: str = "auto"
    options: dict | None = None
    block_rows: int | None = None

    key = "reconstruct_rows"
    lane = PREIMAGE

    def task(self, data_dir: str, stop: str | None) -> np.ndarray:
        return serve_task.reconstruct_rows(data_dir, self.model, self.rows, self.method, self.options, stop)

    def run(self, serving: Serving, watch: Watch | None) -> np.ndarray:
        step = max(1, int(self.block_rows or len(self.rows)))
        blocks = (replace(self, rows=self.rows[a:a + step], block_rows=None) for a in range(0, len(self.rows), step))
        return np.concatenate(serving.results(self, blocks, watch,
                                              window=BLOCKS_IN_FLIGHT * serving.preimage_workers()))


@dataclass(frozen=True, eq=False)
class DenoiseRowsTuned(Operation):
    """Rows through a model with the rank and pre-image tuned on them (`workers.image_jobs.denoise_rows_tuned`):
    ``(rows, info)``. ``fixed``: what the request set (``n_components``, ``method``, ``options``)."""

    model: str
    rows: np.ndarray
    fixed: dict | None = None

    key = "denoise_rows_tuned"
    lane = PREIMAGE

    def task(self, data_dir: str, stop: str | None) -> tuple[np.ndarray, dict]:
        return image_job_task.denoise_rows_tuned(data_dir, self.model, self.rows, self.fixed, stop)


def _answered(background: bool, run: Callable[[], tuple[np.ndarray, dict]]) -> tuple[np.ndarray, dict] | None:
    """``run()``'s ``(image, info)`` for a request that answers itself; nothing for a background image job (its
    answer is kept in its image job, `workers.image_jobs`), whose cancel (a `Conflict`) ends it quietly: its
    record says so."""
    try:
        answer = run()
    except Conflict:
        if background:
            return None
        raise
    return None if background else answer


@dataclass(frozen=True, eq=False)
class DenoiseImageTuned(Operation):
    """A decoded PNG's pixels denoised (or hyper-resolved, ``upscale`` > 1) through a stored patch model,
    the rank, pre-image and second stage tuned on the image (`workers.image_jobs.denoise_with_model`):
    ``(image, info)``; with ``background`` (sent by `Serving.start`) it keeps its answer in the image job
    ``job`` and answers nothing."""

    model: str
    image: np.ndarray
    patch: int
    stride: int
    method: str = "auto"
    options: dict | None = None
    upscale: int = 1
    tune: str = "auto"
    n_components: int | None = None
    constrained: bool = True
    job: str | None = None
    second_stage: str = "auto"
    background: bool = False

    key = "denoise_with_model"
    lane = PREIMAGE

    def task(self, data_dir: str, stop: str | None) -> tuple[np.ndarray, dict] | None:
        return _answered(self.background, lambda: image_job_task.denoise_with_model(
            data_dir, self.model, self.image, self.patch, self.stride, self.method, self.options, self.upscale,
            self.tune, self.n_components, self.constrained, self.job, self.second_stage, stop, self.background))


@dataclass(frozen=True, eq=False)
class DenoiseImageFit(Operation):
    """The one-call path: an image denoised by models of its own tiles, tuned on it
    (`workers.image_jobs.denoise_with_own_models`): ``(image, info)``; stopped at its next tuning candidate
    or tile when its request ends. With ``background`` (sent by `Serving.start`) it outlives its request,
    keeps its answer in the image job ``job`` and answers nothing."""

    image: np.ndarray
    patch: int
    stride: int
    tile: int | None
    tune: str = "auto"
    fixed: dict | None = None
    noise: float | None = None
    job: str | None = None
    second_stage: str = "auto"
    background: bool = False

    key = "denoise_with_own_models"
    lane = PLAIN_STOPPABLE

    def task(self, data_dir: str, stop: str | None) -> tuple[np.ndarray, dict] | None:
        return _answered(self.background, lambda: image_job_task.denoise_with_own_models(
            data_dir, self.image, self.patch, self.stride, self.tile, self.tune, self.fixed, self.noise, self.job,
            self.second_stage, stop, self.background))


@dataclass(frozen=True, eq=False)
class ComponentImages(Operation):
    """The leading ``count`` components of a model in input space and their eigenvalues
    (`workers.serve.component_images`)."""

    model: str
    count: int

    key = "component_images"

    def task(self, data_dir: str, stop: str | None) -> tuple[np.ndarray, np.ndarray]:
        return serve_task.component_images(data_dir, self.model, self.count)


@dataclass(frozen=True, eq=False)
class PredictClusters(Operation):
    """The cluster of each of ``rows`` (m, n_features) -> (m,) under a completed clustering
    (`workers.cluster.predict_rows`)."""

    clustering: str
    rows: np.ndarray

    key = "predict_rows"

    def task(self, data_dir: str, stop: str | None) -> np.ndarray:
        return cluster_task.predict_rows(data_dir, self.clustering, self.rows)


@dataclass(frozen=True, eq=False)
class PatchDataset(Operation):
    """Create and commit data set ``name`` whose rows are the patches of a decoded PNG's pixels, scaled to
    [0, 1] (`workers.images.patch_dataset`): its metadata."""

    name: str
    image: np.ndarray
    patch: int
    stride: int

    key = "patch_dataset"

    def task(self, data_dir: str, stop: str | None) -> DatasetInfo:
        return image_task.patch_dataset(data_dir, self.name, self.image, self.patch, self.stride)


@dataclass(frozen=True, eq=False)
class TransformChunk(Operation):
    """Rows ``start:stop`` of a data set version projected or denoised (`workers.serve.transform_chunk`):
    one task of `TransformDataset`."""

    model: str
    dataset: str
    version: int | None
    start: int
    stop: int
    operation: str
    method: str = "auto"
    options: dict | None = None

    key = "transform_chunk"

    def task(self, data_dir: str, stop: str | None) -> np.ndarray:
        return serve_task.transform_chunk(data_dir, self.model, self.dataset, self.version, self.start, self.stop,
                                          self.operation, self.method, self.options)


@dataclass(frozen=True, eq=False)
class TransformDataset(Operation):
    """Project or denoise a whole data set into a new one (``output``, float32), one task per chunk of
    ``chunk_rows`` rows (`TransformChunk`), each chunk written when its task's result is fetched (in
    order), then committed; if any task or write fails the output is deleted and the error raised (a
    damaged input chunk: `store.errors.Corrupt`). Answers the output's metadata."""

    model: str
    dataset: str
    output: str
    operation: str = "project"
    method: str = "auto"
    options: dict | None = None
    chunk_rows: int = 4096

    key = "transform_chunk"

    def run(self, serving: Serving, watch: Watch | None) -> DatasetInfo:
        store = datasets_at(serving.data_dir)
        meta = store.get(self.dataset)
        n_rows, version = meta.n_rows, meta.version
        width = models_at(serving.data_dir).get(self.model).n_components if self.operation == "project" \
            else meta.n_features
        store.create(self.output, width, "float32")
        bounds = [(a, min(a + self.chunk_rows, n_rows)) for a in range(0, n_rows, self.chunk_rows)]
        futures = [serving.submit(TransformChunk(self.model, self.dataset, version, a, b, self.operation,
                                                 self.method, self.options)) for a, b in bounds]
        try:
            for i, future in enumerate(futures):  # tasks run in parallel; results are written in order
                store.put_chunk(self.output, i, np.asarray(future.result(), dtype=np.float32))
                future.release()
            return store.commit(self.output)
        except BaseException:  # a failed task (a corrupt chunk, a lost worker): no partial output is left
            serving.cluster.running_client.cancel(futures)
            with contextlib.suppress(NotFound):
                store.delete(self.output)
            raise


@dataclass(frozen=True, eq=False)
class ImportModel(Operation):
    """Create a completed model from the archive at ``path`` (a file in the data folder): verified, its
    checkpoint's serving checked by one projection, then stored (`workers.archive.import_model`). Runs in
    the calling thread, not on the cluster."""

    path: str | Path
    name: str | None = None
    dataset: str | None = None
    owner: str | None = None

    key = "import_model"

    def run(self, serving: Serving, watch: Watch | None) -> ModelRecord:
        return archive_task.import_model(serving.data_dir, self.path, self.name, self.dataset, self.owner)
