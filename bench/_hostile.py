"""The hostile clients of bench/load.py's window, each in threads of the load generator's process:

* ``abusive`` (issue 30): ``/denoise`` requests at the work limit (fixed point, ``n_iter`` 1000,
  ``restarts`` 20, ``tol`` 1e-300, as many rows as ``KPCA_MAX_SERVING_WORK`` allows), each given up
  after 3 s, as the issue's abandoned requests were;
* ``slow_sockets`` (issue 52, item 6): that many connections that send a request's headers a byte every
  0.1 s (one thread for all); one the server closes is opened again, so that as many stay at it through
  the window;
* ``floods`` (issue 52, item 3): threads that each send ``PUT /v1/datasets/nowhere/chunks/0`` with a
  chunked body of zeros as fast as they can, answered 404 before the body is read; when the server
  closes the connection they open another (at most `FLOOD_CAP` bytes a connection).

`Hostile.report` says what each met: the abusive requests' outcomes, how many slow sockets the server
closed and after how long, and the floods' connections and bytes.
"""

from __future__ import annotations

import select
import socket
import threading
import time

import httpx
import numpy as np

N_FEATURES = 16
FLOOD_PIECE = 1 << 16
FLOOD_CAP = 1 << 30
SLOW_HEAD = b"GET /v1/datasets HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"s" * 100_000 + b"\r\n\r\n"


def abusive_loop(url: str, rows: int, stop_at: float, outcomes: list) -> None:
    """Heavy /denoise requests at the work limit, each abandoned after 3 s; outcomes (status or the
    transport error's name) appended."""
    limit = 10**11  # KPCA_MAX_SERVING_WORK's default
    n = max(1, limit // (rows * N_FEATURES * 1000 * 20))
    body = {"rows": np.random.default_rng(7).normal(size=(n, N_FEATURES)).round(4).tolist(),
            "method": "fixed-point", "options": {"n_iter": 1000, "restarts": 20, "tol": 1e-300}}
    while time.monotonic() < stop_at:
        try:
            outcomes.append(str(httpx.post(f"{url}/v1/models/m/denoise", json=body, timeout=3.0).status_code))
        except httpx.HTTPError as exc:
            outcomes.append(type(exc).__name__)


class Hostile:
    """The hostile clients of one window (module docstring), from ``start_at`` to ``stop_at``
    (``time.monotonic``)."""

    def __init__(self, url: str, rows: int, abusive: int, slow_sockets: int, floods: int, start_at: float,
                 stop_at: float):
        self.address = url.removeprefix("http://").split(":")
        self.start_at, self.stop_at = start_at, stop_at
        self.outcomes: list = []
        self.closed_after: list[float] = []
        self.slow_opened = 0
        self.flood_connections = self.flood_bytes = self.flood_answers = 0
        self._lock = threading.Lock()
        self.threads = [self._thread(abusive_loop, url, rows, stop_at, self.outcomes) for _ in range(abusive)]
        if slow_sockets:
            self.threads.append(self._thread(self._slow, slow_sockets))
        self.threads += [self._thread(self._flood) for _ in range(floods)]

    def _thread(self, target, *args) -> threading.Thread:
        def run():
            time.sleep(max(0.0, self.start_at - time.monotonic()))
            target(*args)
        return threading.Thread(target=run, daemon=True)

    def start(self) -> None:
        """Start every client (each waits for the window's start)."""
        for thread in self.threads:
            thread.start()

    def join(self) -> None:
        """Wait for every client to end (the window's end)."""
        for thread in self.threads:
            thread.join(timeout=120)

    def _connect(self) -> socket.socket:
        return socket.create_connection((self.address[0], int(self.address[1])), timeout=30)

    def _slow(self, count: int) -> None:
        """``count`` connections sending their headers a byte every 0.1 s; one closed is opened again."""
        open_ = {}  # socket -> (opened at, bytes sent)
        while time.monotonic() < self.stop_at:
            while len(open_) < count:
                sock = self._connect()
                sock.setblocking(False)
                open_[sock] = [time.monotonic(), 0]
                self.slow_opened += 1
            readable, _, _ = select.select(list(open_), [], [], 0)
            for sock in readable:  # the server answered (408) or closed
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                if not data or data.startswith(b"HTTP/1.1 408"):
                    self.closed_after.append(time.monotonic() - open_.pop(sock)[0])
                    sock.close()
            for sock, state in list(open_.items()):
                try:
                    sock.send(SLOW_HEAD[state[1]:state[1] + 1])
                    state[1] += 1
                except OSError:
                    self.closed_after.append(time.monotonic() - open_.pop(sock)[0])
                    sock.close()
            time.sleep(0.1)
        for sock in open_:
            sock.close()

    def _flood(self) -> None:
        """Connections flooding a chunked body past its early 404, one after another."""
        head = (b"PUT /v1/datasets/nowhere/chunks/0 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                b"application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        piece = b"%x\r\n" % FLOOD_PIECE + bytes(FLOOD_PIECE) + b"\r\n"
        while time.monotonic() < self.stop_at:
            sent = 0
            with self._connect() as sock:
                try:
                    sock.sendall(head)
                    while sent < FLOOD_CAP and time.monotonic() < self.stop_at:
                        sock.sendall(piece)
                        sent += len(piece)
                except OSError:
                    pass
                try:
                    answered = sock.recv(12).startswith(b"HTTP/1.1 404")
                except OSError:
                    answered = False
            with self._lock:
                self.flood_connections += 1
                self.flood_bytes += sent
                self.flood_answers += answered

    def report(self) -> dict:
        """What the hostile clients met (module docstring)."""
        closed = np.asarray(self.closed_after)
        return {
            "abusive_outcomes": {outcome: self.outcomes.count(outcome) for outcome in sorted(set(self.outcomes))},
            "slow_sockets": {"opened": self.slow_opened, "closed_by_server": int(closed.size),
                             "median_open_s": round(float(np.median(closed)), 2) if closed.size else None},
            "floods": {"connections": self.flood_connections, "bytes_sent": self.flood_bytes,
                       "answered_404": self.flood_answers},
        }
