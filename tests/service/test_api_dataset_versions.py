"""``/v1/datasets`` over a real server: CSV uploads, versions, resumed and concurrent uploads."""

from __future__ import annotations

import socket
import threading
from urllib.parse import urlparse

import httpx
import numpy as np
import pytest

from tests.api_checks import error_message, npy_bytes
from tests.store_checks import version_checksum

NPY = {"Content-Type": "application/octet-stream"}
CSV = {"Content-Type": "text/csv"}


def csv_bytes(rows, header: str | None = None) -> bytes:
    lines = [] if header is None else [header]
    lines += [",".join(repr(float(v)) for v in row) for row in rows]
    return ("\n".join(lines) + "\n").encode()

def create(api, name: str, n_features: int = 4, dtype: str = "float32") -> dict:
    response = api.post("/v1/datasets", json={"name": name, "n_features": n_features, "dtype": dtype})
    assert response.status_code == 201, response.text
    return response.json()


def put(api, name: str, index: int, content: bytes, headers=CSV) -> httpx.Response:
    return api.put(f"/v1/datasets/{name}/chunks/{index}", content=content, headers=headers)


# ------------------------------------------------------------------------ CSV


def test_csv_upload_with_header_blank_lines_and_crlf(api, rng):
    create(api, "csvok")
    first = rng.standard_normal((5, 4))
    second = rng.integers(-50, 50, size=(3, 4)).astype(np.float64)
    crlf = csv_bytes(first[:2]).replace(b"\n", b"\r\n")
    body = b"x1,x2,x3,x4\r\n" + crlf + b"\r\n   \r\n" + csv_bytes(first[2:])
    response = put(api, "csvok", 0, body)
    assert response.status_code == 200, response.text
    assert (response.json()["chunks"], response.json()["n_rows"]) == ([0], 5)
    # no header, quoted fields, a charset parameter, no final newline
    quoted = "\n".join(",".join(f'"{v:g}"' for v in row) for row in second).encode()
    response = put(api, "csvok", 1, quoted, headers={"Content-Type": "text/csv; charset=utf-8"})
    assert response.status_code == 200, response.text
    committed = api.post("/v1/datasets/csvok/commit", json={}).json()
    assert committed["n_rows"] == 8
    # values parsed exactly, then cast to float32
    assert committed["checksum"] == version_checksum(first, second, dtype=np.float32)
    again = put(api, "csvok", 0, csv_bytes(first))  # same rows without the header: a no-op
    assert again.status_code == 200, again.text
    assert again.json()["checksum"] == committed["checksum"]


@pytest.mark.parametrize(
    "body, fragments",
    [
        (b"1,2,3,4\n5,6,x,8\n", ["line 2", "column 3", "'x'"]),
        (b"a,b,c,d\n1,2,3,4\n\n1,2,3,4e\n", ["line 4", "column 4", "'4e'"]),
        (b"1,2,3,4,\n", ["line 1", "column 5", "''"]),
        (b"1.0,2.O,3.0,4.0\n5,6,7,8\n", ["line 1", "'2.O'"]),  # a typo in row 1 is no header
        (b"1,2,3,4\n\"5,6,7,8\n", ["line"]),  # an unterminated quote
        (b"\xff\xfe1,2,3,4\n", ["UTF-8"]),
    ],
)
def test_csv_unparseable_is_400_on_body(api, body, fragments):
    name = "csvbad"
    if api.get(f"/v1/datasets/{name}").status_code == 404:
        create(api, name)
    message = error_message(put(api, name, 0, body), 400, "bad_request", "body")
    for fragment in fragments:
        assert fragment in message, message
    assert api.get(f"/v1/datasets/{name}").json()["chunks"] == []


def test_csv_ragged_is_422_on_rows_naming_the_line(api):
    create(api, "csvragged")
    message = error_message(put(api, "csvragged", 0, b"h1,h2,h3,h4\n1,2,3,4\n\n5,6,7\n"), 422, "invalid", "rows")
    assert message == "CSV rows are ragged: line 4 has 3 values, line 2 (the first row) has 4"
    message = error_message(put(api, "csvragged", 0, b"1,2,3,4\n1,2,3,4,5\n"), 422, "invalid", "rows")
    assert "line 2 has 5 values" in message


