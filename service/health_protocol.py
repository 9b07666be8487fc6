"""uvicorn's HTTP protocol with ``GET /healthz`` answered as the request arrives (issue 30).

Under load an API process's event loop runs, after each batch of arriving bytes, the steps of every
request in flight (middleware, routing, hand-overs to the thread pool, answers): ``/healthz`` as a route
waited behind all of them, so its answer time was the process's queue, not whether the loop turns.
`HealthFirstProtocol` answers ``GET /healthz`` in the parser's callback of the bytes that complete it,
on the event loop, before the loop runs the queued steps (HAProxy's ``monitor-uri`` idea): a loop that
stalls still delays it, a long queue no longer does. It writes what the app's route writes (status,
``content-type``, ``content-length``, the body; uvicorn's ``date`` and ``server``), keeps the connection
as the app would (HTTP/1.0 or ``Connection: close`` close it) and never answers out of turn: a request
pipelined behind one still in flight, or one with a body, goes to the app as before. Such answers are
neither in the access log nor in the request metrics (``kpca_http_*``). Every other request is the
parent's, unchanged.

``python -m service`` runs it as the base of `service.http_protocol.GuardedProtocol` (``uvicorn.run(...,
http=service.http_protocol.HTTP_PROTOCOL)``). Needs httptools (a dependency). What it uses of uvicorn's
protocol is listed, and checked, in `service.uvicorn_internals`.
"""

from __future__ import annotations

import httptools

from service.uvicorn_internals import STATUS_LINE, HttpToolsProtocol  # uvicorn's internals, in one place

HEALTH_PATH = b"/healthz"
#: the body of `service.routes.health.healthz` as FastAPI serialises it
HEALTH_BODY = b'{"status":"ok"}'


class HealthFirstProtocol(HttpToolsProtocol):
    """`HttpToolsProtocol` that answers ``GET /healthz`` without a body itself, in turn (module). O(1)."""

    _health_keep_alive: bool | None = None  # set between a /healthz's headers and its end: answer it then

    def on_headers_complete(self) -> None:
        if self._is_health_request():
            self._health_keep_alive = (self.parser.get_http_version() != "1.0"
                                       and self.parser.should_keep_alive())
            return
        self._health_keep_alive = None
        super().on_headers_complete()

    def _is_health_request(self) -> bool:
        """``GET /healthz`` (any query), no body announced, nothing of this connection's still in flight."""
        if self.parser.get_method() != b"GET" or self.parser.should_upgrade():
            return False
        if self.cycle is not None and not self.cycle.response_complete or self.pipeline:
            return False
        if any(name in (b"content-length", b"transfer-encoding") for name, _ in self.headers):
            return False
        try:
            return httptools.parse_url(self.url).path == HEALTH_PATH
        except httptools.HttpParserInvalidURLError:
            return False

    def on_message_complete(self) -> None:
        keep_alive = self._health_keep_alive
        if keep_alive is None:
            super().on_message_complete()
            return
        self._health_keep_alive = None
        head = [STATUS_LINE[200]]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head.append(b"content-length: %d\r\ncontent-type: application/json\r\n" % len(HEALTH_BODY))
        if not keep_alive:
            head.append(b"connection: close\r\n")
        self.transport.write(b"".join(head) + b"\r\n" + HEALTH_BODY)
        if keep_alive:
            self.on_response_complete()  # counts it, resumes reading, arms the keep-alive timeout
        else:
            self.server_state.total_requests += 1
            self.transport.close()
