"""An S3 API over HTTP on 127.0.0.1 for the tests and bench/object_store.py: moto's server (the test extra's
``moto[server]``), in a thread of the calling process, stopped by whoever started it. Its objects live in
moto's in-process backend, so a server stopped and started again on the same port (a store outage) still
holds them."""

from __future__ import annotations

import contextlib
import logging
import urllib.request
from collections.abc import Iterator

from moto.server import ThreadedMotoServer

BUCKET = "kpca-tests"


class S3Server:
    """A moto S3 server on a free loopback port, with `BUCKET` created; `stop` and `start` again (same port)."""

    def __init__(self):
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # not a line per request on the caller's log
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        self.host, self.port = self._server.get_host_and_port()
        self.endpoint = f"http://{self.host}:{self.port}"
        urllib.request.urlopen(urllib.request.Request(f"{self.endpoint}/{BUCKET}", method="PUT"), timeout=10).read()

    def environment(self) -> dict:
        """The variables an S3 client reads to reach it (any credentials: moto checks none)."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": "kpca-test",
                "AWS_SECRET_ACCESS_KEY": "kpca-test", "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}

    def stop(self) -> None:
        self._server.stop()

    def start(self) -> None:
        """Serve again on the same port (the objects kept)."""
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()


@contextlib.contextmanager
def s3_server() -> Iterator[S3Server]:
    """A running `S3Server`, stopped on exit."""
    server = S3Server()
    try:
        yield server
    finally:
        with contextlib.suppress(Exception):
            server.stop()
