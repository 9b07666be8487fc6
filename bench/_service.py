"""A real kpca-stream service for the HTTP benches (fuzz, load): uvicorn on a loopback port in a
thread of this process (`running_service`) or in a process of its own (`service_process`), an embedded
dask cluster, a temporary data folder."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import uvicorn


@contextlib.contextmanager
def running_service(n_workers: int = 1, **settings) -> Iterator[str]:
    """Start the service on 127.0.0.1 with a fresh data folder; yield its base URL; stop it.

    ``settings`` are extra `service.Settings` fields (for example ``register_prefixes=[]``).
    Raises RuntimeError if /healthz does not answer within 120 s.
    """
    from service import Settings, create_app

    with tempfile.TemporaryDirectory(prefix="kpca-bench-") as data_dir:
        with serving(create_app(Settings(data_dir=data_dir, scheduler=None, n_workers=n_workers, **settings))) as url:
            yield url


@contextlib.contextmanager
def serving(app, lifespan: str = "on") -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free loopback port in a thread of this process; yield its base URL
    once /healthz answers (RuntimeError after 120 s); stop it on exit. ``lifespan`` "off": no start-up
    (no stores, no dask cluster), for what needs only the app's routes."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan=lifespan))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        wait_healthy(url, thread.is_alive, "the service did not start")
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        sock.close()


@contextlib.contextmanager
def service_process(n_workers: int | None = None, cwd: str | None = None, **environ: str) -> Iterator[str]:
    """`python -m service` on a free loopback port in a process of its own (as `make run` starts it),
    with a fresh data folder and ``KPCA_*`` settings from ``environ``; yield its base URL; stop it with
    SIGTERM (SIGKILL after 60 s). A load generator in another process than the server measures the
    server, not the two sharing one interpreter; ``cwd`` (default this one) is where ``service`` is
    imported from (another checkout's, to measure its code). RuntimeError if /healthz does not answer
    within 120 s."""
    with tempfile.TemporaryDirectory(prefix="kpca-bench-") as data_dir:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        env = {**os.environ, **environ, **({"KPCA_N_WORKERS": str(n_workers)} if n_workers else {})}
        log_path = Path(data_dir) / "service.log"  # a file, not a pipe: a pipe nobody reads blocks the service
        log = open(log_path, "wb")
        proc = subprocess.Popen([sys.executable, "-m", "service", "--host", "127.0.0.1", "--port", str(port),
                                 "--data-dir", data_dir], env=env, stdout=subprocess.DEVNULL, stderr=log, cwd=cwd)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(url, lambda: proc.poll() is None, "the service did not start",
                         lambda: log_path.read_bytes().decode(errors="replace")[-2000:])
            yield url
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()
            if os.environ.get("KPCA_BENCH_SERVICE_LOG"):  # keep the service's log where asked
                shutil.copyfile(log_path, os.environ["KPCA_BENCH_SERVICE_LOG"])


@contextlib.contextmanager
def bare_server() -> Iterator[str]:
    """`bench/_bare_server.py` (uvicorn and an app that only answers ``{"status": "ok"}``) on a free
    loopback port in a process of its own; yield its base URL; stop it on exit. RuntimeError if it does
    not answer within 120 s."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("_bare_server.py")), str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, lambda: proc.poll() is None, "the bare server did not start")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_healthy(url: str, alive, failure: str, detail=lambda: "", timeout: float = 120.0) -> None:
    """Poll ``url``/healthz every 0.2 s until it answers 200; RuntimeError(``failure``: ``detail()``) when
    ``alive()`` turns false or ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or not alive():
            said = detail()
            raise RuntimeError(f"{failure}: {said}" if said else failure)
        time.sleep(0.2)
