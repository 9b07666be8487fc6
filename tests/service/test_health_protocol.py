"""``GET /healthz`` answered by the HTTP protocol as it arrives (issue 30, `service.health_protocol`).

Under load ``/healthz`` as a route waited behind the steps of every request in flight in its API process
(bench/load.py: p50 5-8 times the bare server's). The protocol answers it before the event loop runs
those steps. What must hold: the answer is the route's (status, type, body), the app never sees the
request, every other request (another path or method, a body, one pipelined behind a request in flight)
is the app's and answered in order, and keep-alive and ``Connection: close`` work as the app's answers
do. Real uvicorn on loopback, real sockets; `python -m service` serves with it (the last test).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import socket
import threading

import httpx
import uvicorn

from service.health_protocol import HEALTH_BODY
from service.http_protocol import HTTP_PROTOCOL
from tests.waiting import wait_until


class RecordingApp:
    """An ASGI app that records the paths it is asked and answers ``app <path>``; ``/slow`` after 0.3 s."""

    def __init__(self):
        self.seen = []

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return
        self.seen.append((scope["method"], scope["path"]))
        while (await receive()).get("more_body"):
            pass
        if scope["path"] == "/slow":
            await asyncio.sleep(0.3)
        body = f"app {scope['path']}".encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


@contextlib.contextmanager
def served(app, http: str = HTTP_PROTOCOL):
    """``app`` on a free loopback port with ``http`` (uvicorn's protocol setting); yields the port."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, http=http, lifespan="off", log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        def started() -> bool:
            assert thread.is_alive(), "uvicorn exited during its start"
            return server.started

        wait_until(started, what="uvicorn to start", interval=0.02)
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def exchange(port: int, data: bytes, answers: int,
             closing_s: float = 0.5) -> tuple[list[tuple[int, dict, bytes]], bool]:
    """Send ``data`` on one connection and read ``answers`` HTTP answers: ``([(status, headers,
    body)], closed)``, where ``closed`` says whether the server then closed the connection within
    ``closing_s`` seconds (a test that expects the close waits long: a loaded machine closes late)."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(data)
        reader = sock.makefile("rb")
        got = []
        for _ in range(answers):
            status = int(reader.readline().split()[1])
            headers = {}
            while (line := reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            length = 0 if data.startswith(b"HEAD ") else int(headers["content-length"])  # HEAD: no body
            got.append((status, headers, reader.read(length)))
        sock.settimeout(closing_s)
        try:
            closed = sock.recv(1) == b""
        except TimeoutError:
            closed = False
        return got, closed


def get(path: str, *extra: str, version: str = "1.1") -> bytes:
    return "\r\n".join([f"GET {path} HTTP/{version}", "Host: 127.0.0.1", *extra, "", ""]).encode()


def test_the_answer_is_the_routes_answer(tmp_path):
    """Status, content type and body equal what the service's own ``/healthz`` route gives (asked through
    the app, without the protocol); uvicorn's ``date`` and ``server`` headers as on every answer."""
    from service import Settings, create_app

    app = create_app(Settings(data_dir=tmp_path))

    async def through_the_app():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://x") as client:
            return await client.get("/healthz")

    route = asyncio.run(through_the_app())
    with served(app) as port:
        [(status, headers, body)], closed = exchange(port, get("/healthz"), 1)
    assert (status, body) == (route.status_code, route.content) == (200, HEALTH_BODY)
    assert headers["content-type"] == route.headers["content-type"]
    assert int(headers["content-length"]) == len(body)
    assert {"date", "server"} <= set(headers) and not closed


def test_healthz_never_reaches_the_app_and_everything_else_does():
    app = RecordingApp()
    with served(app) as port:
        answers, _ = exchange(port, get("/healthz") + get("/healthz?probe=1"), 2)
        assert [a[2] for a in answers] == [HEALTH_BODY, HEALTH_BODY]
        assert app.seen == []
        others = [
            get("/healthz/"),
            get("/healthzz"),
            b"HEAD /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
            b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}",
            b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}",  # a body: the app's
        ]
        for request in others:
            [(status, _, body)], _ = exchange(port, request, 1)
            assert status == 200 and HEALTH_BODY not in body
    assert app.seen == [("GET", "/healthz/"), ("GET", "/healthzz"), ("HEAD", "/healthz"), ("POST", "/healthz"),
                        ("GET", "/healthz")]


def test_a_healthz_pipelined_behind_a_request_in_flight_goes_to_the_app_in_turn():
    """HTTP/1.1 answers in the order asked: a ``/healthz`` behind a request still in flight on its
    connection is queued with the app's (uvicorn's pipeline), not answered ahead of it."""
    app = RecordingApp()
    with served(app) as port:
        answers, _ = exchange(port, get("/slow") + get("/healthz") + get("/fast"), 3)
        alone, _ = exchange(port, get("/healthz"), 1)  # the connection's first: answered by the protocol
    assert [body for _, _, body in answers] == [b"app /slow", b"app /healthz", b"app /fast"]
    assert alone[0][2] == HEALTH_BODY


def test_keep_alive_and_close_as_the_app_answers():
    app = RecordingApp()
    with served(app) as port:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for path in ("/healthz", "/other", "/healthz", "/healthz"):  # one connection throughout
            connection.request("GET", path)
            response = connection.getresponse()
            assert response.status == 200 and response.read() == (HEALTH_BODY if path == "/healthz" else b"app /other")
        connection.close()
        for request in (get("/healthz", "Connection: close"), get("/healthz", version="1.0")):
            [(status, headers, body)], closed = exchange(port, request, 1, closing_s=60)
            assert (status, body, headers.get("connection"), closed) == (200, HEALTH_BODY, "close", True)
        [(_, headers, _)], closed = exchange(port, get("/healthz", "Connection: keep-alive", version="1.0"), 1,
                                             closing_s=60)
        assert closed and headers.get("connection") == "close"  # uvicorn keeps HTTP/1.0 connections open never


def test_python_m_service_serves_healthz_with_it(tmp_path):
    """`python -m service` (one API process) answers ``/healthz`` through the protocol: the app's request
    metrics, which count every request the app sees, do not count it; other requests still are."""
    import os
    import subprocess
    import sys

    from tests.e2e.service_process import free_port

    port = free_port()
    env = {**os.environ, "KPCA_N_WORKERS": "1", "KPCA_API_PROCESSES": "1", "KPCA_WARM_WORKERS": "false"}
    proc = subprocess.Popen([sys.executable, "-m", "service", "--host", "127.0.0.1", "--port", str(port),
                             "--data-dir", str(tmp_path / "data")], env=env, stdout=subprocess.DEVNULL,
                            stderr=open(tmp_path / "service.log", "wb"), start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        def up() -> bool:
            assert proc.poll() is None, (tmp_path / "service.log").read_text()
            with contextlib.suppress(httpx.TransportError):
                return httpx.get(f"{url}/healthz", timeout=10).content == HEALTH_BODY
            return False

        wait_until(up, what="python -m service to answer /healthz", interval=0.2)
        for _ in range(3):
            assert httpx.get(f"{url}/healthz", timeout=60).json() == json.loads(HEALTH_BODY)
        assert httpx.get(f"{url}/v1/datasets", timeout=60).status_code == 200
        metrics = httpx.get(f"{url}/metrics", timeout=60).text
        assert 'route="/v1/datasets"' in metrics
        assert 'route="/healthz"' not in metrics
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)

