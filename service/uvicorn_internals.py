"""The one place the service leans on a framework's internals: uvicorn's httptools protocol, which
`service.health_protocol` and `service.http_protocol` subclass.

uvicorn has no public hook to answer a request from the parser's callbacks (``/healthz`` first), to
time a request's headers, or to end a connection instead of draining a body after an early answer; its
``http=`` setting takes a protocol class (public), and these classes extend uvicorn's own. What they
use of it is listed below, and ``tests/service/test_framework_internals.py`` asserts each item on the
installed uvicorn, so that the first version that renames or drops one fails there, by name, before a
connection misbehaves. pyproject.toml pins uvicorn to the checked range (below the minor after the last
version in `CHECKED_ON`), and that test holds the pin to `CHECKED_ON`: an upgrade is a deliberate change of
both, made after this list's test passes on the new version.

Checked on uvicorn 0.36.0, the lower bound in pyproject.toml (the first whose ``http=`` takes a protocol
class by its import string, as ``python -m service`` gives it), and on 0.55.0, installed, by the test suite
(tests/service/test_health_protocol.py, test_slow_clients.py and this list's own test); by reading the
source, every release from 0.21.0 (when ``app_state``, the lifespan state, came) to 0.51.0 has them.

Of `HttpToolsProtocol`:

* the hooks overridden (`HOOKS`): ``connection_made``, ``connection_lost``, ``data_received`` (asyncio's),
  ``on_message_begin``, ``on_headers_complete``, ``on_body``, ``on_message_complete`` (httptools' parser
  callbacks) and ``on_response_complete`` (a cycle's end);
* the attributes read (`ATTRIBUTES`): ``parser`` (an ``httptools.HttpRequestParser``: ``get_method``,
  ``get_http_version``, ``should_keep_alive``, ``should_upgrade``), ``url``, ``headers`` (lower-case
  ``(name, value)`` byte pairs), ``cycle`` (the request in flight: ``response_complete``, ``more_body``,
  ``transport``), ``pipeline`` (cycles queued behind it), ``server_state`` (``total_requests``,
  ``default_headers``), ``transport``, ``flow`` (``resume_reading``), ``loop`` and ``app_state`` (the
  lifespan state);
* the method called (`METHODS`): ``_unset_keepalive_if_required``;
* `STATUS_LINE`: a status code's status line, as bytes.
"""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

__all__ = ["ATTRIBUTES", "CHECKED_ON", "HOOKS", "METHODS", "STATUS_LINE", "HttpToolsProtocol"]

#: the uvicorn versions this list was checked on (module docstring)
CHECKED_ON = ("0.36.0", "0.55.0")
HOOKS = ("connection_made", "connection_lost", "data_received", "on_message_begin", "on_headers_complete",
         "on_body", "on_message_complete", "on_response_complete")
ATTRIBUTES = ("parser", "url", "headers", "cycle", "pipeline", "server_state", "transport", "flow", "loop",
              "app_state")
METHODS = ("_unset_keepalive_if_required",)
