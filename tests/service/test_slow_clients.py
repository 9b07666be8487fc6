"""Slow clients are timed out (issue 52, item 6): 400 sockets sending their headers a byte at a time were
never closed. Headers must arrive within ``header_timeout_s`` (`service.http_protocol`), a body within
``body_timeout_s`` plus a second per ``body_min_bytes_per_s`` bytes of the route's waiting for it
(`service.limits.BodyLimitMiddleware`); then the connection is closed, with a 408. Each test waits for
the close (a generous deadline that only a server that never closes reaches)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tests.api_checks import upload_rows
from tests.service.raw_http import connect

SERVER_SETTINGS = {"header_timeout_s": 1.0, "body_timeout_s": 1.0, "body_min_bytes_per_s": 1024}
DEADLINE_S = 90.0  # far beyond the timeouts: reached only by a connection never closed
TRICKLE_S = 0.1


def trickle(sock: socket.socket, data: bytes, stop: threading.Event) -> None:
    """Send ``data`` a byte every `TRICKLE_S` seconds until it is sent, ``stop`` is set or the socket fails."""
    for byte in data:
        if stop.wait(TRICKLE_S):
            return
        try:
            sock.send(bytes([byte]))
        except OSError:
            return


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a timeout fails the test)."""
    got = bytearray()
    while True:
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            return bytes(got)
        except TimeoutError:
            pytest.fail(f"the connection was still open after {DEADLINE_S} s; received {bytes(got)[:200]!r}")
        if not data:
            return bytes(got)
        got.extend(data)


def test_headers_sent_a_byte_at_a_time_are_timed_out(server):
    head = b"GET /v1/datasets HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Slow: " + b"a" * 10_000 + b"\r\n\r\n"
    stop = threading.Event()
    sockets = [connect(server, DEADLINE_S) for _ in range(20)]
    senders = [threading.Thread(target=trickle, args=(s, head, stop), daemon=True) for s in sockets]
    for sender in senders:
        sender.start()
    try:
        for sock in sockets:
            answer = read_until_closed(sock)
            assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
            assert b'"code":"timeout"' in answer
    finally:
        stop.set()
        for sock in sockets:
            sock.close()


def test_a_connection_that_sends_nothing_is_closed(server):
    sock = connect(server, DEADLINE_S)
    try:
        assert read_until_closed(sock) == b""
    finally:
        sock.close()


@pytest.mark.parametrize("framing", ["Content-Length: 100000", "Transfer-Encoding: chunked"])
def test_a_body_sent_a_byte_at_a_time_is_timed_out(api, server, framing):
    upload_rows(api, f"slow-{len(framing)}", [[1.0, 2.0]], commit=False)
    sock = connect(server, DEADLINE_S)
    stop = threading.Event()
    head = (f"PUT /v1/datasets/slow-{len(framing)}/chunks/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: text/csv\r\n{framing}\r\n\r\n").encode()
    sock.sendall(head + (b"186a0\r\n" if "chunked" in framing else b""))
    sender = threading.Thread(target=trickle, args=(sock, b"1,2\n" * 25_000, stop), daemon=True)
    started = time.monotonic()
    sender.start()
    try:
        answer = read_until_closed(sock)
    finally:
        stop.set()
        sock.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer[:300]
    assert b'"field":"body"' in answer and b"KPCA_BODY_TIMEOUT_S" in answer
    assert b"connection: close" in answer.lower()
    assert time.monotonic() - started < DEADLINE_S


def test_a_prompt_client_is_served_as_before(api):
    assert api.get("/v1/datasets").status_code == 200
    upload_rows(api, "prompt", [[1.0, 2.0], [3.0, 4.0]])
    assert api.get("/v1/datasets/prompt").json()["status"] == "ready"
