"""A loopback HTTP proxy in front of the tests' S3 server (moto, `bench._s3_server`) that can fail on demand: stop
listening for a while (the store down: clients see connections refused, as from a stopped server) and answer
``403 AccessDenied`` to writes (a store that refuses them: a quota, a policy). Everything else is passed through
unchanged. Started and stopped by the test that uses it."""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_DENIED = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied'
           b'</Message></Error>')
_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade"}


class FaultyProxy:
    """Forward ``http://127.0.0.1:{port}`` to ``upstream`` (``host``, ``port``); `down` and `refuse_writes`."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self.refusing = False
        self._server: ThreadingHTTPServer | None = None
        self.port = 0
        self.start()
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def _handler(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def end_headers(self) -> None:
                self.send_header("Connection", "close")  # no kept connection outlives a `stop`
                self.close_connection = True
                super().end_headers()

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if proxy.refusing and self.command in ("PUT", "POST", "DELETE"):
                    self.send_response(403)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(_DENIED)))
                    self.end_headers()
                    self.wfile.write(_DENIED)
                    return
                upstream = http.client.HTTPConnection(*proxy.upstream, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    answer = upstream.getresponse()
                    data = answer.read()
                finally:
                    upstream.close()
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in _HOP and key.lower() != "content-length":
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        return Handler

    def start(self) -> None:
        """Listen (again: on the same port after `stop`)."""
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True, name="s3-proxy").start()

    def stop(self) -> None:
        """Stop listening: new connections are refused until `start`."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def refuse_writes(self, refusing: bool = True) -> None:
        """Answer 403 AccessDenied to every PUT, POST and DELETE (``refusing``), or pass them through again."""
        self.refusing = refusing
