"""A real kpca-stream server per test module: uvicorn in a thread, a real httpx client.

A module tunes its server with a module-level ``SERVER_SETTINGS`` dict (for
example ``{"max_body_bytes": 65536}``), or a function of the server's data
folder returning one (for settings that name paths). Every response the client receives is
checked: a 5xx fails the test that caused it.

The servers' serving deadline is an hour (`TEST_SETTINGS`), not the product's minute: a /denoise or
/denoise-image that takes 20 s on a quiet machine takes minutes beside other jobs, and a test of what
it answers must not become a 503 on a loaded machine. The modules that test the deadline set their own.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import uvicorn

from service import Settings, create_app
from service.http_protocol import HTTP_PROTOCOL
from tests.service.browser import artefacts, browser  # noqa: F401 (fixtures of the dashboard tests)
from tests.waiting import PATIENCE_S

STARTUP_TIMEOUT_S = PATIENCE_S
# What every test server runs with, unless its module says otherwise (see the module's docstring).
TEST_SETTINGS = {"serving_deadline_s": 3600.0}


def _no_server_errors(response: httpx.Response) -> None:
    if response.status_code >= 500:
        response.read()
        raise AssertionError(
            f"{response.request.method} {response.request.url} -> {response.status_code}: {response.text}"
        )


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """The data folder of the module's server."""
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="module")
def server(request, data_dir) -> Iterator[str]:
    """Base URL of a running server with its own data folder and embedded one-worker cluster."""
    overrides = getattr(request.module, "SERVER_SETTINGS", {})
    if callable(overrides):
        overrides = overrides(data_dir)
    settings = Settings(**{"data_dir": data_dir, "scheduler": None, "n_workers": 1, **TEST_SETTINGS, **overrides})
    app = create_app(settings)

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    # as `python -m service` runs it: its HTTP protocol, and requests still running at the stop get
    # settings.shutdown_timeout_s
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", http=HTTP_PROTOCOL,
                                       timeout_graceful_shutdown=settings.shutdown_timeout_s))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()

    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while True:
        if not thread.is_alive():
            pytest.fail("the server exited during startup (see the log above)")
        try:
            if httpx.get(f"{base_url}/healthz", timeout=2.0).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            uv.should_exit = True
            pytest.fail(f"the server did not answer /healthz within {STARTUP_TIMEOUT_S:.0f} s")
        time.sleep(0.1)
    try:
        yield base_url
    finally:
        uv.should_exit = True
        thread.join(timeout=60)
        listener.close()
        if thread.is_alive():
            warnings.warn(f"the server of {request.module.__name__} did not stop within 60 s; where this "
                          f"process's threads are:\n{_thread_stacks()}", stacklevel=1)


def _thread_stacks() -> str:
    """The stack of every thread of this process, for a server that does not stop."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    return "\n".join(f"--- {names.get(ident, ident)}\n" + "".join(traceback.format_stack(frame))
                     for ident, frame in sys._current_frames().items())


@pytest.fixture(scope="module")
def api(server) -> Iterator[httpx.Client]:
    """An httpx client on the module's server that fails the test on any 5xx. It waits for an answer as
    long as a loaded machine may need (a tuned /denoise-image: seconds alone, minutes beside other jobs)."""
    with httpx.Client(base_url=server, timeout=PATIENCE_S, event_hooks={"response": [_no_server_errors]}) as client:
        yield client


@pytest.fixture(scope="module")
def kpca(server):
    """Run ``kpca --url SERVER ARGS...`` in-process (click's runner); the click result."""
    from click.testing import CliRunner

    from client.cli import cli

    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(cli, ["--url", server, *args], catch_exceptions=False)

    return run


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240531)
