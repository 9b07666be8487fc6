"""PNG and tar answers as ``application/octet-stream`` to a client that asks for only that (issue 58, item 10):
what `answer_media_type` picks from an ``Accept`` header, and the document declaring both types."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from service import Settings, create_app
from service.binary_answers import answer_media_type


def _request(accept: str | None) -> Request:
    headers = [] if accept is None else [(b"accept", accept.encode())]
    return Request({"type": "http", "method": "GET", "path": "/", "headers": headers})


@pytest.mark.parametrize("accept, sent", [
    (None, "image/png"), ("*/*", "image/png"), ("image/png", "image/png"),
    ("application/octet-stream", "application/octet-stream"),
    ("application/octet-stream, image/png;q=0.5", "image/png"), ("application/octet-stream, image/*", "image/png"),
])
def test_the_type_sent_follows_accept(accept, sent):
    assert answer_media_type(_request(accept), "image/png") == sent


def test_the_document_declares_both_types_for_every_png_and_tar(tmp_path):
    document = create_app(Settings(data_dir=tmp_path, scheduler=None, n_workers=1)).openapi()
    binary = 0
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            bodies = [operation.get("requestBody", {}).get("content", {})]
            bodies += [answer.get("content", {}) for answer in operation.get("responses", {}).values()]
            for content in bodies:
                if "image/png" in content or "application/x-tar" in content:
                    binary += 1
                    assert "application/octet-stream" in content, (method, path)
    assert binary >= 10  # 3 PNG bodies, 1 tar body, 6 PNG answers, 1 tar answer
