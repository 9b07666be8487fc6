"""Decoding of row payloads (chunk uploads, projection requests) into arrays.

Only parsing and shape checks live here; the store validates the contents
(columns, finiteness, emptiness) against the data set.
"""

from __future__ import annotations

import io
import math

import numpy as np
from pydantic import ValidationError
from starlette.requests import Request

from service.errors import ApiError
from service.schemas.datasets import ChunkRows

NPY_MEDIA_TYPE = "application/octet-stream"
JSON_MEDIA_TYPE = "application/json"


def media_type(request: Request) -> str:
    """The request's media type without parameters, lower case (``""`` if absent)."""
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()


async def read_body(request: Request) -> bytes:
    """The whole request body (its size is bounded by `service.limits.BodyLimitMiddleware`)."""
    parts = [part async for part in request.stream()]
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