@pytest.mark.parametrize(
    "body, fragment",
    [
        (b"1,2,3,4\n\n5,nan,7,8\n9,10,11,inf\n", "CSV line 3, column 2 is 'nan'"),  # the file's lines (issue 58)
        (b"a,b,c,d\n1,2,3,-Infinity\n", "CSV line 2, column 4 is '-Infinity'"),
        (b"1,2,3,4\n1,2,3,1e39\n", "row 1 contains values too large for float32"),
        (b"1,2,3\n4,5,6\n", "expected 4 columns, got 3"),
        (b"", "empty chunk"),
        (b"\n\n  \n", "empty chunk"),
        (b"x1,x2,x3,x4\n", "empty chunk"),
    ],
)
def test_csv_contents_refused_by_the_store(api, body, fragment):
    name = "csvstore"
    if api.get(f"/v1/datasets/{name}").status_code == 404:
        create(api, name)
    message = error_message(put(api, name, 0, body), 422, "invalid", "rows")
    assert fragment in message, message
    assert api.get(f"/v1/datasets/{name}").json()["chunks"] == []


def test_npy_integers_beyond_2_53_are_cast_not_refused(api):
    create(api, "bigints", n_features=2, dtype="float64")
    huge = np.array([[2**64 - 1, 2**53 + 1], [0, 1]], dtype=np.uint64)
    response = put(api, "bigints", 0, npy_bytes(huge), headers=NPY)
    assert response.status_code == 200, response.text
    signed = np.array([[-(2**63), 2**63 - 1]], dtype=np.int64)
    assert put(api, "bigints", 1, npy_bytes(signed), headers=NPY).status_code == 200
    committed = api.post("/v1/datasets/bigints/commit", json={}).json()
    expected = [huge.astype(np.float64), signed.astype(np.float64)]
    assert committed["checksum"] == version_checksum(*expected, dtype=np.float64)
    assert expected[0][0, 1] == 2.0**53  # documented rounding beyond 2**53


# ------------------------------------------------------------------- versions


def test_versions_through_http(api, rng):
    create(api, "grow")
    blocks = [rng.standard_normal((m, 4)) for m in (6, 4, 5, 2)]
    put(api, "grow", 0, npy_bytes(blocks[0]), headers=NPY).raise_for_status()
    api.put("/v1/datasets/grow/chunks/1", json={"rows": blocks[1].tolist()}).raise_for_status()
    v1 = api.post("/v1/datasets/grow/commit", json={}).json()
    assert (v1["version"], v1["n_rows"], v1["chunks"], v1["staged"]) == (1, 10, [0, 1], [])
    assert v1["checksum"] == version_checksum(blocks[0], blocks[1], dtype=np.float32)

    staged = put(api, "grow", 2, csv_bytes(blocks[2])).json()
    assert (staged["status"], staged["version"], staged["n_rows"], staged["staged"]) == ("ready", 1, 10, [2])
    put(api, "grow", 3, npy_bytes(blocks[3]), headers=NPY).raise_for_status()
    assert api.get("/v1/datasets/grow").json()["staged"] == [2, 3]

    v2 = api.post("/v1/datasets/grow/commit", json={})
    assert v2.status_code == 200, v2.text
    v2 = v2.json()
    assert (v2["status"], v2["version"], v2["n_rows"]) == ("ready", 2, 17)
    assert (v2["chunks"], v2["staged"]) == ([0, 1, 2, 3], [])
    assert v2["checksum"] == version_checksum(*blocks, dtype=np.float32) != v1["checksum"]
    assert v2["versions"] == [
        {"version": 1, "n_rows": 10, "n_chunks": 2, "checksum": v1["checksum"],
         "committed_at": v1["committed_at"]},
        {"version": 2, "n_rows": 17, "n_chunks": 4, "checksum": v2["checksum"],
         "committed_at": v2["committed_at"]},
    ]
    assert api.get("/v1/datasets/grow").json() == v2
    assert api.post("/v1/datasets/grow/commit", json={}).json() == v2  # nothing staged: a no-op

    # committed chunks: same rows are a no-op, other rows a 409 that says what to do
    assert put(api, "grow", 1, csv_bytes(blocks[1])).json() == v2
    message = error_message(put(api, "grow", 2, csv_bytes(blocks[1])), 409, "conflict", "index")
    assert message == ("chunk 2 of data set 'grow' is part of committed version 2 and cannot change; "
                       "append new rows with chunk index >= 4")
    # a gap after the latest version is named
    put(api, "grow", 6, csv_bytes(blocks[3])).raise_for_status()
    message = error_message(api.post("/v1/datasets/grow/commit", json={}), 422, "invalid", "chunks")
    assert message.startswith("missing chunk indices [4, 5]; version 2 holds chunks 0..3")
    listed = {d["name"]: d for d in api.get("/v1/datasets").json()["datasets"]}
    assert listed["grow"]["version"] == 2 and listed["grow"]["staged"] == [6]


