"""Error translation: every failure leaves as ``{"error": {code, message, field}}``.

* `ApiError` — raised by routes for mistakes they detect themselves.
* store errors (`store.errors.StoreError`) — mapped by their ``code``:
  ``not_found`` 404, ``conflict`` 409, ``invalid`` 422, ``corrupt`` 409 (stored
  rows fail their digest: the message says which chunks to upload again).
* `kpca.params.ParamError` — a declared parameter refused (kernel, solver,
  pre-image option): 422 on its dotted ``field``, whether raised while a
  request body is validated or later, against the data.
* `RequestValidationError` — 422 (400 when the JSON itself is unparseable),
  ``field`` is the dotted location without its ``body``/``path``/``query`` root.
* Starlette `HTTPException` (unknown route, wrong method) — its status code;
  a 405 lists in ``Allow`` every method the path supports (Starlette names
  only the first route it matched), a body that is not UTF-8 is a 400 on
  ``body``.
* anything else — 500 ``internal``, logged, with ``Connection: close``; client input should never get here.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import HTTPExceptionHandler

from kpca.params import ParamError
from service.schemas.errors import ErrorBody, ErrorDetail
from store.atomic import disk_full
from store.errors import NotFound, StoreError
from store.objects.interface import ObjectStoreError, StoreRefused, StoreUnavailable

log = logging.getLogger(__name__)

#: HTTP status of each store error code.
STORE_STATUS = {"not_found": 404, "conflict": 409, "invalid": 422, "corrupt": 409}

#: Error code reported for a bare HTTP status (routing errors and the like).
STATUS_CODE_NAMES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid",
    503: "unavailable",
}

#: Fields holding a discriminated union: pydantic puts the tag in the error
#: location (``kernel.gaussian.sigma``); users wrote ``kernel.sigma``.
_TAGGED_UNION_FIELDS = frozenset({"kernel"})

_LOCATION_ROOTS = frozenset({"body", "path", "query", "header", "cookie"})


class ApiError(HTTPException):
    """A client mistake found by a route: status, code, message, field at fault."""

    def __init__(self, status_code: int, code: str, message: str, field: str | None = None):
        super().__init__(status_code=status_code, detail=message)
        self.code = code
        self.message = message
        self.field = field


def error_response(
    status_code: int, code: str, message: str, field: str | None = None, headers=None
) -> JSONResponse:
    body = ErrorBody(error=ErrorDetail(code=code, message=message, field=field))
    return JSONResponse(body.model_dump(), status_code=status_code, headers=headers)


def field_from_loc(loc: Sequence[Any]) -> str | None:
    """Dotted field name of a pydantic error location.

    ``("body", "kernel", "gaussian", "sigma")`` -> ``"kernel.sigma"``;
    ``("path", "index")`` -> ``"index"``; ``("body",)`` -> ``"body"``.
    """
    parts = list(loc)
    root = None
    if parts and parts[0] in _LOCATION_ROOTS:
        root = parts.pop(0)
    cleaned: list[str] = []
    for i, part in enumerate(parts):
        if i > 0 and parts[i - 1] in _TAGGED_UNION_FIELDS and isinstance(part, str):
            # the union tag, unless it is the only thing after the field
            if i + 1 < len(parts):
                continue
        cleaned.append(str(part))
    if cleaned:
        return ".".join(cleaned)
    return root


def validation_api_error(errors: Sequence[dict[str, Any]]) -> ApiError:
    """The `ApiError` whose answer is the one a `RequestValidationError` of ``errors`` gets (pydantic's
    errors, locations starting with ``body``), for a body validated outside FastAPI's own step."""
    return ApiError(*_describe_validation_errors(errors))


def _describe_validation_errors(errors: Sequence[dict[str, Any]]) -> tuple[int, str, str, str | None]:
    first = errors[0]
    if first.get("type") == "json_invalid":
        reason = (first.get("ctx") or {}).get("error", "invalid JSON")
        return 400, "bad_request", f"request body is not valid JSON: {reason}", "body"
    more = f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    declared = (first.get("ctx") or {}).get("error")
    if isinstance(declared, ParamError):  # raised by a declaration's own check: it names its field
        return 422, "invalid", str(declared) + more, declared.field
    field = field_from_loc(first.get("loc", ()))
    message = str(first.get("msg", "invalid value"))
    if first.get("type") == "missing":
        message = "field required"
    elif first.get("type") == "extra_forbidden":
        message = "unknown field; remove it (see the schema at /docs)"
    if field:
        message = f"{field}: {message}"
    return 422, "invalid", message + more, field


async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
    return error_response(exc.status_code, exc.code, exc.message, exc.field, exc.headers)


_HTTP_METHODS = frozenset({"get", "put", "post", "delete", "patch", "head", "options", "trace"})

#: FastAPI's detail when a body cannot be decoded (not UTF-8, unreadable form).
_UNPARSEABLE_BODY = "There was an error parsing the body"


def allowed_methods(request: Request) -> list[str]:
    """Every method the app's documented routes accept on the request's path, sorted.

    Read from the OpenAPI document's paths (``/v1/datasets/{name}`` matches
    any one path segment). Cost O(paths), the document is built once per app.
    """
    methods: set[str] = set()
    path = request.url.path
    for template, operations in request.app.openapi().get("paths", {}).items():
        if re.fullmatch(re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)), path):
            methods |= {method.upper() for method in operations if method.lower() in _HTTP_METHODS}
    return sorted(methods)


