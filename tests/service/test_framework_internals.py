"""The framework internals the service leans on, held to what it expects (issue 54).

`service.uvicorn_internals` lists what `service.health_protocol` and `service.http_protocol` use of
uvicorn's httptools protocol, and `service.fastapi_internals` what `service.payloads.ThreadParsedRoute`
reads of a FastAPI route (its body field, to validate a large body off the event loop); each item is
asserted here on the installed uvicorn and FastAPI, so that the first version that drops, renames or
changes one fails here, naming it (the behaviour itself is tested through a real server by
test_health_protocol.py, test_slow_clients.py, test_body_validation_thread.py and
test_api_npy_bodies.py), and each pin in pyproject.toml is held to its list's `CHECKED_ON`. The rest of
FastAPI's and starlette's that the service uses is public: `fastapi.routing.iter_route_contexts` (FastAPI
0.137.2) walks the nested routers, and `service.security.route_path` is the ASGI rule the router matches
by, held here to starlette's own. `service.starlette_internals` names the one starlette detail leaned on:
`service.payloads.ThreadParsedRequest` keeps the body it read where starlette's ``Request`` caches it
(``_body``), so that ``Request.body()`` returns it and ``Request.stream()`` replays it; held here too, and
starlette's pin with it.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from pathlib import Path
from typing import Annotated

import fastapi
import httpx
import pytest
import starlette
import uvicorn
from fastapi import APIRouter, Body, Depends, FastAPI
from fastapi.encoders import jsonable_encoder
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field
from starlette.requests import Request

from service import fastapi_internals, starlette_internals, uvicorn_internals
from service.fastapi_internals import (
    DEPENDANT_ATTRIBUTES,
    FIELD_ATTRIBUTES,
    ROUTE_ATTRIBUTES,
    body_validator,
    single_body_model,
)
from service.security import route_path, route_rules
from service.uvicorn_internals import ATTRIBUTES, HOOKS, METHODS, STATUS_LINE, HttpToolsProtocol


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


ADAPTERS = {"uvicorn": (uvicorn, uvicorn_internals), "fastapi": (fastapi, fastapi_internals),
            "starlette": (starlette, starlette_internals)}


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_the_installed_framework_is_within_the_checked_versions(name):
    framework, adapter = ADAPTERS[name]
    assert _version(adapter.CHECKED_ON[0]) <= _version(framework.__version__) \
        <= _version(adapter.CHECKED_ON[-1]), (name, framework.__version__, adapter.CHECKED_ON)


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_pyproject_pins_the_framework_to_the_checked_versions(name):
    """The requirement's bounds are the checked range: at least the first checked version, below the minor after
    the last, so that an upgrade past what was checked is a deliberate change of the pin and of CHECKED_ON."""
    adapter = ADAPTERS[name][1]
    pyproject = (Path(adapter.__file__).resolve().parents[1] / "pyproject.toml").read_text()
    pin = re.search(rf'"{name}>=([\d.]+),<([\d.]+)"', pyproject)
    assert pin, f"pyproject.toml's {name} requirement has no upper bound"
    first, last = (_version(v) for v in (adapter.CHECKED_ON[0], adapter.CHECKED_ON[-1]))
    assert _version(pin.group(1)) == first[:len(_version(pin.group(1)))]
    assert _version(pin.group(2)) == (last[0], last[1] + 1), (name, pin.groups(), adapter.CHECKED_ON)


@pytest.mark.parametrize("hook", HOOKS + METHODS)
def test_uvicorns_protocol_has_every_hook_and_method_the_subclasses_use(hook):
    assert callable(getattr(HttpToolsProtocol, hook, None)), f"uvicorn's HttpToolsProtocol has no {hook}"


@pytest.mark.parametrize("attribute", ATTRIBUTES)
def test_uvicorns_protocol_sets_every_attribute_the_subclasses_read(attribute):
    """Each attribute is assigned by uvicorn's own protocol (in its constructor or a hook), so that the
    subclasses read what uvicorn keeps there."""
    source = inspect.getsource(HttpToolsProtocol)
    assert re.search(rf"self\.{attribute}\s*(:[^=]+)?=[^=]", source), f"HttpToolsProtocol no longer sets {attribute}"


def test_the_status_line_table_gives_the_line_uvicorn_writes():
    assert STATUS_LINE[200] == b"HTTP/1.1 200 OK\r\n"


def test_the_cycle_keeps_what_the_guards_read():
    """The request cycle (``protocol.cycle``) keeps its transport, whether its response is complete and
    whether its body is still arriving."""
    from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

    source = inspect.getsource(RequestResponseCycle)
    for attribute in ("transport", "response_complete", "more_body"):
        assert re.search(rf"self\.{attribute}\s*=", source), attribute


SCOPES = [
    {"path": "/v1/models", "root_path": ""},
    {"path": "/api/v1/models", "root_path": "/api"},
    {"path": "/api", "root_path": "/api"},
    {"path": "/apiary/v1", "root_path": "/api"},  # not a whole segment: the path as it is
    {"path": "/v1/models", "root_path": "/api"},  # a proxy that strips its prefix
    {"path": "/", "root_path": "/"},
    {"path": "/x"},
]


@pytest.mark.parametrize("scope", SCOPES)
def test_the_route_path_is_the_one_starlettes_router_matches(scope):
    from starlette._utils import get_route_path  # the router's own (private): the reference, here only

    assert route_path(scope) == get_route_path(scope)


def test_route_rules_walk_nested_routers_with_their_full_paths():
    from service.security import READ, access

    inner = APIRouter(prefix="/inner")
    inner.add_api_route("/{name}", lambda name: name, methods=["GET"], openapi_extra=access(READ))
    outer = APIRouter(prefix="/outer")
    outer.include_router(inner)
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)  # only the routes above
    app.include_router(outer)
    rules = route_rules(app)
    assert list(rules) == [("GET", "/outer/inner/{name}")] and rules["GET", "/outer/inner/{name}"].scope == READ


# FastAPI's route internals (service.fastapi_internals)

class Rows(BaseModel):
    rows: list[list[float]] = Field(min_length=1)
    scale: float = 1.0


class Other(BaseModel):
    name: str


def _route(endpoint) -> APIRoute:
    return APIRoute("/x", endpoint, methods=["POST"])


def one_model(body: Rows) -> int:
    return len(body.rows)


def two_models(body: Rows, other: Other) -> int:
    return len(body.rows)


def embedded(body: Annotated[Rows, Body(embed=True)]) -> int:
    return len(body.rows)


def a_list(body: list[int]) -> int:
    return len(body)


def no_body() -> int:
    return 0


def body_of_a_dependency(other: Other) -> str:
    return other.name


def via_dependency(name: Annotated[str, Depends(body_of_a_dependency)]) -> str:
    return name


def model_and_dependency(body: Rows, name: Annotated[str, Depends(body_of_a_dependency)]) -> int:
    return len(body.rows)


@pytest.mark.parametrize("attribute", ROUTE_ATTRIBUTES)
def test_fastapis_route_sets_every_attribute_read(attribute):
    """Set by the route's constructor, before `get_route_handler` (which ThreadParsedRoute overrides) runs."""
    seen = {}

    class Recording(APIRoute):
        def get_route_handler(self):
            seen[attribute] = hasattr(self, attribute)
            return super().get_route_handler()

    Recording("/x", one_model, methods=["POST"])
    assert seen[attribute], f"FastAPI's APIRoute no longer sets {attribute} before get_route_handler"


