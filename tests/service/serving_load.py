"""The server, model and heavy requests shared by tests/service/test_api_serving_budget.py (budgets, and what
heavy requests leave to others) and tests/service/test_api_serving_deadline.py (the serving deadline).

A heavy request here is a read-key ``/denoise`` of issue 30 (`HEAVY`: tens of seconds of pre-image work on
a quiet machine, minutes on a loaded one) sent over a raw socket (`send_heavy`), so that it stays in
flight until the test closes its connection: the tests look at what happens *while* it runs, for as
long as a loaded machine needs, instead of racing a deadline.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator

import uvicorn

from bench._service import wait_healthy
from tests.service.raw_http import connect, request_head
from tests.waiting import PATIENCE_S

HEAVY = {"method": "fixed-point", "options": {"n_iter": 1000, "restarts": 10, "tol": 1e-300}}
LOCAL_WORK = 2**20  # the model's 400 x 64 values: projections of up to 40 rows in the API process, more on a worker
# Server settings of both modules, but for the deadline (`serving_deadline_s`), which each sets.
SETTINGS = {"scheduler": None, "n_workers": 1, "max_serving_work": 10**11, "serving_block_work": 5 * 10**7,
            "local_projection_work": LOCAL_WORK, "api_threads": 2}


@contextlib.contextmanager
def served(app) -> Iterator[str]:
    """``app`` on a loopback port (uvicorn in a thread); its base URL."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        wait_healthy(url, thread.is_alive, "the server did not start", timeout=PATIENCE_S)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        listener.close()


def fit_model(api, digits) -> str:
    """Model "m": the exact fit of 400 digits (8 components), loaded on the worker; its name."""
    from tests.api_checks import wait_for_fit

    api.post("/v1/datasets", json={"name": "digits", "n_features": 64, "dtype": "float64"}).raise_for_status()
    api.put("/v1/datasets/digits/chunks/0", json={"rows": digits[:400].tolist()}).raise_for_status()
    api.post("/v1/datasets/digits/commit", json={}).raise_for_status()
    api.post("/v1/models", json={"name": "m", "dataset": "digits", "n_components": 8,
                                 "kernel": {"type": "gaussian", "sigma": 3.0}, "solver": "exact"}).raise_for_status()
    assert wait_for_fit(api, "m")["status"] == "completed"
    api.post("/v1/models/m/project", json={"rows": digits[:2].tolist()}).raise_for_status()  # loaded on the worker
    return "m"


def cluster_tasks(app) -> int:
    """Pre-image tasks the dask scheduler holds (queued, processing or kept in memory)."""
    def count(dask_scheduler):
        return sum(1 for key in dask_scheduler.tasks if "reconstruct_rows" in str(key))
    return app.state.backend.client.run_on_scheduler(count)


def running_tasks(app, name: str) -> int:
    """Tasks running on the workers whose function is ``name`` (a task's thread, found by its frames)."""
    def count(dask_worker):
        import sys as _sys
        return sum(1 for frame in _sys._current_frames().values() for f in _walk(frame) if f.f_code.co_name == name)

    def _walk(frame):
        while frame is not None:
            yield frame
            frame = frame.f_back

    return sum(app.state.backend.client.run(count).values())


def send_heavy(base_url: str, model: str, rows) -> socket.socket:
    """Send a `HEAVY` ``/denoise`` of ``rows`` over a connection of its own, without reading its answer;
    the connection (closing it is the client leaving, which cancels the request's work)."""
    body = json.dumps({"rows": rows.tolist(), **HEAVY}).encode()
    sock = connect(base_url)
    sock.sendall(request_head("POST", f"/v1/models/{model}/denoise", "application/json",
                              f"Content-Length: {len(body)}") + body)
    return sock


def unanswered(sock: socket.socket) -> bool:
    """Whether nothing has come back yet on ``sock`` (its request still in flight)."""
    sock.setblocking(False)
    try:
        sock.recv(1, socket.MSG_PEEK)  # an answer's first byte, or b"": closed by the server
        return False
    except BlockingIOError:
        return True
    finally:
        sock.setblocking(True)
