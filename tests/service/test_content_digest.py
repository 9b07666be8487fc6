"""``Content-Digest`` (RFC 9530) of a chunk's body, checked before it is parsed (issue 58, item 10): the header's
forms, and a real server refusing a body that does not match it on every body type, storing nothing."""

from __future__ import annotations

import base64
import hashlib

import pytest

from service.content_digest import check_content_digest, content_digest, parse_content_digest
from service.errors import ApiError
from tests.api_checks import assert_error, npy_bytes

BODY = b"x1,x2\n0.5,1.25\n"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def test_the_header_forms_that_are_read():
    sha256, sha512 = hashlib.sha256(BODY).digest(), hashlib.sha512(BODY).digest()
    assert content_digest(BODY) == f"sha-256=:{_b64(sha256)}:"
    both = f"sha-512=:{_b64(sha512)}:, SHA-256=:{_b64(sha256)}:;note=1"
    assert parse_content_digest(both) == {"sha-512": sha512, "sha-256": sha256}
    check_content_digest(both, BODY)
    check_content_digest(None, BODY)  # no header: nothing checked


@pytest.mark.parametrize("header, words", [
    (f"sha-256=:{_b64(hashlib.sha256(BODY + b'!').digest())}:", "does not match"),
    (f"sha-256=:{_b64(hashlib.sha256(BODY).digest())}:, sha-512=:{_b64(b'0' * 64)}:", "sha-512 digest does not"),
    (f"md5=:{_b64(hashlib.md5(BODY).digest())}:", "not one of sha-256, sha-512"),
    ("sha-256=abc", "is not name=:base64:"),
    ("sha-256=:not base64!:", "is not base64"),
])
def test_a_digest_that_does_not_hold_is_a_400_on_the_header(header, words):
    with pytest.raises(ApiError) as refused:
        check_content_digest(header, BODY)
    assert refused.value.status_code == 400 and refused.value.field == "content-digest"
    assert words in refused.value.message


def test_a_chunk_whose_digest_differs_is_refused_and_nothing_is_stored(api, rng):
    assert api.post("/v1/datasets", json={"name": "digested", "n_features": 2}).status_code == 201
    rows = rng.normal(size=(6, 2))
    bodies = {"application/octet-stream": npy_bytes(rows), "text/csv": BODY,
              "application/json": b'{"rows": [[1.0, 2.0]]}'}
    for index, (media_type, body) in enumerate(bodies.items()):
        headers = {"Content-Type": media_type, "Content-Digest": content_digest(body + b" ")}
        assert_error(api.put(f"/v1/datasets/digested/chunks/{index}", content=body, headers=headers),
                     400, "bad_request", "content-digest")
        assert api.get("/v1/datasets/digested").json()["staged"] == list(range(index))  # nothing stored
        headers["Content-Digest"] = content_digest(body, "sha-512")
        assert api.put(f"/v1/datasets/digested/chunks/{index}", content=body, headers=headers).status_code == 200
    assert api.get("/v1/datasets/digested").json()["staged"] == [0, 1, 2]
