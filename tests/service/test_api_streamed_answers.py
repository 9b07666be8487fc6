"""Large serving answers are streamed (issue 30, item 2): ``/project``, ``/reconstruct`` and
``/denoise`` answers above ``stream_response_values`` numbers go out chunked, a block of rows encoded at a
time in a worker thread, byte for byte what the whole JSON text would have been. Real server, real
client; the encoder's memory measured with tracemalloc."""

from __future__ import annotations

import io
import json
import tracemalloc

import numpy as np
import pytest

from service.responses import STREAM_BLOCK_VALUES, json_rows_stream
from service.schemas.serving import DenoiseResponse, ProjectResponse, ReconstructResponse
from tests.api_checks import upload_rows, wait_for_fit

SERVER_SETTINGS = {"stream_response_values": 10_000}


def whole(model, **fields) -> bytes:
    """The answer as one JSON text, as FastAPI encodes a response model (pydantic, by alias)."""
    return model(**fields).model_dump_json(by_alias=True).encode()


@pytest.fixture(scope="module")
def six_lin(api) -> str:
    """A linear model of 40 rows of 6 values, fitted once for the module's tests (each may run alone)."""
    upload_rows(api, "six", np.random.default_rng(0).normal(size=(40, 6)))
    api.post("/v1/models", json={"name": "six-lin", "dataset": "six", "n_components": 4,
                                 "kernel": {"type": "linear"}, "solver": "exact"}).raise_for_status()
    assert wait_for_fit(api, "six-lin")["status"] == "completed"
    return "six-lin"


def test_a_large_projection_is_chunked_and_byte_identical_to_the_whole_answer(api, six_lin):
    rng = np.random.default_rng(0)
    rng.normal(size=(40, 6))  # the model's rows (`six_lin`): the same draws as before the fixture
    rows = rng.normal(size=(20_000, 6))  # 80,000 numbers out: about 5 blocks
    with api.stream("POST", "/v1/models/six-lin/project", json={"rows": rows.tolist()}) as r:
        pieces = [piece for piece in r.iter_raw()]
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        assert r.headers.get("transfer-encoding") == "chunked" and "content-length" not in r.headers
    streamed = b"".join(pieces)
    # the same rows in parts small enough to be answered whole (with a Content-Length)
    parts = []
    for part in np.array_split(rows, 10):
        small = api.post("/v1/models/six-lin/project", json={"rows": part.tolist()})
        assert small.status_code == 200 and "content-length" in small.headers
        parts += small.json()["components"]
    assert streamed == whole(ProjectResponse, components=parts)
    assert len(parts) == 20_000 and 4 * 20_000 > 4 * STREAM_BLOCK_VALUES


def test_large_reconstructions_and_denoisings_are_streamed_whole(api, six_lin):
    rows = np.random.default_rng(1).normal(size=(3_000, 6))  # 18,000 numbers: two blocks
    for route, body, model in [("reconstruct", {"rows": rows.tolist()}, ReconstructResponse),
                               ("denoise", {"rows": rows.tolist(), "tune": "off"}, DenoiseResponse)]:
        r = api.post(f"/v1/models/six-lin/{route}", json=body)
        assert r.status_code == 200, r.text[:300]
        assert r.headers.get("transfer-encoding") == "chunked", (route, r.headers)
        answer = r.json()
        assert r.content == whole(model, **answer), route  # the whole answer's encoding, keys and all
        assert np.asarray(answer["rows"]).shape == rows.shape


