"""Route dependencies: the objects the lifespan placed on ``app.state``.

Each is a coroutine function, so FastAPI calls it on the event loop: a plain ``def`` dependency is run in
the thread pool, a hand-over to a worker thread and back per dependency and request (four for
``/project``) for an attribute read, which under load was a quarter of the API processes' time holding
the interpreter lock (py-spy, bench/load.py; docs/development.md)."""

from __future__ import annotations

from typing import Annotated, NamedTuple

from fastapi import Depends, Request

from service.errors import ApiError
from service.settings import Settings
from store import CheckpointStore
from store.places import Clusterings, Datasets, ImageJobs, Models
from workers import Backend


def _state(request: Request, attribute: str):
    value = getattr(request.app.state, attribute, None)
    if value is None:
        raise ApiError(503, "unavailable", "the service is starting or shutting down; retry shortly")
    return value


async def get_app_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_datasets(request: Request) -> Datasets:
    return _state(request, "datasets")


async def get_models(request: Request) -> Models:
    return _state(request, "models")


async def get_clusterings(request: Request) -> Clusterings:
    return _state(request, "clusterings")


async def get_checkpoints(request: Request) -> CheckpointStore:
    return _state(request, "checkpoints")


async def get_image_jobs(request: Request) -> ImageJobs:
    return _state(request, "image_jobs")


async def get_backend(request: Request) -> Backend:
    return _state(request, "backend")


class Serving(NamedTuple):
    """What the serving routes use, as one dependency: FastAPI's work per dependency and request (a
    sub-solve, its cache, the call) cost a ``/project`` about as much as its own checks did, four times."""

    models: Models
    datasets: Datasets
    backend: Backend
    settings: Settings


async def get_serving(request: Request) -> Serving:
    return Serving(_state(request, "models"), _state(request, "datasets"), _state(request, "backend"),
                   request.app.state.settings)


SettingsDep = Annotated[Settings, Depends(get_app_settings)]
DatasetsDep = Annotated[Datasets, Depends(get_datasets)]
ModelsDep = Annotated[Models, Depends(get_models)]
ClusteringsDep = Annotated[Clusterings, Depends(get_clusterings)]
CheckpointsDep = Annotated[CheckpointStore, Depends(get_checkpoints)]
BackendDep = Annotated[Backend, Depends(get_backend)]
ImageJobsDep = Annotated[ImageJobs, Depends(get_image_jobs)]
ServingDep = Annotated[Serving, Depends(get_serving)]