@pytest.mark.parametrize("attribute", DEPENDANT_ATTRIBUTES)
def test_fastapis_dependant_keeps_the_endpoints_body_params(attribute):
    route = _route(one_model)
    params = getattr(route.dependant, attribute, None)
    assert isinstance(params, list) and len(params) == 1, f"the route's dependant has no {attribute} list"
    assert params[0] is route.body_field  # a single body parameter, not embedded, is the body field itself


@pytest.mark.parametrize("attribute", FIELD_ATTRIBUTES)
def test_fastapis_body_field_has_every_attribute_used(attribute):
    assert hasattr(_route(one_model).body_field, attribute), f"FastAPI's body field has no {attribute}"


def test_the_body_fields_annotation_is_the_model():
    assert _route(one_model).body_field.field_info.annotation is Rows


@pytest.mark.parametrize("endpoint, model", [
    (one_model, Rows), (two_models, None), (embedded, None), (a_list, None), (no_body, None),
    (via_dependency, None), (model_and_dependency, None),
])
def test_single_body_model_is_the_model_only_when_it_is_the_whole_body(endpoint, model):
    assert single_body_model(_route(endpoint)) is model


def test_the_body_validator_gives_the_model_or_fastapis_errors_under_body():
    validate = body_validator(_route(one_model))
    value, errors = validate({"rows": [[1, 2]], "scale": "2"})
    assert isinstance(value, Rows) and value.scale == 2.0 and not errors
    value, errors = validate({"rows": [], "scale": "x"})
    assert value is None and sorted(tuple(e["loc"]) for e in errors) == [("body", "rows"), ("body", "scale")]
    with pytest.raises(ValueError):
        body_validator(_route(no_body))


@pytest.mark.parametrize("body", [{"rows": [], "scale": "x"}, {"rows": [[1, "a"]]}, [1, 2], {}])
def test_the_body_validators_errors_are_fastapis_own_422(body):
    """What the thread validates is what FastAPI's handler would have answered on the event loop: the same
    errors, at the same locations (FastAPI's default 422 handler, a plain route)."""
    app = FastAPI()
    app.add_api_route("/x", one_model, methods=["POST"])

    async def post() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            return await client.post("/x", json=body)

    response = asyncio.run(post())
    assert response.status_code == 422
    _, errors = body_validator(_route(one_model))(body)
    assert jsonable_encoder(errors) == response.json()["detail"]


def test_starlettes_request_returns_and_replays_a_body_given_through_its_cache():
    """`service.starlette_internals.cache_body` gives a request its body: ``Request.body()`` returns that very
    buffer (no copy) and ``Request.stream()`` replays it instead of receiving again ("Stream consumed")."""

    async def receive():
        raise AssertionError("the body was received again")

    async def read() -> tuple[bool, bytes]:
        request = Request({"type": "http", "method": "POST", "headers": []}, receive)
        assert starlette_internals.cached_body(request) is None
        buffer = bytearray(b"{}")
        starlette_internals.cache_body(request, buffer)
        same = await request.body() is buffer and starlette_internals.cached_body(request) is buffer
        return same, b"".join([part async for part in request.stream()])

    assert asyncio.run(read()) == (True, b"{}")


def test_starlettes_request_caches_the_body_it_reads_where_the_adapter_looks():
    """starlette's own ``Request.body()`` keeps what it read in the attribute `ATTRIBUTES` names."""
    messages = iter([{"type": "http.request", "body": b"[1]", "more_body": False}])

    async def receive():
        return next(messages)

    async def read():
        request = Request({"type": "http", "method": "POST", "headers": []}, receive)
        body = await request.body()
        return body, starlette_internals.cached_body(request), \
            all(hasattr(request, name) for name in starlette_internals.ATTRIBUTES)

    assert asyncio.run(read()) == (b"[1]", b"[1]", True)