def test_the_streamed_encoder_holds_one_block_not_the_answer():
    values = np.random.default_rng(2).normal(size=(200_000, 8))  # 12.8 MB of float64
    expected = whole(DenoiseResponse, rows=values.tolist(), chosen={"rank": 3}, noise=0.5, steps=[{"s": 1.0}])
    tracemalloc.start()
    try:
        size = 0
        for piece in json_rows_stream(DenoiseResponse, "rows", values,
                                      {"chosen": {"rank": 3}, "noise": 0.5, "steps": [{"s": 1.0}]}):
            size += len(piece)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert size == len(expected)
    assert b"".join(json_rows_stream(DenoiseResponse, "rows", values, {"chosen": {"rank": 3}, "noise": 0.5,
                                                                       "steps": [{"s": 1.0}]})) == expected
    # the whole answer is 1.6 million Python floats (over 50 MB) and its 30 MB of text at once
    assert peak < 4 * 2**20, f"peak {peak / 2**20:.1f} MiB while streaming {len(expected) / 2**20:.0f} MiB"


def test_rows_come_as_npy_bytes_when_asked(api, six_lin):
    """``Accept: application/octet-stream`` (or ``format=npy``): the JSON answer's rows as one ``.npy``
    file, float64 bit for bit, with its Content-Length; streamed above a megabyte; JSON otherwise."""
    rows = np.random.default_rng(3).normal(size=(300, 6))
    npy = {"Accept": "application/octet-stream"}
    for route, body, field in [("project", {"rows": rows.tolist()}, "components"),
                               ("reconstruct", {"rows": rows.tolist()}, "rows"),
                               ("denoise", {"rows": rows.tolist(), "tune": "off"}, "rows")]:
        as_json = api.post(f"/v1/models/six-lin/{route}", json=body)
        assert as_json.headers["content-type"] == "application/json", route
        r = api.post(f"/v1/models/six-lin/{route}", json=body, headers=npy)
        assert r.status_code == 200 and r.headers["content-type"] == "application/octet-stream", (route, r.text[:200])
        assert int(r.headers["content-length"]) == len(r.content)
        others = {key: value for key, value in as_json.json().items() if key != field}  # /denoise: null fields
        assert json.loads(r.headers.get("x-kpca-fields", "{}")) == others, route
        answer = np.load(io.BytesIO(r.content), allow_pickle=False)
        assert answer.dtype == np.float64 and np.array_equal(answer, np.asarray(as_json.json()[field])), route
        assert api.post(f"/v1/models/six-lin/{route}?format=npy", json=body).content == r.content
        both = api.post(f"/v1/models/six-lin/{route}", json=body,
                        headers={"Accept": "application/json, application/octet-stream"})
        assert both.headers["content-type"] == "application/json"  # JSON whenever the client takes it
    many = np.random.default_rng(4).normal(size=(50_000, 6))  # 50,000 x 4 float64: 1.6 MB, streamed
    with api.stream("POST", "/v1/models/six-lin/project", json={"rows": many.tolist()}, headers=npy) as r:
        pieces = list(r.iter_raw())
        assert r.status_code == 200 and int(r.headers["content-length"]) == sum(map(len, pieces))
    assert len(pieces) > 1
    streamed = np.load(io.BytesIO(b"".join(pieces)), allow_pickle=False)
    assert streamed.shape == (50_000, 4)
    assert np.array_equal(streamed[:1000], np.asarray(api.post("/v1/models/six-lin/project", json={
        "rows": many[:1000].tolist()}).json()["components"]))


def test_a_tuned_denoising_as_npy_carries_its_other_fields_in_a_header(api, six_lin):
    rows = np.random.default_rng(5).normal(size=(200, 6))
    as_json = api.post("/v1/models/six-lin/denoise", json={"rows": rows.tolist(), "tune": "auto"})
    assert as_json.status_code == 200, as_json.text[:300]
    r = api.post("/v1/models/six-lin/denoise?format=npy", json={"rows": rows.tolist(), "tune": "auto"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/octet-stream"
    fields = json.loads(r.headers["x-kpca-fields"])
    expected = as_json.json()
    assert sorted(fields) == sorted(key for key in expected if key != "rows")
    assert fields["chosen"] == expected["chosen"] and fields["noise"] == expected["noise"]
    assert np.array_equal(np.load(io.BytesIO(r.content), allow_pickle=False), np.asarray(expected["rows"]))
