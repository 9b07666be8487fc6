"""A lean HTTP/1.1 client for the load generator: one keep-alive connection over the standard library's
`http.client`, the body sent as given and the answer read whole.

`bench/load.py` runs its clients on the same cores as the service it measures. httpx costs about three
times the standard library's CPU per request (about 0.9 against 0.3 ms for a small GET on an idle
machine), and under load that CPU is taken from the service; clients on other machines take none.
`bench/load.py --client httpx` still measures with httpx.
"""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

JSON_HEADERS = {"Content-Type": "application/json"}


class LeanResponse:
    """What `LeanClient.request` answers: ``status_code``, ``is_success`` and ``text``, as httpx names them
    (what bench/load.py's clients read)."""

    __slots__ = ("status_code", "content")

    def __init__(self, status_code: int, content: bytes):
        self.status_code = status_code
        self.content = content

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    @property
    def text(self) -> str:
        return self.content.decode(errors="replace")


class LeanClient:
    """Requests to ``base_url`` (``http://host:port``) on one keep-alive connection, opened again after a
    failure. A transport failure raises `OSError` or `http.client.HTTPException` (the caller counts it); it
    is not retried. Not thread-safe: one client per thread. Cost per request: one ``send`` of headers and
    body, the answer's parse by `http.client`."""

    def __init__(self, base_url: str, timeout: float = 60.0):
        parts = urlsplit(base_url)
        self.host, self.port, self.timeout = parts.hostname, parts.port, timeout
        self.connection: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, json_body=None) -> LeanResponse:
        """``method path`` with ``json_body`` (any JSON value, or None for no body) as JSON; the answer."""
        if self.connection is None:
            self.connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        body = None if json_body is None else json.dumps(json_body).encode()
        try:
            self.connection.request(method, path, body=body, headers=JSON_HEADERS if body is not None else {})
            answer = self.connection.getresponse()
            return LeanResponse(answer.status, answer.read())
        except (OSError, http.client.HTTPException):
            self.close()
            raise

    def get(self, path: str) -> LeanResponse:
        return self.request("GET", path)

    def post(self, path: str, json=None) -> LeanResponse:
        return self.request("POST", path, json)

    def put(self, path: str, json=None) -> LeanResponse:
        return self.request("PUT", path, json)

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def __enter__(self) -> LeanClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
