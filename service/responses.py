"""Serving answers of many rows sent as a stream (issue 30, item 2): the JSON text is made a block of
rows at a time in a worker thread while it is sent, so the API process never holds the array, its
Python lists and its whole JSON text at once, and the event loop never encodes it."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, TypeAdapter

from service.payloads import JSON_MEDIA_TYPE

#: Values encoded at once by `json_rows_stream` (a block is about 20 bytes a value of JSON text).
STREAM_BLOCK_VALUES = 1 << 14

_ROWS = TypeAdapter(list[list[float]])


def rows_answer(model: type[BaseModel], field: str, values, stream_above: int, **other) -> BaseModel | StreamingResponse:
    """The answer ``model(field=values, **other)`` of a serving route: the model itself (FastAPI encodes
    it) when ``values`` holds at most ``stream_above`` numbers (``stream_response_values``), else a
    chunked `StreamingResponse` of the same bytes (`json_rows_stream`). Cost O(values) either way; the
    streamed answer holds one block of Python objects and text at a time."""
    values = np.asarray(values, dtype=np.float64)
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
