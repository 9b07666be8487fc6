"""A 500 tells a keep-alive client that the connection ends (issue 30, item 7).

An unhandled error leaves Starlette's ``ServerErrorMiddleware`` after the 500 is sent and uvicorn then
closes the connection; without ``Connection: close`` a keep-alive client reuses the dead socket and its
next request fails with ``RemoteDisconnected``. No route of the service fails on purpose, so the
handlers (`service.errors.install_error_handlers`) are served by a real uvicorn on a small app with
two routes that fail the way a bug would (an exception no handler knows, an OSError that is not a
full disk), and a real keep-alive client (`http.client`) sends its next request on the same connection.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading

import pytest
import uvicorn
from fastapi import FastAPI

from service.errors import install_error_handlers
from tests.waiting import wait_until


def failing_app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/bug")
    def bug():
        raise RuntimeError("a bug")

    @app.get("/io")
    def io():
        raise OSError(5, "input/output error")

    @app.get("/ok")
    def ok():
        return {"ok": True}

    return app


@pytest.fixture(scope="module")
def port():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(failing_app(), log_level="critical", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    wait_until(lambda: server.started, what="uvicorn to start")
    yield listener.getsockname()[1]
    server.should_exit = True
    thread.join(timeout=10)
    listener.close()


@pytest.mark.parametrize("path", ["/bug", "/io"])
def test_a_500_says_connection_close_and_the_next_request_succeeds(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/ok")
    first = conn.getresponse()
    assert first.status == 200 and first.read()
    assert (first.getheader("connection") or "").lower() != "close"  # the connection is kept alive
    conn.request("GET", path)  # same connection
    failed = conn.getresponse()
    assert failed.status == 500
    assert json.loads(failed.read())["error"]["code"] == "internal"
    assert (failed.getheader("connection") or "").lower() == "close"
    conn.request("GET", "/ok")  # http.client opens a new connection after "Connection: close"
    after = conn.getresponse()
    assert after.status == 200 and json.loads(after.read()) == {"ok": True}
    conn.close()
