"""A request body checked against the digest its client sent: the ``Content-Digest`` header (RFC 9530).

``Content-Digest: sha-256=:<base64 of the SHA-256 of the body as sent>:`` (or ``sha-512``; several entries
separated by commas, each checked). A body altered on its way (a proxy, a broken connection resumed by hand) is
then refused instead of stored. The header is optional; without it nothing is checked.

The header is a structured-field dictionary (RFC 8941) whose values are byte sequences; this module reads only
that form (``key=:base64:``, parameters after ``;`` ignored) instead of taking a structured-field parser as a
dependency for one header.
"""

from __future__ import annotations

import base64
import binascii
import hashlib

from service.errors import ApiError

HEADER = "content-digest"
#: RFC 9530's algorithm names that are checked, with hashlib's names; others (md5, sha, unixsum ...) are refused
ALGORITHMS = {"sha-256": "sha256", "sha-512": "sha512"}
DESCRIPTION = ("RFC 9530 digest of the body as sent, e.g. sha-256=:<base64 of its SHA-256>: (sha-256 or sha-512); "
               "a body that does not match is a 400 on content-digest and nothing is stored")


def _refused(message: str) -> ApiError:
    return ApiError(400, "bad_request", message, HEADER)


def parse_content_digest(header: str) -> dict[str, bytes]:
    """``{algorithm: digest}`` of a ``Content-Digest`` header; a 400 on ``content-digest`` if an entry is not
    ``name=:base64:`` or names no algorithm of `ALGORITHMS`. O(len(header))."""
    digests: dict[str, bytes] = {}
    for entry in header.split(","):
        key, _, value = entry.split(";", 1)[0].strip().partition("=")
        key = key.strip().lower()
        if not (value.startswith(":") and value.endswith(":") and len(value) >= 2):
            raise _refused(f"Content-Digest entry {entry.strip()[:60]!r} is not name=:base64:")
        if key not in ALGORITHMS:
            raise _refused(f"Content-Digest algorithm {key[:30]!r} is not one of {', '.join(ALGORITHMS)}")
        try:
            digests[key] = base64.b64decode(value[1:-1], validate=True)
        except (binascii.Error, ValueError):
            raise _refused(f"Content-Digest {key} is not base64") from None
    return digests


def check_content_digest(header: str | None, body: bytes | bytearray) -> None:
    """Nothing if ``header`` is None or every digest it gives is the body's; else a 400 on ``content-digest``
    naming the algorithm that differs. Cost: one hash of the body per algorithm given."""
    if header is None:
        return
    for key, expected in parse_content_digest(header).items():
        if hashlib.new(ALGORITHMS[key], body).digest() != expected:
            raise _refused(f"the body's {key} digest does not match Content-Digest: it was altered or cut on its "
                           "way; send it again")


def content_digest(body: bytes | bytearray, algorithm: str = "sha-256") -> str:
    """The ``Content-Digest`` header value of ``body`` (for clients and tests). O(len(body))."""
    raw = hashlib.new(ALGORITHMS[algorithm], body).digest()
    return f"{algorithm}=:{base64.b64encode(raw).decode('ascii')}:"
