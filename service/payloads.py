"""Decoding of row payloads (chunk uploads, projection requests) into arrays.

Only parsing and shape checks live here; the store validates the contents
(columns, finiteness, emptiness) against the data set.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import MutableMapping
from typing import Any

import numpy as np
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request

from service.csv_rows import rows_from_csv  # noqa: F401  (the CSV parser, re-exported)
from service.errors import ApiError, validation_api_error
from service.fastapi_internals import BodyValidator, body_validator, single_body_model
from service.limits import check_rows
from service.schemas.datasets import ChunkRows
from service.starlette_internals import cache_body, cached_body
from store.npy import array_in_buffer, read_buffer_header

NPY_MEDIA_TYPE = "application/octet-stream"
JSON_MEDIA_TYPE = "application/json"
CSV_MEDIA_TYPE = "text/csv"
#: the header that holds a rows route's fields other than ``rows`` (a JSON object) when its rows come as
#: ``.npy`` bytes; the same header carries a ``.npy`` answer's other fields (`service.responses`)
FIELDS_HEADER = "X-KPCA-Fields"
FIELDS_HEADER_BYTES = 16 * 1024


#: JSON bodies up to this many bytes are decoded on the event loop: a trip to the thread pool costs more
#: than decoding them (a few rows), and under load each trip is a hand-over of the interpreter's lock
INLINE_JSON_BYTES = 16 * 1024


class ThreadParsedRequest(Request):
    """A request whose JSON body, when larger than `INLINE_JSON_BYTES`, is decoded (`json.loads`) and
    validated as the route's body model (``validate_body``) in a worker thread, not on the event loop."""

    validate_body: BodyValidator | None = None  # set by `ThreadParsedRoute`

    # the one buffer `read_body` filled, a bytearray, which every reader of the body takes as bytes (copying it
    # into bytes would hold the body twice), kept in starlette's own cache (`service.starlette_internals`)
    async def body(self) -> bytes | bytearray:  # type: ignore[override]  # a bytearray, not a copy (above)
        """The body, read once into one buffer (`read_body`, where starlette's would hold it twice)."""
        body = cached_body(self)
        if body is None:
            body = await read_body(self)
            cache_body(self, body)
        return body

    async def json(self):
        """The body as JSON, decoded once; large bodies decoded and validated off the event loop. Cost
        O(body)."""
        if not hasattr(self, "_json"):
            body = await self.body()
            self._json = json.loads(body) if len(body) <= INLINE_JSON_BYTES else \
                await run_in_threadpool(self._decoded_and_validated, body)
        return self._json

    def _decoded_and_validated(self, body: bytes | bytearray):
        """The body's JSON as the route's body model (FastAPI's validation on the loop then takes the
        instance as it is: pydantic does not validate a model instance again), or as decoded when the
        route has no single body model. Invalid: the `ApiError` FastAPI's 422 would have been."""
        data = json.loads(body)
        if self.validate_body is None:
            return data
        value, errors = self.validate_body(data)
        if errors:
            raise validation_api_error(errors)
        return value


class NpyRowsRequest(ThreadParsedRequest):
    """A request to a rows route whose ``rows`` came as ``.npy`` bytes (``Content-Type:
    application/octet-stream``) and its other fields, if any, as a JSON object in the header
    `FIELDS_HEADER`. FastAPI is shown a JSON request (`json_scope`) whose body is the route's body model,
    built off the event loop by `npy_body_model` with ``rows`` the array as read: no JSON text, no
    Python float per value."""

    max_rows: int | None = None  # the body model's bound on rows, set by `ThreadParsedRoute`

    async def json(self):
        """The body model from the ``.npy`` rows and `FIELDS_HEADER`, built once in a worker thread. Cost
        O(body)."""
        if not hasattr(self, "_json"):
            body = await self.body()
            self._json = await run_in_threadpool(npy_body_model, body, self.headers.get(FIELDS_HEADER),
                                                 self.validate_body, self.max_rows)
        return self._json


