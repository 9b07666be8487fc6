"""uvicorn's access log written by a thread of its own, so that the event loop never formats or writes it.

uvicorn writes one access line per request from the event loop: the line is formatted there and
written to the stream with a system call that lets go of the interpreter's lock, and each such write
is a chance for the loop to wait for the lock behind the thread pool (`/healthz` stalls under
bench/load.py; docs/development.md has the figures). A blocked stream (a terminal scrolled back, a
full pipe) would stop the loop altogether.

`log_config` is uvicorn's own logging configuration with its access handler replaced by
`BackgroundStreamHandler`: the loop only queues the record; a daemon thread formats and writes it,
in order, gathering the lines of `GATHER_S` into one write: under load one wake-up of the thread, and
one hand-over of the interpreter's lock around the system call, per batch instead of per request.
``logging.shutdown`` (at exit) closes the handler, which writes what is queued first.
"""

from __future__ import annotations

import copy
import logging
import os
import queue
import threading
import time

from uvicorn.config import LOGGING_CONFIG

_STOP = object()
#: seconds the writer waits after a line for the lines of the next requests, written with it at once
GATHER_S = 0.05


class BackgroundStreamHandler(logging.StreamHandler):
    """A `logging.StreamHandler` whose records are formatted and written by a daemon thread, in the
    order they were emitted. `emit` costs a queue put; `close` (and `flush`) wait for the queue to drain."""

    def __init__(self, stream=None) -> None:
        super().__init__(stream)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._start_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        """Queue ``record`` for the writer thread (started on first use, again in a forked child)."""
        if self._thread is None or self._pid != os.getpid():
            with self._start_lock:
                if self._thread is None or self._pid != os.getpid():
                    self._queue, self._pid = queue.SimpleQueue(), os.getpid()
                    self._thread = threading.Thread(target=self._write, name="access-log", daemon=True)
                    self._thread.start()
        self._queue.put(record)

    def _write(self) -> None:
        """The writer thread: waits for a record, gathers what is queued in the next `GATHER_S`, and
        writes it (`_write_batch`); ends at `_STOP`."""
        while True:
            batch = [self._queue.get()]
            if isinstance(batch[0], logging.LogRecord):
                time.sleep(GATHER_S)
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if not self._write_batch(batch):
                return

    def _write_batch(self, batch: list) -> bool:
        """Format ``batch``'s records and write their lines in one write and one flush; a flush event
        (`flush`) is set once the lines queued before it are written. False if the batch ends the thread
        (`_STOP`). Errors go to ``handleError`` as a `logging.StreamHandler`'s do. O(lines)."""
        lines: list[str] = []
        last = None
        for item in batch:
            if isinstance(item, logging.LogRecord):
                try:
                    lines.append(self.format(item) + self.terminator)
                    last = item
                except Exception:
                    self.handleError(item)
                continue
            self._write_lines(lines, last)
            lines = []
            if item is _STOP:
                return False
            item.set()  # a `flush` waiting for what was queued before it
        self._write_lines(lines, last)
        return True

    def _write_lines(self, lines: list[str], last) -> None:
        """Write ``lines`` and flush the stream, without the handler's lock: ``logging.shutdown`` holds it
        while `flush` waits for this thread."""
        if lines:
            try:
                self.stream.write("".join(lines))
                self.stream.flush()
            except Exception:
                self.handleError(last)

    def flush(self) -> None:
        """Wait (at most 5 s) until every record queued so far is written, then flush the stream."""
        if self._thread is not None and self._thread.is_alive() and self._pid == os.getpid() \
                and threading.current_thread() is not self._thread:
            done = threading.Event()
            self._queue.put(done)
            done.wait(5.0)
        super().flush()

    def close(self) -> None:
        """Write what is queued, stop the thread, close as a `logging.StreamHandler` does."""
        self.flush()
        if self._thread is not None and self._pid == os.getpid():
            self._queue.put(_STOP)
            self._thread.join(5.0)
            self._thread = None
        super().close()


def log_config() -> dict:
    """uvicorn's default logging configuration (`uvicorn.config.LOGGING_CONFIG`) with the access lines
    written by `BackgroundStreamHandler`. Pass it as ``log_config`` to ``uvicorn.run``."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["handlers"]["access"]["class"] = f"{__name__}.{BackgroundStreamHandler.__name__}"
    return config
