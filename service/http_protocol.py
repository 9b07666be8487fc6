"""The HTTP protocol ``python -m service`` runs: uvicorn's httptools protocol with ``GET /healthz``
answered first (`service.health_protocol`), and two guards of its connections (issue 52):

* **Headers in time.** A request's headers must have arrived ``header_timeout_s`` after the connection
  was made (for its first request) or after the request's first byte (for the next ones on a kept-alive
  connection; between requests uvicorn's ``timeout_keep_alive``, 5 s, closes an idle one). Past it the
  connection is closed, with a ``408`` when part of a request came. uvicorn has no such timeout: a client
  sending its headers a byte at a time held its connection for ever. (The body's own timeout is an ASGI
  matter, `service.limits.BodyLimitMiddleware`.)
* **No draining after an early answer.** An answer sent before the request's body has all arrived (a 413
  over a limit, a 404 before the body is read, a 408) ends the connection, unless what is left of the body
  is declared and small (at most `DRAIN_BYTES`: the ``{}`` of a ``POST .../cancel`` whose second packet
  comes after the answer), which is read and dropped as before, the connection kept. Ending it: the
  answer is sent, then the end of the stream (``write_eof``), and the connection is closed once the
  client has sent `LINGER_BYTES` more or `LINGER_S` seconds have passed, whichever comes first. uvicorn
  instead read and discarded the rest of any body to reach the next request, for ever with a chunked body
  (10-20 GiB in 25 s). The short linger (as nginx's ``lingering_close``) lets the answer reach a client
  still sending: a socket closed with unread data is reset, and a reset can destroy an answer not yet
  delivered. Such answers say ``Connection: close`` (`service.limits.BodyLimitMiddleware` adds it), so
  that a client does not send its next request on the connection.

The timeouts come from the app (`service.app.lifespan` hands them over as the lifespan state
``http_guards``, `Guards`); without it the defaults of `service.settings.Settings` apply.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import cast

from service.health_protocol import HealthFirstProtocol

#: what ``http=`` takes: uvicorn imports the class by this name in each API process
HTTP_PROTOCOL = "service.http_protocol:GuardedProtocol"
#: the lifespan state's key of the guards' settings (`Guards`)
STATE_KEY = "http_guards"
#: after an early answer: at most this many more bytes read (and discarded), and for at most this long
LINGER_BYTES = 1 << 18
LINGER_S = 2.0
#: what is left of a body with a declared length, at most, that an early answer still reads and drops (the
#: connection kept); more, or a chunked body, ends the connection
DRAIN_BYTES = 1 << 16
_TIMEOUT_BODY = (b'{"error":{"code":"timeout","message":"the request\'s headers did not arrive in time '
                 b'(KPCA_HEADER_TIMEOUT_S)","field":null}}')
#: what a connection whose request's headers came too late is sent before it is closed
TIMEOUT_ANSWER = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
                  b"content-length: %d\r\n\r\n" % len(_TIMEOUT_BODY)) + _TIMEOUT_BODY


@dataclass(frozen=True)
class Guards:
    """The settings of the connection guards (`service.settings.Settings.header_timeout_s`)."""

    header_timeout_s: float = 10.0


class GuardedProtocol(HealthFirstProtocol):
    """`HealthFirstProtocol` whose connections are guarded (module docstring): headers within
    ``header_timeout_s``, no draining after an answer given before the body arrived. O(1) per event."""

    _header_timer = None
    _lingering = False
    _linger_left = 0
    _linger_timer = None
    _declared: int | None = 0  # the request's body length as declared (None: chunked), and its bytes seen
    _seen = 0

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._arm_header_timer()

    def connection_lost(self, exc) -> None:
        self._cancel_timers()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._lingering:  # after an early answer: discard, and close once the linger is spent
            self._linger_left -= len(data)
            if self._linger_left <= 0:
                self.transport.close()
            return
        super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm_header_timer()

    def on_headers_complete(self) -> None:
        self._cancel_header_timer()
        self._declared, self._seen = body_length(self.headers), 0
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.transport is self.transport:  # a new request's cycle
            # cast: the proxy forwards every attribute to the transport (`_CycleTransport.__getattr__`)
            cycle.transport = cast(asyncio.Transport, _CycleTransport(self, cycle))

    def on_body(self, body: bytes) -> None:
        self._seen += len(body)
        super().on_body(body)

    def on_response_complete(self) -> None:
        cycle = self.cycle
        if self._lingering or (cycle is not None and cycle.more_body and not self.transport.is_closing()
                               and not self._small_rest()):
            self.server_state.total_requests += 1  # answered before its body arrived: end, don't drain
            self._linger()
            return
        super().on_response_complete()

    def _small_rest(self) -> bool:
        """Whether what is left of the request's body is declared and at most `DRAIN_BYTES`."""
        return self._declared is not None and self._declared - self._seen <= DRAIN_BYTES

    # --------------------------------------------------------------- guards
    def _guards(self) -> Guards:
        return self.app_state.get(STATE_KEY) or Guards()

    def _arm_header_timer(self) -> None:
        if self._header_timer is None and not self._lingering:
            self._header_timer = self.loop.call_later(self._guards().header_timeout_s, self._headers_late)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _cancel_timers(self) -> None:
        self._cancel_header_timer()
        if self._linger_timer is not None:
            self._linger_timer.cancel()
            self._linger_timer = None

    def _headers_late(self) -> None:
        """The headers' time is up: close, answering 408 if a request had begun."""
        self._header_timer = None
        if self.transport.is_closing():
            return
        if self.headers is not None and self.parser is not None:  # part of a request came
            self.transport.write(TIMEOUT_ANSWER)
        self.transport.close()

    def _linger(self) -> None:
        """End the connection after an early answer (module docstring); once."""
        if self._lingering:
            return
        self._lingering = True
        self._cancel_header_timer()
        self._unset_keepalive_if_required()
        self.flow.resume_reading()  # read on (and discard) so that a client still sending gets the answer
        self._linger_left = LINGER_BYTES
        self._linger_timer = self.loop.call_later(LINGER_S, self.transport.close)
        if self.transport.can_write_eof():
            self.transport.write_eof()


def body_length(headers) -> int | None:
    """The body length a request's ``headers`` (lower-case name, value pairs of bytes) declare: its
    ``Content-Length``, 0 without one, None for a chunked body (or a length that is not a number). O(headers)."""
    length: int | None = 0
    for name, value in headers or ():
        if name == b"transfer-encoding":
            return None
        if name == b"content-length":
            length = int(value) if value.strip().isdigit() else None
    return length


class _CycleTransport:
    """The transport as one request's cycle sees it: the same but for `close`, which, while the request's
    body is still arriving (an answer with ``Connection: close`` sent before it, `BodyLimitMiddleware`),
    ends the connection as `GuardedProtocol._linger` does instead of closing it at once."""

    def __init__(self, protocol: GuardedProtocol, cycle):
        self._protocol, self._cycle, self._transport = protocol, cycle, protocol.transport

    def __getattr__(self, name: str):
        return getattr(self._transport, name)

    def close(self) -> None:
        """Close, or linger first if the request's body is still arriving. O(1)."""
        if self._cycle.more_body and not self._transport.is_closing():
            self._protocol._linger()
        else:
            self._transport.close()
