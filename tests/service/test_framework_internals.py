"""The framework internals the service leans on, held to what it expects (issue 54).

`service.uvicorn_internals` lists what `service.health_protocol` and `service.http_protocol` use of
uvicorn's httptools protocol; each item is asserted here on the installed uvicorn, so that the first
version that drops or renames one fails here, naming it (the behaviour itself is tested through a real
server by test_health_protocol.py and test_slow_clients.py). FastAPI's and starlette's are public now:
`fastapi.routing.iter_route_contexts` (FastAPI 0.137.2) walks the nested routers, and
`service.security.route_path` is the ASGI rule the router matches by, held here to starlette's own.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
import uvicorn
from fastapi import APIRouter, FastAPI

from service import uvicorn_internals
from service.security import route_path, route_rules
from service.uvicorn_internals import ATTRIBUTES, HOOKS, METHODS, STATUS_LINE, HttpToolsProtocol


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def test_the_installed_uvicorn_is_within_the_checked_ones():
    assert _version(uvicorn_internals.CHECKED_ON[0]) <= _version(uvicorn.__version__) \
        <= _version(uvicorn_internals.CHECKED_ON[-1]), (uvicorn.__version__, uvicorn_internals.CHECKED_ON)


def test_pyproject_pins_uvicorn_to_the_checked_versions():
    """The requirement's bounds are the checked range: at least the first checked version, below the minor after
    the last, so that an upgrade past what was checked is a deliberate change of the pin and of CHECKED_ON."""
    pyproject = (Path(uvicorn_internals.__file__).resolve().parents[1] / "pyproject.toml").read_text()
    pin = re.search(r'"uvicorn>=([\d.]+),<([\d.]+)"', pyproject)
    assert pin, "pyproject.toml's uvicorn requirement has no upper bound"
    first, last = (_version(v) for v in (uvicorn_internals.CHECKED_ON[0], uvicorn_internals.CHECKED_ON[-1]))
    assert _version(pin.group(1)) == first[:len(_version(pin.group(1)))]
    assert _version(pin.group(2)) == (last[0], last[1] + 1), (pin.groups(), uvicorn_internals.CHECKED_ON)


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
