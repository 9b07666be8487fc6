"""The one place the service leans on FastAPI's internals: what `service.payloads.ThreadParsedRoute` reads
of an `APIRoute` to decode and validate a large JSON body as the route's body model in a worker thread,
instead of on the event loop.

FastAPI has no public hook for that: its request handler (``fastapi.routing.get_request_handler``) reads
the body and validates it on the event loop, and nothing public says which model a route's body is or
validates data as the handler would (with its error locations, ``("body", ...)``). A route class may
override ``get_route_handler`` (public, documented as "custom APIRoute class"), and these functions read
what FastAPI built for the route. What they use of it is listed below, and
``tests/service/test_framework_internals.py`` asserts each item on the installed FastAPI, so that the first
version that renames, drops or changes one fails there, by name, before a body is validated wrongly.
pyproject.toml pins fastapi to the checked range (below the minor after the last version in `CHECKED_ON`),
and that test holds the pin to `CHECKED_ON`: an upgrade is a deliberate change of both, made after this
list's test passes on the new version.

Checked on fastapi 0.137.2, the lower bound in pyproject.toml (the first with
``fastapi.routing.iter_route_contexts``, `service.security`), by reading its source, and on 0.165.0,
installed, by the test suite (tests/service/test_body_validation_thread.py, test_api_npy_bodies.py and
this list's own test). Both set the attributes in the route's constructor (0.137.2's
``_populate_api_route_state`` with ``get_body_field``; 0.165.0's with ``_get_body_field``), and both
validate a single, not embedded body parameter with that field's ``validate(value, values, loc=("body",))``
(``fastapi.dependencies.utils.request_body_to_args``).

Of `fastapi.routing.APIRoute` (`ROUTE_ATTRIBUTES`):

* ``body_field``: the request body's field: the body parameter itself when it is the only one and not
  embedded, a generated ``Body_<unique_id>`` field otherwise, None without a body;
* ``dependant`` (a ``fastapi.dependencies.models.Dependant``): its ``body_params`` (`DEPENDANT_ATTRIBUTES`),
  the endpoint's own body parameters (those of its dependencies not among them).

Of the body field, a ``fastapi._compat.ModelField`` (a private module; `FIELD_ATTRIBUTES`):

* ``field_info``: pydantic's ``FieldInfo``, whose ``annotation`` is the parameter's type (the model);
* ``validate(value, values, *, loc)``: ``(value, [])`` for valid data, ``(None, errors)`` otherwise, each
  error a dict whose ``loc`` starts with ``loc``: the errors FastAPI's 422 names.

A route included in an application is served, since 0.137.2, through an "effective route context" that
rebuilds these attributes with the including routers' dependencies; the route's own are read here, which
are the same for the service's routers (`service.app` includes them with no dependencies).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.routing import APIRoute
from pydantic import BaseModel

__all__ = ["CHECKED_ON", "DEPENDANT_ATTRIBUTES", "FIELD_ATTRIBUTES", "ROUTE_ATTRIBUTES", "BodyValidator",
           "body_validator", "single_body_model"]

#: the fastapi versions this list was checked on (module docstring)
CHECKED_ON = ("0.137.2", "0.165.0")
ROUTE_ATTRIBUTES = ("body_field", "dependant")
DEPENDANT_ATTRIBUTES = ("body_params",)
FIELD_ATTRIBUTES = ("field_info", "validate")

#: the body field's ``validate`` with its location: decoded JSON -> ``(value, errors)``
BodyValidator = Callable[[Any], tuple[Any, Any]]


def single_body_model(route: APIRoute) -> type[BaseModel] | None:
    """The pydantic model that is ``route``'s whole request body (its endpoint's only body parameter, not
    embedded), or None (no body, several body parameters, an embedded one, or a type other than a model).
    O(1)."""
    field = route.body_field
    params = route.dependant.body_params
    if field is None or len(params) != 1 or params[0] is not field:
        return None
    annotation = field.field_info.annotation
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def body_validator(route: APIRoute) -> BodyValidator:
    """A function validating decoded JSON as ``route``'s body, as FastAPI's handler does: ``(value, [])``,
    or ``(None, errors)`` with locations under ``"body"``. ``route`` has a body (`single_body_model`: the
    errors are then those of its whole body). Cost per call: pydantic's validation, O(data)."""
    field = route.body_field
    if field is None:
        raise ValueError(f"route {route.path} has no request body")

    def validate(data: Any) -> tuple[Any, Any]:
        return field.validate(data, {}, loc=("body",))

    return validate
