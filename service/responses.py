"""Serving answers of many rows: JSON sent as a stream (issue 30, item 2), or ``.npy`` bytes.

The JSON text of a large answer is made a block of rows at a time in a worker thread while it is sent,
so the API process never holds the array, its Python lists and its whole JSON text at once, and the
event loop never encodes it. A client that asks for ``application/octet-stream`` (``Accept``, or
``format=npy``) gets the rows as one ``.npy`` file instead: no text at all, the float64 values bit for
bit, and the answer's other fields in headers (`rows_answer`).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Annotated, Any, Literal, TypeVar

import numpy as np
from fastapi import Query, Request, Response
from fastapi.responses import StreamingResponse
from numpy.lib import format as npy_format
from pydantic import BaseModel, TypeAdapter

from service.payloads import FIELDS_HEADER, JSON_MEDIA_TYPE, NPY_MEDIA_TYPE

#: the answer model of a serving route (`rows_answer`)
M = TypeVar("M", bound=BaseModel)

#: The ``format`` query parameter of the routes that can answer rows as ``.npy``.
Format = Annotated[Literal["npy", "json"] | None, Query(
    description="npy (.npy bytes) or json; default from Accept (application/octet-stream: npy), else json")]

#: OpenAPI of a 200 that may be ``.npy`` bytes.
NPY_CONTENT: dict[str, Any] = {"content": {NPY_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}}}

#: Bytes of an ``.npy`` answer sent at once (`npy_stream`).
NPY_BLOCK_BYTES = 1 << 20

#: Values encoded at once by `json_rows_stream` (a block is about 20 bytes a value of JSON text).
STREAM_BLOCK_VALUES = 1 << 14

_ROWS = TypeAdapter(list[list[float]])


def wants_npy(request: Request, format: str | None = None) -> bool:
    """Whether the client asked for ``.npy`` bytes: ``format=npy``, or (without ``format``) an ``Accept``
    naming ``application/octet-stream`` and not ``application/json``."""
    if format is not None:
        return format == "npy"
    accept = request.headers.get("accept", "").lower()
    return NPY_MEDIA_TYPE in accept and JSON_MEDIA_TYPE not in accept


def rows_answer(model: type[M], field: str, values, stream_above: int, npy: bool = False,
                **other) -> M | Response:
    """The answer ``model(field=values, **other)`` of a serving route: the model itself (FastAPI encodes
    it) when ``values`` holds at most ``stream_above`` numbers (``stream_response_values``), else a
    chunked `StreamingResponse` of the same bytes (`json_rows_stream`). With ``npy`` (`wants_npy`) the
    values as ``.npy`` bytes (float64, `npy_answer`), the answer's other fields as JSON in the header
    ``X-KPCA-Fields``. Cost O(values) either way; the streamed JSON answer holds one block of Python
    objects and text at a time."""
    values = np.asarray(values, dtype=np.float64)
    if npy:
        fields = model(**{field: []}, **other).model_dump(mode="json", by_alias=True, exclude={field})
        return npy_answer(values, {FIELDS_HEADER: json.dumps(fields, separators=(",", ":"))} if fields else None)
    if values.size <= stream_above or values.ndim != 2:
        return model(**{field: values.tolist()}, **other)
    return StreamingResponse(json_rows_stream(model, field, values, other), media_type=JSON_MEDIA_TYPE)


def json_rows_stream(model: type[BaseModel], field: str, values: np.ndarray, other: dict | None = None,
                     block_values: int = STREAM_BLOCK_VALUES) -> Iterator[bytes]:
    """The bytes of ``model(field=values, **other)`` as FastAPI sends it (pydantic's JSON, by alias),
    in pieces: the text before the rows, then the rows ``block_values`` numbers at a time (each block
    encoded by pydantic, so numbers are written as in the whole answer), then the rest. ``field`` must
    be the model's first field (its rows). Cost O(values) time; memory one block's Python floats and
    text beside ``values``."""
    empty = model(**{field: []}, **(other or {})).model_dump_json(by_alias=True).encode()
    head = b'{"' + field.encode() + b'":['
    if not empty.startswith(head + b"]"):
        raise ValueError(f"{model.__name__}: {field!r} is not its first field")
    yield head
    per_block = max(1, block_values // max(1, values.shape[1]))
    for start in range(0, len(values), per_block):
        text = _ROWS.dump_json(values[start:start + per_block].tolist())[1:-1]
        yield b"," + text if start else text
    yield empty[len(head):]


def npy_answer(values: np.ndarray, headers: dict | None = None) -> Response:
    """``values`` as one ``.npy`` file (C order, no pickles) with its ``Content-Length``: a plain
    `Response` up to `NPY_BLOCK_BYTES`, else streamed (`npy_stream`) from the array itself, without a
    copy of its bytes. Cost O(values)."""
    values = np.ascontiguousarray(values)
    header = npy_header(values.dtype, values.shape)
    headers = {**(headers or {}), "Content-Length": str(len(header) + values.nbytes)}
    if values.nbytes <= NPY_BLOCK_BYTES:
        return Response(header + values.tobytes(), media_type=NPY_MEDIA_TYPE, headers=headers)
    return StreamingResponse(npy_stream(header, values), media_type=NPY_MEDIA_TYPE, headers=headers)


def npy_header(dtype, shape: tuple[int, ...]) -> bytes:
    """The ``.npy`` header (format 1.0, C order) of an array of ``dtype`` and ``shape``, as numpy writes
    it. O(1)."""
    buffer = io.BytesIO()
    npy_format.write_array_header_1_0(buffer, {"descr": npy_format.dtype_to_descr(np.dtype(dtype)),
                                               "fortran_order": False, "shape": tuple(int(n) for n in shape)})
    return buffer.getvalue()


def npy_stream(header: bytes, values: np.ndarray, block_bytes: int = NPY_BLOCK_BYTES) -> Iterator[bytes]:
    """``header`` then the bytes of the C-contiguous ``values`` in pieces of about ``block_bytes``."""
    yield header
    data = values.reshape(-1).data.cast("B")  # ndarray.data: the memoryview of its buffer
    for start in range(0, len(data), block_bytes):
        yield bytes(data[start:start + block_bytes])

