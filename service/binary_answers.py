"""Binary bodies of a declared type (a PNG, a tar) that may also travel as ``application/octet-stream``.

Client generators read few media types: openapi-python-client types a body or an answer only as JSON, text or
``application/octet-stream`` (issue 58, item 10). So a route whose body is a PNG or a tar also accepts the same
bytes sent as ``application/octet-stream``, and one that answers such bytes declares both types and answers
``application/octet-stream`` to a client whose ``Accept`` names it and not the specific type (`answer_media_type`);
the bytes are the same either way.
"""

from __future__ import annotations

from starlette.requests import Request

BYTES_MEDIA_TYPE = "application/octet-stream"
_BINARY = {"schema": {"type": "string", "format": "binary"}}


def binary_content(media_type: str) -> dict:
    """The OpenAPI ``content`` of a body or answer of ``media_type`` bytes, also sent as octet-stream. O(1)."""
    return {media_type: _BINARY, BYTES_MEDIA_TYPE: _BINARY}


def answer_media_type(request: Request, media_type: str) -> str:
    """``media_type``, or `BYTES_MEDIA_TYPE` where the request's ``Accept`` names octet-stream and neither
    ``media_type`` nor a wildcard of it. O(len(Accept))."""
    accept = request.headers.get("accept", "").lower()
    family = media_type.split("/", 1)[0] + "/*"
    if BYTES_MEDIA_TYPE in accept and media_type not in accept and family not in accept:
        return BYTES_MEDIA_TYPE
    return media_type
