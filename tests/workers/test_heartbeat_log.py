"""A dask worker's heartbeat failure at a cluster's stop is one warning line, not a traceback
(`workers.plugins.HeartbeatFailureLine`): the CI run of `kpca serve`'s Ctrl-C test once failed on that
traceback, printed by the embedded cluster's worker as the scheduler closed its connection."""

import logging

from tornado.iostream import StreamClosedError

from workers import Backend
from workers.plugins import HEARTBEAT_FAILED, HeartbeatFailureLine


def record(message: str, exc: BaseException | None) -> logging.LogRecord:
    exc_info = (type(exc), exc, None) if exc is not None else None
    return logging.LogRecord("distributed.worker", logging.ERROR, __file__, 1, message, None, exc_info)


def test_the_heartbeat_failure_becomes_one_warning_line():
    line = record(HEARTBEAT_FAILED, StreamClosedError("Stream is closed"))
    assert HeartbeatFailureLine().filter(line)
    assert line.levelno == logging.WARNING and line.exc_info is None
    text = logging.Formatter("%(levelname)s %(message)s").format(line)
    assert text == "WARNING heartbeat to the scheduler failed: StreamClosedError: Stream is closed"
    assert "Traceback" not in text


def test_other_records_pass_unchanged():
    for message, exc in [("Failed to communicate with scheduler", ValueError("x")), (HEARTBEAT_FAILED, None),
                         ("Unexpected exception during heartbeat. Closing worker.", OSError("y"))]:
        other = record(message, exc)
        assert HeartbeatFailureLine().filter(other)
        assert other.levelno == logging.ERROR and other.getMessage() == message
        assert (other.exc_info is None) == (exc is None)


def _filtered() -> bool:
    return any(isinstance(f, HeartbeatFailureLine) for f in logging.getLogger("distributed.worker").filters)


def test_the_embedded_cluster_s_workers_have_the_filter(tmp_path):
    with Backend(tmp_path, n_workers=1, warm_workers=False) as backend:
        assert list(backend.client.run(_filtered).values()) == [True]
