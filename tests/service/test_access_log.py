"""`service.access_log`: the access lines are formatted and written by a thread, so that a slow or
blocked standard output never holds up the event loop that emits them."""

from __future__ import annotations

import logging
import logging.config
import subprocess
import sys
import threading

from service.access_log import BackgroundStreamHandler, log_config


class BlockedStream:
    """A stream whose writes wait until ``opened`` is set, recording each line and its writer thread."""

    def __init__(self):
        self.opened = threading.Event()
        self.lines: list[str] = []
        self.writers: set[str] = set()

    def write(self, text: str) -> None:
        self.opened.wait(30)
        self.writers.add(threading.current_thread().name)
        self.lines.extend(line for line in text.splitlines() if line)

    def flush(self) -> None:
        pass


def message_logger(stream, name: str) -> tuple[BackgroundStreamHandler, logging.Logger]:
    """A logger of its own whose records reach ``stream`` as their bare messages through a
    `BackgroundStreamHandler`: (the handler, the logger)."""
    handler = BackgroundStreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.Logger(name)
    logger.addHandler(handler)
    return handler, logger


def test_emitting_never_waits_for_the_stream_and_lines_keep_their_order():
    stream = BlockedStream()
    handler, logger = message_logger(stream, "access-test")
    for index in range(200):
        logger.info("request %d", index)
    assert stream.lines == []  # a write in this thread would have waited for the stream, then written
    stream.opened.set()
    handler.flush()  # waits for what was queued before it
    assert stream.lines == [f"request {index}" for index in range(200)]
    assert stream.writers == {"access-log"}
    handler.close()


def test_the_logging_configuration_gives_uvicorns_access_logger_the_background_handler():
    config = log_config()
    saved = logging.getLogger("uvicorn.access").handlers[:]
    try:
        logging.config.dictConfig(config)
        handlers = logging.getLogger("uvicorn.access").handlers
        assert [type(h) for h in handlers] == [BackgroundStreamHandler]
        assert type(logging.getLogger("uvicorn").handlers[0]) is logging.StreamHandler  # the rest as uvicorn has it
    finally:
        for handler in logging.getLogger("uvicorn.access").handlers:
            handler.close()
        logging.getLogger("uvicorn.access").handlers = saved


def test_the_handler_module_imports_without_the_app():
    """uvicorn configures logging in each API process before its signal handling is in place, importing
    this module: it must not import the whole app (`service/__init__.py` exports lazily), or a Ctrl-C
    during that import ends the process with a KeyboardInterrupt traceback."""
    code = ("import sys, service.access_log; "
            "loaded = sorted(m for m in sys.modules if m.startswith(('service.', 'workers', 'kpca', 'store'))); "
            "print(loaded)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['service.access_log']", out


class CountingStream:
    """A stream that records its writes."""

    def __init__(self):
        self.writes: list[str] = []

    def write(self, text: str) -> None:
        self.writes.append(text)

    def flush(self) -> None:
        pass


def test_lines_that_come_together_are_written_together():
    """The writer gathers the lines emitted within `GATHER_S` into one write: under load, one wake-up
    and one system call per batch, not per request."""
    stream = CountingStream()
    handler, logger = message_logger(stream, "access-batch")
    for index in range(100):
        logger.info("request %d", index)
    handler.flush()
    assert "".join(stream.writes).splitlines() == [f"request {index}" for index in range(100)]
    assert len(stream.writes) <= 3
    handler.close()


def test_a_line_that_cannot_be_formatted_is_reported_and_the_others_written(capsys):
    stream = CountingStream()
    handler, logger = message_logger(stream, "access-bad")
    logger.info("before")
    logger.info("bad %d", "not a number")
    logger.info("after")
    handler.flush()
    assert "".join(stream.writes).splitlines() == ["before", "after"]
    assert "not a number" in capsys.readouterr().err  # logging's own report of a record it could not emit
    handler.close()


def test_closing_under_the_handlers_lock_writes_everything_at_once():
    """``logging.shutdown`` holds a handler's lock while it flushes and closes it: the writer thread must
    not need that lock, or the exit waits for `flush`'s and `close`'s time-outs and loses the lines."""
    stream = CountingStream()
    handler, logger = message_logger(stream, "access-shutdown")
    for index in range(10):
        logger.info("request %d", index)
    handler.acquire()
    try:
        handler.flush()
        handler.close()
        written = "".join(stream.writes).splitlines()  # with the lock still held: a writer that needs it
    finally:                                          # has written nothing (flush and close timed out)
        handler.release()
    assert written == [f"request {index}" for index in range(10)]
