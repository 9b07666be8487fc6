"""An answer given before the request's body has arrived closes the connection (issue 52, item 3): a chunked
``PUT .../chunks/N`` got its 413 (or its 404) and the server went on reading the same socket, 10-20 GiB in
25 s. Each test floods a raw socket with a body of up to `CAP` bytes, reading the answer meanwhile: the
answer comes, and the server then closes the connection long before the flood ends."""

from __future__ import annotations

import pytest

from tests.api_checks import upload_rows
from tests.service.raw_http import connect, flood, request_head

LIMIT = 1 << 20
SERVER_SETTINGS = {"max_body_bytes": LIMIT}
CAP = 256 << 20  # what the flood sends at most; a server that drains takes it all
AFTER_MAX = 64 << 20  # what it may take after its answer: socket buffers and a bounded linger, not the flood


@pytest.fixture(scope="module")
def dataset(api) -> str:
    upload_rows(api, "target", [[1.0, 2.0], [3.0, 4.0]], commit=False)
    return "target"


@pytest.mark.parametrize("case", ["413 chunked", "404 chunked", "413 declared"])
def test_an_early_answer_closes_the_connection_instead_of_draining_the_body(server, dataset, case):
    status, how = case.split()
    path = f"/v1/datasets/{'target' if status == '413' else 'missing'}/chunks/5"
    framing = "Transfer-Encoding: chunked" if how == "chunked" else f"Content-Length: {8 << 30}"
    answer, sent, after = flood(server, request_head("PUT", path, "application/octet-stream", framing), CAP,
                                chunked=how == "chunked")
    assert answer.startswith(f"HTTP/1.1 {status}".encode()), answer[:200]
    assert sent < CAP, f"the server read all {sent} bytes of the flood: it drained the body"
    assert after <= AFTER_MAX, f"{after} bytes were taken after the answer"


def test_the_service_still_answers_after_the_floods(api, dataset):
    assert api.get("/v1/datasets/target").status_code == 200


def test_an_early_answer_that_ends_the_connection_says_so(server, dataset):
    answer, _sent, _after = flood(server, request_head("PUT", "/v1/datasets/missing/chunks/5",
                                                       "application/octet-stream", "Transfer-Encoding: chunked"), CAP)
    head = answer.split(b"\r\n\r\n", 1)[0].lower()
    assert head.startswith(b"http/1.1 404") and b"connection: close" in head, head


def test_a_small_body_left_unread_keeps_the_connection(server, dataset):
    """The ``{}`` of a route that reads no body, arriving after its answer (httpx sends a body in a second
    packet), is read and dropped as before: the next request on the connection is answered. Ending the
    connection there instead raced a client that reused it at once ("Server disconnected")."""
    sock = connect(server)
    try:
        sock.sendall(b"POST /v1/models/nothing/cancel HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n")
        first = read_answer(sock)
        assert first.startswith(b"HTTP/1.1 404") and b"connection: close" not in first.lower(), first
        sock.sendall(b"{}")
        sock.sendall(b"GET /v1/datasets/target HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert read_answer(sock).startswith(b"HTTP/1.1 200")
    finally:
        sock.close()


def read_answer(sock) -> bytes:
    """One answer with a ``Content-Length`` from ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536) or pytest.fail(f"the connection was closed: {data!r}")
    head, body = data.split(b"\r\n\r\n", 1)
    length = int(next(line.split(b":")[1] for line in head.lower().split(b"\r\n") if line.startswith(b"content-length")))
    while len(body) < length:
        body += sock.recv(65536) or pytest.fail(f"the connection was closed: {data!r}")
    return head + b"\r\n\r\n" + body
