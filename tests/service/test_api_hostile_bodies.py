"""Hostile request bodies and the pages' headers (issue 30, item 10; real server, real client).

JSON nested 10^5 deep, or holding an integer of 10^6 digits, is refused with the reason (it was "JSON
must be UTF-8 text", the reason for another failure); every page says it must not be framed and
carries a Content-Security-Policy that allows only its own scripts, styles and API.
"""

from __future__ import annotations

import pytest

from tests.api_checks import assert_error

SERVER_SETTINGS = {"max_body_bytes": 4 << 20}


@pytest.mark.parametrize("route", ["/v1/datasets", "/v1/models"])
def test_json_nested_too_deep_says_so(api, route):
    body = '{"name": ' + "[" * 100_000 + "]" * 100_000 + "}"
    r = api.post(route, content=body, headers={"Content-Type": "application/json"})
    message = assert_error(r, 400, "bad_request", "body")["message"]
    assert "nested too deep" in message and "UTF-8" not in message


@pytest.mark.parametrize("route", ["/v1/datasets", "/v1/models"])
def test_an_integer_of_a_million_digits_says_so(api, route):
    body = '{"name": "x", "n_features": ' + "7" * 1_000_000 + "}"
    r = api.post(route, content=body, headers={"Content-Type": "application/json"})
    message = assert_error(r, 400, "bad_request", "body")["message"]
    assert "integer has more digits" in message and "UTF-8" not in message


def test_a_body_that_is_not_utf8_still_says_utf8(api):
    r = api.post("/v1/datasets", content=b'{"name": "\xff\xfe"}', headers={"Content-Type": "application/json"})
    assert "UTF-8" in assert_error(r, 400, "bad_request", "body")["message"]


def test_chunk_rows_nested_too_deep_or_too_long_a_number(api):
    api.post("/v1/datasets", json={"name": "deep", "n_features": 1, "dtype": "float64"}).raise_for_status()
    for body in ('{"rows": ' + "[" * 100_000 + "]" * 100_000 + "}", '{"rows": [[' + "1" * 1_000_000 + "]]}"):
        r = api.put("/v1/datasets/deep/chunks/0", content=body, headers={"Content-Type": "application/json"})
        message = assert_error(r, 400, "bad_request", "body")["message"]
        assert "UTF-8" not in message and ("recursion" in message or "number out of range" in message)


@pytest.mark.parametrize("page", ["/", "/docs"])
def test_pages_refuse_framing_and_carry_a_content_security_policy(api, page):
    r = api.get(page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert r.headers["x-frame-options"] == "DENY"
    policy = {part.split()[0]: part.split()[1:] for part in r.headers["content-security-policy"].split("; ")}
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["script-src"] == ["'self'"] and policy["default-src"] == ["'none'"]
    assert "'unsafe-inline'" not in r.headers["content-security-policy"]
