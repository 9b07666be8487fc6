"""Raw HTTP over a socket, for the tests of what a well-behaved client never does: floods a body past its
answer (`flood`), and talks to the server byte by byte (the slow-client tests)."""

from __future__ import annotations

import socket
import threading

PIECE = 1 << 16


def connect(server: str, timeout: float = 120.0) -> socket.socket:
    """A TCP connection to the server at base URL ``server`` (``http://host:port``)."""
    host, port = server.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=timeout)


def flood(server: str, head: bytes, cap: int, chunked: bool = True) -> tuple[bytes, int, int]:
    """Send ``head`` and then body bytes (chunks of `PIECE` zeros if ``chunked``) until ``cap`` bytes or
    until the server closes, reading its answer in a thread: ``(answer, bytes sent in all, bytes sent
    after the answer began to arrive)``."""
    sock = connect(server)
    answer, answered = bytearray(), threading.Event()

    def read() -> None:
        while True:
            try:
                data = sock.recv(PIECE)
            except OSError:
                break
            if not data:
                break
            answer.extend(data)
            if b"\r\n\r\n" in answer:
                answered.set()
        answered.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    payload = bytes(PIECE)
    piece = (b"%x\r\n" % PIECE + payload + b"\r\n") if chunked else payload
    sent = after = 0
    try:
        sock.sendall(head)
        while sent < cap:
            sock.sendall(piece)
            sent += len(piece)
            if answered.is_set():
                after += len(piece)
    except OSError:  # the server closed the connection
        pass
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    reader.join(timeout=60)
    sock.close()
    return bytes(answer), sent, after


def request_head(method: str, path: str, content_type: str, framing: str) -> bytes:
    """The head of a request with ``framing`` (``Transfer-Encoding: chunked`` or ``Content-Length: n``)."""
    return (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\n{framing}\r\n"
            "\r\n").encode()