def json_scope(scope: MutableMapping[str, Any]) -> dict[str, Any]:
    """``scope`` (an ASGI request's) with its Content-Type replaced by JSON's: what `NpyRowsRequest` shows
    FastAPI, whose body step reads a model only from a JSON request. Cost O(headers)."""
    headers = [(key, value) for key, value in scope["headers"] if key.lower() != b"content-type"]
    return {**scope, "headers": [*headers, (b"content-type", JSON_MEDIA_TYPE.encode())]}


def npy_body_model(body: bytes | bytearray, fields: str | None, validate_body: BodyValidator, max_rows: int | None):
    """A rows route's body model from ``.npy`` rows (``body``, `rows_from_npy`: 400 on ``body`` if
    unreadable, 413 on ``rows`` past ``max_rows``) and its other fields (``fields``, the `FIELDS_HEADER`
    text: a JSON object without ``rows``; 400 naming the header if it is not one). The fields are
    validated as a JSON body's would be (422 naming the field); ``rows`` is then the array itself, 2-D
    with at least one row (422 on ``rows`` otherwise), checked for its width and values by the route
    as JSON rows are. Cost O(body)."""
    rows = rows_from_npy(body, max_rows)
    if rows.ndim != 2 or rows.shape[0] == 0:
        raise ApiError(422, "invalid", f"rows: the .npy array must be 2-D with at least one row (rows x "
                       f"columns), got shape {rows.shape}", "rows")
    extra: dict[str, Any] = {}
    if fields:
        try:
            decoded = json.loads(fields) if len(fields) <= FIELDS_HEADER_BYTES else None
        except ValueError:
            decoded = None
        if not isinstance(decoded, dict) or "rows" in decoded:
            raise ApiError(400, "bad_request", f"{FIELDS_HEADER} must be a JSON object of the request's fields "
                           f"other than rows, at most {FIELDS_HEADER_BYTES} bytes", FIELDS_HEADER)
        extra = decoded
    value, errors = validate_body({**extra, "rows": [[0.0]]})  # the fields checked; rows stand in
    if errors:
        raise validation_api_error(errors)
    return value.model_copy(update={"rows": rows})


def rows_bound(model: type[BaseModel]) -> int | None:
    """The most rows ``model``'s ``rows`` field accepts (its ``max_length``), or None. O(1)."""
    field = model.model_fields.get("rows")
    return next((m.max_length for m in (field.metadata if field else ()) if hasattr(m, "max_length")), None)


class ThreadParsedRoute(APIRoute):
    """A FastAPI route whose JSON body is decoded and validated off the event loop (`ThreadParsedRequest`),
    for the routes whose bodies are large (rows): a 16 MB body no longer holds up every other request
    while it is decoded, nor while its hundreds of thousands of numbers are validated. A route whose body
    model has ``rows`` and whose ``openapi_extra`` documents an `NPY_MEDIA_TYPE` request body (and accepts
    the media type, `service.security.access`: `service.routes.served.rows_body` gives both) also takes
    its rows as ``.npy`` bytes (`NpyRowsRequest`)."""

    def get_route_handler(self):
        """FastAPI's handler, given a `ThreadParsedRequest` over the same connection."""
        handler = super().get_route_handler()
        model = single_body_model(self)  # FastAPI's internals, read in service.fastapi_internals
        validate_body = body_validator(self) if model is not None else None
        declared = ((self.openapi_extra or {}).get("requestBody") or {}).get("content") or {}
        npy_rows = model is not None and "rows" in model.model_fields and NPY_MEDIA_TYPE in declared
        max_rows = rows_bound(model) if npy_rows and model is not None else None

        async def parse_off_loop(request: Request):
            threaded: ThreadParsedRequest
            if npy_rows and media_type(request) == NPY_MEDIA_TYPE:
                threaded = NpyRowsRequest(json_scope(request.scope), request.receive)
                threaded.max_rows = max_rows
            else:
                threaded = ThreadParsedRequest(request.scope, request.receive)
            threaded.validate_body = validate_body  # None without a single body model
            return await handler(threaded)

        return parse_off_loop