async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    if isinstance(exc, ApiError):
        return await _api_error(request, exc)
    code = STATUS_CODE_NAMES.get(exc.status_code, "error")
    message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    headers = dict(getattr(exc, "headers", None) or {})
    field = None
    if exc.status_code == 405:
        methods = allowed_methods(request)
        if methods:
            headers["Allow"] = ", ".join(methods)
            message = f"{request.method} is not allowed on {request.url.path}; allowed: {', '.join(methods)}"
    elif exc.status_code == 400 and message == _UNPARSEABLE_BODY:
        field, message = "body", unparseable_reason(exc.__cause__)
    return error_response(exc.status_code, code, message, field, headers or None)


def unparseable_reason(cause: BaseException | None) -> str:
    """Why FastAPI could not parse a JSON body, from the exception it wrapped: not UTF-8, nested deeper
    than the parser's recursion allows, an integer with more digits than Python converts, or (anything
    else) the parser's own words. Cost O(1)."""
    if isinstance(cause, UnicodeDecodeError):
        return f"request body could not be decoded: JSON must be UTF-8 text (invalid byte at offset {cause.start})"
    if isinstance(cause, RecursionError):
        return ("request body is not JSON that can be read: it is nested too deep (arrays or objects inside each "
                "other beyond the parser's limit); no request of this API nests more than a few levels")
    if isinstance(cause, ValueError) and "integer string conversion" in str(cause):
        return ("request body is not JSON that can be read: an integer has more digits than the parser converts "
                f"({str(cause).split(':', 1)[0].strip()}); numbers must fit a float64")
    text = str(cause) if cause is not None else "unknown reason"
    return f"request body could not be parsed as JSON: {type(cause).__name__}: {text[:200]}"


async def _store_error(request: Request, exc: StoreError) -> JSONResponse:
    status_code = STORE_STATUS.get(exc.code, 422)
    field = exc.field
    if field is None and isinstance(exc, NotFound):
        field = "name"  # the resource named in the path
    return error_response(status_code, exc.code, exc.message, field)


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = list(exc.errors()) or [{"loc": ("body",), "msg": "invalid request"}]
    first = errors[0]
    if tuple(first.get("loc", ())) == ("body",) and first.get("type") != "missing":
        media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media_type != "application/json" and not media_type.endswith("+json"):
            # FastAPI only parses JSON bodies sent as JSON: say so instead of "not an object"
            return error_response(
                415,
                "unsupported_media_type",
                f"Content-Type must be application/json, not {media_type or 'absent'}",
                "content-type",
            )
    status_code, code, message, field = _describe_validation_errors(errors)
    return error_response(status_code, code, message, field)


async def _param_error(request: Request, exc: ParamError) -> JSONResponse:
    return error_response(422, "invalid", str(exc), exc.field)


async def _os_error(request: Request, exc: OSError) -> JSONResponse:
    """A full disk is a 507 the client can act on (the store's writes are atomic: nothing changed);
    any other OSError is internal."""
    if not disk_full(exc):
        return await _internal_error(request, exc)
    log.error("no space for a write on %s %s: %s", request.method, request.url.path, exc)
    return error_response(507, "insufficient_storage", "no space left on the data folder's disk (or a file grew "
                          "too large) for this write; nothing was changed. Free space, e.g. delete data sets, models "
                          "or old checkpoints, then retry")


async def _object_store_error(request: Request, exc: ObjectStoreError) -> JSONResponse:
    """The object store (``KPCA_DATA_DIR=s3://...``): unreachable after its retries is a 503 with ``Retry-After``;
    a refused write (a quota, no space, no permission) a 507; an object changed or gone between two reads (a race
    with another writer) a 409 saying to retry. Its writes are whole objects: nothing is half-written."""
    if isinstance(exc, StoreUnavailable):
        log.error("object store unavailable on %s %s: %s", request.method, request.url.path, exc)
        return error_response(503, "store_unavailable", f"the object store could not be reached: {exc}",
                              headers={"Retry-After": "10"})
    if isinstance(exc, StoreRefused):
        log.error("object store refused a write on %s %s: %s", request.method, request.url.path, exc)
        return error_response(507, "insufficient_storage", f"the object store refused the write (a quota, no space, "
                              f"or no permission); nothing was changed: {exc}")
    return error_response(409, "conflict", f"what this request read changed meanwhile; retry: {exc}")


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    """500 ``internal``, logged, with ``Connection: close``: an exception that reaches Starlette's
    ``ServerErrorMiddleware`` is raised again after the answer and uvicorn drops the connection, so a
    keep-alive client is told to open a new one (not to find the socket dead on its next request)."""
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal", "internal server error; the failure has been logged",
                          headers={"Connection": "close"})


E = TypeVar("E", bound=Exception)


def _handle(app: FastAPI, kind: type[E], handler: Callable[[Request, E], Awaitable[JSONResponse]]) -> None:
    """``app.add_exception_handler(kind, handler)``. Starlette calls a handler only with instances of the
    class it is registered for, but types every handler as taking any Exception: the cast says which."""
    app.add_exception_handler(kind, cast(HTTPExceptionHandler, handler))


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that give every error the documented shape."""
    _handle(app, ApiError, _api_error)
    _handle(app, StarletteHTTPException, _http_error)
    _handle(app, StoreError, _store_error)
    _handle(app, ParamError, _param_error)
    _handle(app, RequestValidationError, _validation_error)
    _handle(app, ObjectStoreError, _object_store_error)
    _handle(app, OSError, _os_error)
    _handle(app, Exception, _internal_error)
