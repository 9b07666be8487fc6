"""The order of the routers (`service.routes.ROUTERS`) is chosen for speed alone: no route can answer a
request meant for another, so moving the busiest routes first changes no answer."""

from __future__ import annotations

import re

from starlette.routing import Match

from tests.service.test_api_health import api_routes

#: a value for each path parameter's convertor (starlette's names)
SAMPLES = {"str": "x1", "int": "3", "path": "a/b", "float": "1.5", "uuid": "00000000-0000-0000-0000-000000000000"}


def own_path(route) -> str:
    """A concrete path that ``route``'s own pattern matches: each parameter given a value its convertor
    takes."""
    def value(match: re.Match) -> str:
        convertor = match.group(2) or "str"
        return SAMPLES[convertor]

    return re.sub(r"{([^}:]+)(?::([^}]+))?}", value, route.path_format)


def first_to_answer(routes, method: str, path: str):
    """The first of ``routes`` (in the app's order) that takes ``method path`` whole, as the router
    tries them."""
    scope = {"type": "http", "method": method, "path": path, "root_path": "", "headers": [], "query_string": b""}
    for route in routes:
        match, _ = route.matches(scope)
        if match == Match.FULL:
            return route
    return None


def test_every_route_answers_its_own_requests(tmp_path):
    """Each route's own path and method reach that route first, whatever comes before it."""
    from service import Settings, create_app

    app = create_app(Settings(data_dir=tmp_path, scheduler=None, n_workers=1))  # routes only: no lifespan runs
    routes = list(api_routes(app.routes))
    assert len(routes) > 30
    taken = {}
    for route in routes:
        path = own_path(route)
        assert route.matches({"type": "http", "method": sorted(route.methods)[0], "path": path,
                              "root_path": "", "headers": [], "query_string": b""})[0] == Match.FULL, path
        for method in route.methods:
            first = first_to_answer(routes, method, path)
            if first is not route:
                taken[f"{method} {route.path}"] = f"{sorted(first.methods)} {first.path}"
    assert not taken, taken


def test_the_check_sees_a_route_that_another_would_take(tmp_path):
    """The check above fails where order matters: a fixed path after a parameter that matches it."""
    from fastapi import APIRouter

    router = APIRouter()

    @router.get("/v1/things/{name}")
    async def thing(name: str) -> dict:
        return {}

    @router.get("/v1/things/latest")
    async def latest() -> dict:
        return {}

    shadowed = router.routes[1]
    assert first_to_answer(router.routes, "GET", own_path(shadowed)) is router.routes[0]
