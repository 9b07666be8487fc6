"""The one place the service leans on starlette's internals: the cache of a request's body.

`service.payloads.ThreadParsedRequest.body` reads a body once into one buffer (`service.payloads.read_body`,
sized from its ``Content-Length``) and keeps it where starlette's ``Request`` keeps the body it read, the
attribute ``_body``: ``Request.body()`` returns it and ``Request.stream()`` replays it instead of reading the
connection again, which FastAPI's handler and starlette's form parser rely on. starlette has no public way to
give a request a body read by other means. What is used of it (`ATTRIBUTES`) is asserted on the installed
starlette by ``tests/service/test_framework_internals.py``, and pyproject.toml pins starlette to the checked
range (below the minor after the last version in `CHECKED_ON`), held there by the same test.

Checked on starlette 0.46.0, the lower bound in pyproject.toml, by reading its source (``Request.stream``
yields ``self._body`` when the request has one; ``Request.body`` sets and returns it), and on 1.10.0,
installed, by the test suite.
"""

from __future__ import annotations

from starlette.requests import Request

__all__ = ["ATTRIBUTES", "CHECKED_ON", "cached_body", "cache_body"]

#: the starlette versions this was checked on (module docstring)
CHECKED_ON = ("0.46.0", "1.10.0")
ATTRIBUTES = ("_body",)


def cached_body(request: Request) -> bytes | bytearray | None:
    """The body ``request`` has read (starlette's cache of it), or None before it was read. O(1)."""
    return getattr(request, "_body", None)


def cache_body(request: Request, body: bytes | bytearray) -> None:
    """Give ``request`` its body, read by other means: ``request.body()`` returns it and ``request.stream()``
    replays it. A bytearray is kept as it is (every reader takes it as bytes; a copy would hold it twice). O(1)."""
    request._body = body  # type: ignore[assignment]  # starlette declares bytes; a bytearray reads the same
