"""The upload client's retries against a real HTTP server on 127.0.0.1 that answers 429/503 first:
``Retry-After`` (seconds and HTTP date) is honoured, other waits are jittered and capped."""

from __future__ import annotations

import email.utils
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from client.upload import UploadError, _request


class Scripted(ThreadingHTTPServer):
    """Answers each GET with the next (status, headers) of ``script`` (then 200), and notes when each
    request arrived."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script: list[tuple[int, dict]] = []
        self.arrivals: list[float] = []


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (stdlib name)
        self.server.arrivals.append(time.monotonic())
        status, headers = self.server.script.pop(0) if self.server.script else (200, {})
        body = b'{"ok": true}' if status == 200 else b'{"error": {"code": "busy"}}'
        self.send_response(status)
        for key, value in {**headers, "Content-Type": "application/json",
                           "Content-Length": str(len(body))}.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def scripted():
    server = Scripted()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    with httpx.Client(base_url=f"http://127.0.0.1:{server.server_address[1]}", timeout=10) as client:
        yield server, client
    server.shutdown()
    server.server_close()


def test_retry_after_seconds_is_waited_then_the_request_succeeds(scripted):
    server, client = scripted
    server.script, server.arrivals, waits = [(429, {"Retry-After": "1"})], [], []

    def sleep(seconds: float) -> None:  # the real wait, recorded
        waits.append(seconds)
        time.sleep(seconds)

    response = _request(client, "GET", "/x", retries=3, backoff=0.01, sleep=sleep)
    assert response.status_code == 200 and len(server.arrivals) == 2
    assert waits == [1.0]  # what was asked (the backoff alone would be <= 0.01 s) ...
    assert server.arrivals[1] - server.arrivals[0] >= 1.0  # ... and waited for


def test_retry_after_as_an_http_date_and_the_cap(scripted):
    server, client = scripted
    waits = []
    date = email.utils.formatdate(time.time() + 60, usegmt=True)  # whole seconds: 59 to 60 s from now
    server.script = [(503, {"Retry-After": date}), (429, {"Retry-After": "600"})]
    assert _request(client, "GET", "/x", retries=3, backoff=0.01, max_wait=100.0, sleep=waits.append).status_code == 200
    # (the request's own time comes off the date's seconds: on a loaded machine more than a quiet one's)
    assert 30.0 < waits[0] <= 60.0 and waits[1] == 100.0, waits  # 600 s asked, capped at max_wait


def test_backoff_without_retry_after_has_full_jitter(scripted):
    server, client = scripted
    waits = []
    for _ in range(5):
        server.script = [(503, {}), (502, {}), (503, {})]
        assert _request(client, "GET", "/x", retries=3, backoff=0.5, sleep=waits.append).status_code == 200
    first, second, third = waits[0::3], waits[1::3], waits[2::3]
    assert all(0 <= w <= 0.5 for w in first) and all(0 <= w <= 1.0 for w in second)
    assert all(0 <= w <= 2.0 for w in third)
    assert len(set(waits)) == len(waits), waits  # random, not the fixed backoff * 2**attempt


def test_a_busy_server_past_the_retries_is_reported(scripted):
    server, client = scripted
    server.script = [(429, {"Retry-After": "0"})] * 3
    with pytest.raises(UploadError, match=r"-> 429: .*busy.*after 3 attempts"):
        _request(client, "GET", "/x", retries=2, backoff=0.01, sleep=lambda s: None)
    server.script = []