def media_type(request: Request) -> str:
    """The request's media type without parameters, lower case (``""`` if absent)."""
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()


async def read_body(request: Request, room=None) -> bytearray:
    """The whole request body, held once: received into one buffer sized from its ``Content-Length``
    (which `service.limits.BodyLimitMiddleware` has bounded), not gathered in parts and then joined,
    which held it twice. A body sent without a length grows its buffer as it comes. With ``room`` (a
    `service.limits.DataUsage`, for a body to be stored), its bytes are checked against the room left in
    the data folder as they arrive: a 413 ``storage_full`` (before any byte for a declared length) instead
    of the whole body first. Cost O(body) time, the body's bytes of memory.

    A client that disconnects mid-body gets (nobody reads it) a 400 on
    ``body`` instead of an "unhandled error" in the log; nothing is stored.
    """
    declared = request.headers.get("content-length", "").strip()
    if room is not None:
        room.check(int(declared) if declared.isdigit() else 0)
    buffer = bytearray(int(declared) if declared.isdigit() else 0)
    filled = 0
    try:
        async for part in request.stream():
            if room is not None and not declared.isdigit():
                room.check(filled + len(part))
            end = filled + len(part)
            if end <= len(buffer):
                buffer[filled:end] = part  # in place: the buffer keeps its memory
            else:
                del buffer[filled:]
                buffer += part
            filled = end
    except ClientDisconnect:
        raise ApiError(
            400, "bad_request", "the client disconnected before the whole body arrived", "body"
        ) from None
    del buffer[filled:]
    return buffer


def rows_from_npy(body: bytes | bytearray, max_rows: int | None = None) -> np.ndarray:
    """A numeric array from ``.npy`` bytes, a view on ``body`` (no copy); never unpickles.

    The header is read first, and its declared shape must account for exactly
    the bytes that follow, so a forged header cannot make us allocate more
    than the (size-limited) body.
    """
    try:
        shape, fortran, dtype, offset = read_buffer_header(body)  # in any thread (store.npy)
    except Exception as exc:  # ValueError, EOFError... all mean "not a .npy file"
        raise ApiError(400, "bad_request", f"request body is not a readable .npy array: {exc}", "body") from None
    if dtype.kind not in "biuf" or dtype.fields is not None or dtype.subdtype is not None:
        raise ApiError(422, "invalid", f"rows must be numeric; the .npy array has dtype {dtype}", "rows")
    expected = math.prod(shape) * dtype.itemsize
    available = len(body) - offset
    if expected != available:
        raise ApiError(
            400,
            "bad_request",
            f"request body is not a readable .npy array: the header declares shape {shape} "
            f"({expected} bytes of data) but {available} bytes follow it",
            "body",
        )
    if max_rows is not None and len(shape) >= 1:
        check_rows(int(shape[0]), max_rows)  # from the header, before the array is read
    return array_in_buffer(body, shape, fortran, dtype, offset)


#: JSON bodies above this many bytes are parsed piece by piece (`rows_from_large_json`).
STREAM_JSON_BYTES = 1 << 20
#: Bytes of rows text parsed at once by `rows_from_large_json`.
JSON_PIECE_BYTES = 1 << 18

_ROWS_HEAD = re.compile(rb'\A\s*\{\s*"rows"\s*:\s*\[')
_ROWS_TAIL = re.compile(rb'\]\s*\}\s*\Z')
_NOT_ROWS_TEXT = re.compile(rb"[^0-9eE+\-.,\[\]\s]")
_PIECE_START = re.compile(rb"\A\s*,")