def test_resume_after_interrupted_upload(api, rng):
    create(api, "resume")
    blocks = [rng.standard_normal((3 + i, 4)) for i in range(4)]
    for index in (0, 1, 3):
        put(api, "resume", index, npy_bytes(blocks[index]), headers=NPY).raise_for_status()

    # chunk 2 dies mid-body: the server must not keep any part of it
    url = urlparse(str(api.base_url))
    payload = npy_bytes(blocks[2])
    with socket.create_connection((url.hostname, url.port), timeout=10) as raw:
        raw.sendall(
            f"PUT /v1/datasets/resume/chunks/2 HTTP/1.1\r\nHost: {url.hostname}\r\n"
            f"Content-Type: application/octet-stream\r\nContent-Length: {len(payload)}\r\n\r\n".encode()
            + payload[: len(payload) // 2]
        )
    meta = api.get("/v1/datasets/resume").json()
    assert (meta["status"], meta["chunks"], meta["staged"]) == ("open", [0, 1, 3], [0, 1, 3])
    assert meta["n_rows"] == 3 + 4 + 6

    message = error_message(api.post("/v1/datasets/resume/commit", json={}), 422, "invalid", "chunks")
    assert message == "missing chunk indices [2]; upload them and commit again"
    # the client re-sends everything it is unsure of: committed-to-be chunks are no-ops
    for index in range(4):
        put(api, "resume", index, npy_bytes(blocks[index]), headers=NPY).raise_for_status()
    committed = api.post("/v1/datasets/resume/commit", json={})
    assert committed.status_code == 200, committed.text
    committed = committed.json()
    assert (committed["status"], committed["chunks"], committed["n_rows"]) == ("ready", [0, 1, 2, 3], 18)
    assert committed["checksum"] == version_checksum(*blocks, dtype=np.float32)


def test_concurrent_uploads_to_two_sets(server, api, rng):
    blocks = {name: [rng.standard_normal((20 + i, 4)) for i in range(8)] for name in ("left", "right")}
    for name in blocks:
        create(api, name)
    errors: list[str] = []
    start = threading.Barrier(4)

    def upload(name: str, indices: list[int]) -> None:
        with httpx.Client(base_url=server, timeout=60.0) as client:
            start.wait()
            for index in indices:
                for encoding in ("npy", "csv"):  # the second send is a retry in another encoding: a no-op
                    rows = blocks[name][index]
                    if encoding == "npy":
                        response = put(client, name, index, npy_bytes(rows), headers=NPY)
                    else:
                        response = put(client, name, index, csv_bytes(rows))
                    if response.status_code != 200:
                        errors.append(f"{name}/{index}/{encoding}: {response.status_code} {response.text}")

    threads = [
        threading.Thread(target=upload, args=(name, indices))
        for name in blocks
        for indices in ([0, 2, 4, 6], [7, 5, 3, 1])
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    for name, chunks in blocks.items():
        meta = api.post(f"/v1/datasets/{name}/commit", json={}).json()
        assert meta["chunks"] == list(range(8)) and meta["n_rows"] == sum(c.shape[0] for c in chunks)
        assert meta["checksum"] == version_checksum(*chunks, dtype=np.float32)
