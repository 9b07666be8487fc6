"""`python -m service` as a child process on a free loopback port, for e2e tests."""

import contextlib
import os
import signal
import socket
import subprocess
import sys

from tests.waiting import PATIENCE_S, answers_healthz, wait_until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServiceProcess:
    def __init__(self, data_dir, workers=1):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # an hour's serving deadline, as the in-process test servers' (tests/service/conftest.py)
        env = {"KPCA_SERVING_DEADLINE_S": "3600", **os.environ, "KPCA_N_WORKERS": str(workers), "KPCA_WATCHDOG_S": "1"}
        # its own session, so a crash can take the whole process group (API + dask workers)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "service", "--host", "127.0.0.1", "--port", str(self.port),
             "--data-dir", str(data_dir)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout=PATIENCE_S):
        """Wait until the service answers /healthz (its exit first fails the test, with its output); self."""
        def up() -> bool:
            assert self.proc.poll() is None, self.proc.stdout.read().decode()
            return answers_healthz(self.url)

        wait_until(up, timeout, "the service to answer /healthz", interval=0.2)
        return self

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