def rows_from_json(body: bytes | bytearray, n_columns: int = 0, max_rows: int | None = None) -> np.ndarray:
    """A float64 array from ``{"rows": [[...], ...]}``; no rows gives shape (0, n_columns).

    A body over `STREAM_JSON_BYTES` is read by `rows_from_large_json` (memory a few times the body,
    not the 70 times that a Python object per value costs); a smaller one by pydantic, whose errors
    name the row and column. More than ``max_rows`` rows is a 413 on ``rows`` (`service.limits.check_rows`),
    for a large body counted before it is parsed. Cost O(body)."""
    if len(body) > STREAM_JSON_BYTES and _ROWS_HEAD.match(body):
        return rows_from_large_json(body, n_columns, max_rows)
    try:
        payload = ChunkRows.model_validate_json(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":
            raise ApiError(400, "bad_request", f"request body is not valid JSON: {first['msg']}", "body") from None
        loc = first["loc"]
        if not loc or loc[0] != "rows":
            raise ApiError(422, "invalid", 'JSON body must be an object {"rows": [[...], ...]}', "rows") from None
        where = ""
        if len(loc) >= 3:
            where = f" (row {loc[1]}, column {loc[2]})"
        elif len(loc) == 2:
            where = f" (row {loc[1]})"
        raise ApiError(422, "invalid", f"rows: {first['msg']}{where}", "rows") from None
    if max_rows is not None:
        check_rows(len(payload.rows), max_rows)
    return rows_to_array(payload.rows, n_columns)


def rows_from_large_json(body: bytes | bytearray, n_columns: int = 0, max_rows: int | None = None) -> np.ndarray:
    """A float64 array from a large ``{"rows": [[...], ...]}`` body, parsed `JSON_PIECE_BYTES` of rows
    at a time into arrays, so that Python objects exist for one piece only.

    The rows text may hold only numbers, commas, brackets and white space (anything else, such as a
    string, ``true`` or ``null``, is a 400 on ``body`` naming its offset and row); each piece ends at a
    row's closing bracket and must parse as JSON rows of one width (422 on ``rows`` naming the row
    otherwise). Cost O(body) time; memory the float64 result (allocated once, from the count of
    rows) and one piece's text beside the body; the GIL is free between pieces. The rows are counted
    (their opening brackets) before any is parsed: more than ``max_rows`` is a 413 on ``rows`` at once."""
    tail = _ROWS_TAIL.search(body, max(0, len(body) - 4096))
    head = _ROWS_HEAD.match(body)
    if tail is None or head is None:
        raise ApiError(400, "bad_request", 'request body is not valid JSON rows: it must be {"rows": [[...], ...]} '
                       "with nothing after the closing brace", "body")
    begin, end = head.end(), tail.start()
    bad = _NOT_ROWS_TEXT.search(body, begin, end)
    if bad is not None:
        row = max(0, body.count(b"[", begin, bad.start()) - 1)
        shown = body[bad.start():bad.start() + 20].decode("utf-8", "replace")
        raise ApiError(400, "bad_request", f"request body is not valid JSON rows: unexpected {shown!r} at byte "
                       f"{bad.start()} (row {row}); rows hold numbers only", "body")
    total = body.count(b"[", begin, end)  # one bracket per row in text of numbers and brackets
    if max_rows is not None:
        check_rows(total, max_rows)
    out, width, n_rows, position = None, None, 0, begin
    while position < end:
        cut = body.find(b"]", min(position + JSON_PIECE_BYTES, end), end)
        cut = end if cut < 0 else cut + 1
        piece = bytes(memoryview(body)[position:cut])  # bytes, as numpy's text parser wants, from a bytearray too
        if position > begin:
            comma = _PIECE_START.match(piece)
            if comma is None:
                raise ApiError(400, "bad_request", f"request body is not valid JSON rows: a ',' is missing "
                               f"before row {n_rows}", "body")
            piece = piece[comma.end():]
        elif not piece.strip():
            break
        block = _piece_rows(piece, n_rows, width)
        if out is None:
            width = block.shape[1]
            out = np.empty((total, width), dtype=np.float64)  # filled piece by piece: no copy to join
        out[n_rows:n_rows + block.shape[0]] = block
        n_rows += block.shape[0]
        position = cut
    if out is None:
        return np.empty((0, n_columns), dtype=np.float64)
    return out[:n_rows]


_BRACKETS_TO_SPACES = bytes.maketrans(b"[]", b"  ")
_ROW_PATTERNS: dict[int, re.Pattern] = {}


def _rows_pattern(width: int) -> re.Pattern:
    """A regular expression matching rows text of ``width`` values each (``[1,2],[3,4]``, values not
    checked); kept per width."""
    pattern = _ROW_PATTERNS.get(width)
    if pattern is None:
        row = rb"\s*\[[^\[\],]+(?:,[^\[\],]+){%d}\]\s*" % (width - 1)
        pattern = _ROW_PATTERNS[width] = re.compile(rb"(?:%s,)*%s" % (row, row))
    return pattern


def _piece_rows(piece: bytes, first_row: int, width: int | None) -> np.ndarray:
    """One piece of rows text (``[1,2],[3,4]``, numbers, commas, brackets and white space only), its
    first row being row ``first_row`` of the body, as a 2-D float64 array of ``width`` columns (None:
    its first row's). The shape is checked with a regular expression, the values read by numpy
    (``strtod``: no Python object per value, no garbage collection). 422 on ``rows`` (ragged, nested,
    empty rows) or 400 on ``body`` (not numbers) naming the row. Cost O(piece)."""
    if width is None:
        start = piece.find(b"[")
        end = piece.find(b"]", start)
        first = piece[start + 1:end] if 0 <= start < end else b""
        if b"[" in first:
            raise ApiError(422, "invalid", f"rows: row {first_row} is not a list of numbers (a nested list)", "rows")
        if not first.strip():
            raise ApiError(422, "invalid", f"rows: row {first_row} is empty", "rows")
        width = first.count(b",") + 1
    pattern = _rows_pattern(width)
    if pattern.fullmatch(piece) is None:
        raise _bad_row(piece, first_row, width)
    n_rows = piece.count(b"[")
    try:  # a value strtod stops in: numpy warns (an error where warnings are errors) and stops there
        values = np.fromstring(piece.translate(_BRACKETS_TO_SPACES), dtype=np.float64, sep=",")
    except (ValueError, DeprecationWarning):
        values = np.empty(0)
    if values.size != n_rows * width:
        raise ApiError(400, "bad_request", f"request body is not valid JSON rows: a value from row {first_row} on "
                       "is not a number", "body")
    return values.reshape(n_rows, width)


def _bad_row(piece: bytes, first_row: int, width: int) -> ApiError:
    """The error of the first row of ``piece`` that does not hold ``width`` values: ragged or nested
    (422 on ``rows``) or not JSON (400 on ``body``)."""
    good = re.match(rb"(?:%s,)*" % _rows_pattern(width).pattern.split(b",)*", 1)[0][3:], piece)
    offset = good.end() if good else 0
    row = first_row + piece.count(b"[", 0, offset)
    start = piece.find(b"[", offset)
    end = piece.find(b"]", start + 1)
    inner = piece[start + 1:end] if 0 <= start < end else b""
    if start >= 0 and b"[" in inner:
        return ApiError(422, "invalid", f"rows: row {row} is not a list of numbers (a nested list)", "rows")
    if start >= 0 and end > start:
        count = 0 if not inner.strip() else inner.count(b",") + 1
        if count != width:
            return ApiError(422, "invalid", f"rows are ragged: row 0 has {width} values, row {row} has {count}", "rows")
    return ApiError(400, "bad_request", f"request body is not valid JSON rows: row {row} is malformed", "body")


def rows_to_array(rows: list[list[float]], n_columns: int = 0) -> np.ndarray:
    """A 2-D float64 array from a list of rows (or the 2-D array of ``.npy`` rows, `NpyRowsRequest`);
    ragged rows are a 422 on ``rows``."""
    if isinstance(rows, np.ndarray):  # .npy rows (`NpyRowsRequest`): 2-D already
        return rows.astype(np.float64, copy=False)
    if not rows:
        return np.empty((0, n_columns), dtype=np.float64)
    width = len(rows[0])
    for i, row in enumerate(rows):
        if len(row) != width:
            raise ApiError(
                422, "invalid", f"rows are ragged: row 0 has {width} values, row {i} has {len(row)}", "rows"
            )
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), width)
