"""`python -m service` as a child process on a free loopback port, for e2e tests."""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServiceProcess:
    def __init__(self, data_dir, workers=1):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "KPCA_N_WORKERS": str(workers), "KPCA_WATCHDOG_S": "1"}
        # its own session, so a crash can take the whole process group (API + dask workers)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "service", "--host", "127.0.0.1", "--port", str(self.port),
             "--data-dir", str(data_dir)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout=120):
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, self.proc.stdout.read().decode()
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"the service did not start within {timeout} s"
            time.sleep(0.2)

    def crash(self):
        """SIGKILL the service and every process it started (its dask workers)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.crash()
        with contextlib.suppress(ProcessLookupError):  # anything left in its group
            os.killpg(self.proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def running_service(data_dir, workers=1):
    """Yield the base URL of a running service; stop it (SIGINT, then SIGKILL) on exit."""
    service = ServiceProcess(data_dir, workers)
    try:
        yield service.wait_ready().url
    finally:
        service.stop()
