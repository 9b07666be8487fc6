"""Request body size limit, enforced before any route sees the body.

Two checks, so that neither a lying nor an absent ``Content-Length`` gets
past: a declared length over the limit is refused before the route runs (the
body is never read into memory), and the bytes actually received are counted
while the route reads the stream; crossing the limit raises `BodyTooLarge`
(a 413 `ApiError`) from ``receive``, which FastAPI's body reader and our own
chunk reader let through to the error handlers.

The unread rest of a refused body is left to uvicorn, which discards it to
reach the next request on the connection. (Answering with ``Connection:
close`` instead would close the socket with unread data, and the kernel's
reset could reach the client before the 413 does.)
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.errors import ApiError, error_response


class BodyTooLarge(ApiError):
    def __init__(self, limit: int):
        super().__init__(
            413,
            "too_large",
            f"request body is larger than the limit of {limit} bytes; send the data in smaller chunks",
            "body",
        )


class BodyLimitMiddleware:
    """Refuse request bodies over ``max_body_bytes`` with 413."""

    def __init__(self, app: ASGIApp, max_body_bytes: int):
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        limit = self.max_body_bytes
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > limit:
            error = BodyTooLarge(limit)
            response = error_response(error.status_code, error.code, error.message, error.field)
            await response(scope, receive, send)
            return

        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        await self.app(scope, counting_receive, send)
