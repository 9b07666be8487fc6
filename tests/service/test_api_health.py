"""Liveness, Prometheus metrics and the error shape of routing errors."""

from __future__ import annotations


def test_healthz(api):
    response = api.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_metrics_count_requests_by_route_and_status(api):
    api.get("/v1/datasets")
    api.get("/v1/datasets/absent")
    response = api.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert 'kpca_http_requests_total{method="GET",route="/v1/datasets",status="200"}' in text
    assert 'kpca_http_requests_total{method="GET",route="/v1/datasets/{name}",status="404"}' in text
    assert "kpca_http_request_duration_seconds_bucket" in text


def test_unmatched_paths_share_one_label(api):
    api.get("/no/such/path/1")
    api.get("/no/such/path/2")
    text = api.get("/metrics").text
    assert 'route="unmatched",status="404"' in text
    assert "/no/such/path" not in text


def test_unknown_route_is_404_in_error_shape(api):
    response = api.get("/v1/nothing-here")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_wrong_method_is_405_in_error_shape(api):
    response = api.patch("/v1/datasets")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_openapi_lists_the_resources(api):
    paths = api.get("/openapi.json").json()["paths"]
    for path in (
        "/v1/datasets",
        "/v1/datasets/{name}",
        "/v1/datasets/{name}/chunks/{index}",
        "/v1/datasets/{name}/commit",
        "/v1/models",
        "/v1/models/{name}",
        "/v1/models/{name}/project",
    ):
        assert path in paths


def test_metrics_name_every_served_route_and_the_process(api):
    """Plain routes (``/openapi.json``) and the docs page are counted under their own template, not
    ``unmatched``; the process, platform and GC series are exported on the app's own registry."""
    api.get("/docs")
    api.get("/openapi.json")
    api.get("/docs/assets/no-such-asset.js")
    text = api.get("/metrics").text
    assert 'kpca_http_requests_total{method="GET",route="/docs",status="200"}' in text
    assert 'kpca_http_requests_total{method="GET",route="/openapi.json",status="200"}' in text
    assert 'kpca_http_requests_total{method="GET",route="/docs/assets/{asset}",status="404"}' in text
    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "python_info",
                 "python_gc_collections_total"):
        assert f"\n{name}" in text, name


def test_route_template_of_mounts_and_unknown_paths():
    from starlette.applications import Starlette
    from starlette.routing import Mount, Route

    from service.metrics import UNMATCHED, route_template

    app = Starlette(routes=[Route("/page", lambda request: None), Mount("/static", app=lambda s, r, w: None)])

    def request(path):
        return {"type": "http", "path": path, "root_path": "", "method": "GET"}

    assert route_template(app, request("/page")) == "/page"
    assert route_template(app, request("/static/a/b.js")) == "/static/{path}"
    assert route_template(app, request("/page/more")) == UNMATCHED
    assert route_template(None, request("/page")) == UNMATCHED


def test_the_started_service_keeps_its_startup_objects_out_of_full_collections(api):
    """A full collection scans every tracked object with the event loop stopped: about 0.1 s for the
    objects of the imports and the start alone, on this machine (0.36-0.42 s for /healthz under
    bench/load.py). The lifespan freezes them (the server runs in this process)."""
    import gc

    assert gc.get_freeze_count() > 10_000


def test_healthz_answers_while_every_request_thread_is_taken(tmp_path):
    """Issue 30: ``/healthz`` must not queue behind the request threads (anyio's limiter, 40 by default),
    which serving requests waiting on the cluster fill under load. Here a route of the test's own app takes
    every token of the limiter and keeps them; ``/healthz`` still answers at once (before, a sync route,
    it waited for a token: 1 s spikes in bench/load.py)."""
    import anyio.to_thread
    import httpx

    from bench._service import serving
    from service import Settings, create_app

    app = create_app(Settings(data_dir=tmp_path))
    held = []

    @app.get("/test-take-threads", include_in_schema=False)
    async def take_threads():
        limiter = anyio.to_thread.current_default_thread_limiter()
        for _ in range(int(limiter.total_tokens)):
            borrower = object()
            await limiter.acquire_on_behalf_of(borrower)
            held.append((limiter, borrower))
        return {"taken": len(held)}

    with serving(app, lifespan="off") as url:
        try:
            assert httpx.get(f"{url}/test-take-threads", timeout=60).json()["taken"] >= 1
            # (a /healthz that needed a thread would wait for ever: the bound fails it, however loaded the machine)
            assert httpx.get(f"{url}/healthz", timeout=60).json() == {"status": "ok"}
        finally:  # before the server stops (a request waiting for a token would hold it)
            for limiter, borrower in held:
                limiter.release_on_behalf_of(borrower)


def test_no_route_hands_a_trivial_dependency_to_the_thread_pool(tmp_path):
    """FastAPI runs a plain ``def`` dependency in its thread pool: a hand-over to a worker thread and back
    per dependency and request. The dependencies that only read ``app.state`` are coroutine functions, so
    they run on the event loop; the only ``def`` dependencies are those that read the disk. Before, every
    route's state getters were ``def`` (four hand-overs for each ``/project``)."""
    import asyncio
    import inspect

    from service import Settings, create_app

    app = create_app(Settings(data_dir=tmp_path, scheduler=None, n_workers=1))  # routes only: no lifespan runs

    def dependencies(dependant):
        for dependency in dependant.dependencies:
            yield dependency.call
            yield from dependencies(dependency)

    in_threads, seen = set(), 0
    for route in api_routes(app.routes):
        seen += 1
        for call in dependencies(route.dependant):
            if not (asyncio.iscoroutinefunction(call) or inspect.isasyncgenfunction(call)):
                in_threads.add(f"{call.__module__}.{call.__qualname__}")
    assert seen > 30  # the walk reached the API's routes
    assert in_threads == {"service.limits.fit_owner"}, in_threads  # lists the registries' records


def api_routes(routes):
    """Every `fastapi.routing.APIRoute` below ``routes`` (FastAPI 0.165 wraps an included router's routes
    in an _IncludedRouter)."""
    from fastapi.routing import APIRoute

    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        elif getattr(route, "original_router", None) is not None:
            yield from api_routes(route.original_router.routes)


def test_every_body_of_rows_is_decoded_and_validated_off_the_event_loop(tmp_path):
    """A route whose body model holds ``rows`` is a `service.payloads.ThreadParsedRoute`: a large body is
    decoded and validated in a worker thread. ``/v1/clusterings/{name}/predict`` was not: a large
    body held every other request while it was decoded, validated and made an array."""
    from pydantic import BaseModel

    from service import Settings, create_app
    from service.payloads import ThreadParsedRoute

    app = create_app(Settings(data_dir=tmp_path, scheduler=None, n_workers=1))
    off_the_loop = {}
    for route in api_routes(app.routes):
        annotation = getattr(getattr(route.body_field, "field_info", None), "annotation", None)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel) and "rows" in annotation.model_fields:
            off_the_loop[f"{sorted(route.methods)[0]} {route.path}"] = isinstance(route, ThreadParsedRoute)
    assert len(off_the_loop) >= 4, off_the_loop  # project, reconstruct, denoise, predict
    assert all(off_the_loop.values()), off_the_loop
