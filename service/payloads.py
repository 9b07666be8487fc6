"""Decoding of row payloads (chunk uploads, projection requests) into arrays.

Only parsing and shape checks live here; the store validates the contents
(columns, finiteness, emptiness) against the data set.
"""

from __future__ import annotations

import array
import csv
import io
import math

import numpy as np
from pydantic import ValidationError
from starlette.requests import ClientDisconnect, Request

from service.errors import ApiError
from service.schemas.datasets import ChunkRows

NPY_MEDIA_TYPE = "application/octet-stream"
JSON_MEDIA_TYPE = "application/json"
CSV_MEDIA_TYPE = "text/csv"


def media_type(request: Request) -> str:
    """The request's media type without parameters, lower case (``""`` if absent)."""
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()


async def read_body(request: Request) -> bytes:
    """The whole request body (its size is bounded by `service.limits.BodyLimitMiddleware`).

    A client that disconnects mid-body gets (nobody reads it) a 400 on
    ``body`` instead of an "unhandled error" in the log; nothing is stored.
    """
    try:
        parts = [part async for part in request.stream()]
    except ClientDisconnect:
        raise ApiError(
            400, "bad_request", "the client disconnected before the whole body arrived", "body"
        ) from None
    return b"".join(parts)


def rows_from_npy(body: bytes) -> np.ndarray:
    """A numeric array from ``.npy`` bytes; never unpickles.

    The header is read first, and its declared shape must account for exactly
    the bytes that follow, so a forged header cannot make us allocate more
    than the (size-limited) body.
    """
    stream = io.BytesIO(body)
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
        else:
            raise ValueError(f"unsupported .npy format version {version[0]}.{version[1]}")
    except Exception as exc:  # ValueError, EOFError, SyntaxError... all mean "not a .npy file"
        raise ApiError(400, "bad_request", f"request body is not a readable .npy array: {exc}", "body") from None
    if dtype.kind not in "biuf" or dtype.fields is not None or dtype.subdtype is not None:
        raise ApiError(422, "invalid", f"rows must be numeric; the .npy array has dtype {dtype}", "rows")
    expected = math.prod(shape) * dtype.itemsize
    available = len(body) - stream.tell()
    if expected != available:
        raise ApiError(
            400,
            "bad_request",
            f"request body is not a readable .npy array: the header declares shape {shape} "
            f"({expected} bytes of data) but {available} bytes follow it",
            "body",
        )
    try:
        return np.load(io.BytesIO(body), allow_pickle=False)
    except Exception as exc:
        raise ApiError(400, "bad_request", f"request body is not a readable .npy array: {exc}", "body") from None


def rows_from_json(body: bytes, n_columns: int = 0) -> np.ndarray:
    """A float64 array from ``{"rows": [[...], ...]}``; no rows gives shape (0, n_columns)."""
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
    return rows_to_array(payload.rows, n_columns)


def rows_to_array(rows: list[list[float]], n_columns: int = 0) -> np.ndarray:
    """A 2-D float64 array from a list of rows; ragged rows are a 422 on ``rows``."""
    if not rows:
        return np.empty((0, n_columns), dtype=np.float64)
    width = len(rows[0])
    for i, row in enumerate(rows):
        if len(row) != width:
            raise ApiError(
                422, "invalid", f"rows are ragged: row 0 has {width} values, row {i} has {len(row)}", "rows"
            )
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), width)


def _is_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def rows_from_csv(body: bytes, n_columns: int = 0) -> np.ndarray:
    """A float64 array from CSV text: one row per line, values separated by commas.

    Format: UTF-8 (a byte-order mark is allowed), lines ending in ``\n`` or
    ``\r\n``, fields optionally double-quoted. Lines that are empty or hold
    only whitespace are ignored. The first other line is a header, and
    skipped, if none of its fields is a number (``x1,x2,x3``, or pandas'
    ``,x1,x2``); a first line with some numbers is data, so a typo in the
    first row is reported instead of being dropped as a header. Values are
    parsed with Python's ``float`` (surrounding spaces allowed; ``nan`` and
    ``inf`` parse, and the store then refuses the row holding them).

    Parameters
    ----------
    body : bytes
        The request body.
    n_columns : int
        Columns of the empty array returned when there are no data lines.

    Returns
    -------
    ndarray of shape (n_rows, n_values_per_line), float64

    Raises
    ------
    ApiError
        400 on ``"body"``: not UTF-8, malformed quoting, or a field that is
        not a number (naming its line, counting from 1 over the whole body
        including header and blank lines, its column and the field). 422 on
        ``"rows"``: lines with different numbers of values (naming the line).

    Notes
    -----
    Cost O(body) time; memory 8 bytes per value (one flat float64 buffer)
    plus the decoded text.
    """
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ApiError(
            400, "bad_request", f"CSV body is not UTF-8 text (invalid byte at offset {exc.start})", "body"
        ) from None
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    values = array.array("d")
    width = first_line = None
    header_checked = False
    try:
        for fields in reader:
            line = reader.line_num
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue  # blank line
            if not header_checked:
                header_checked = True
                if not any(_is_number(field) for field in fields):
                    continue  # a header: no field of the first line is a number
            if width is None:
                width, first_line = len(fields), line
            elif len(fields) != width:
                raise ApiError(
                    422,
                    "invalid",
                    f"CSV rows are ragged: line {line} has {len(fields)} values, "
                    f"line {first_line} (the first row) has {width}",
                    "rows",
                )
            try:
                values.extend(map(float, fields))
            except ValueError:
                column, bad = next((j, f) for j, f in enumerate(fields) if not _is_number(f))
                shown = bad if len(bad) <= 40 else bad[:40] + "..."
                raise ApiError(
                    400, "bad_request", f"CSV line {line}, column {column + 1}: {shown!r} is not a number", "body"
                ) from None
    except csv.Error as exc:
        raise ApiError(400, "bad_request", f"CSV line {reader.line_num} is malformed: {exc}", "body") from None
    if width is None:
        return np.empty((0, n_columns), dtype=np.float64)
    return np.frombuffer(values, dtype=np.float64).reshape(-1, width)
