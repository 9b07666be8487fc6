"""Rows sent as ``.npy`` bytes to the serving routes (issue 30: bodies parsed without blowing up):
``Content-Type: application/octet-stream`` on ``/project``, ``/reconstruct`` and ``/denoise`` (and a
clustering's ``/predict``, in test_api_clusterings), the other fields as a JSON object in the header
``X-KPCA-Fields``. The answers equal the JSON requests' bit for bit; bad arrays and bad headers are
4xx naming the field. Real server, real client."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from tests.api_checks import assert_error, error_message, npy_bytes, upload_rows, wait_for_fit

NPY = {"Content-Type": "application/octet-stream"}
ROWS = np.random.default_rng(7).normal(size=(30, 5))


@pytest.fixture(scope="module")
def model(api):
    """A Gaussian-kernel model (exact) of 60 rows of 5 columns."""
    upload_rows(api, "five", np.random.default_rng(6).normal(size=(60, 5)))
    api.post("/v1/models", json={"name": "five-rbf", "dataset": "five", "n_components": 3, "solver": "exact",
                                 "kernel": {"type": "gaussian", "sigma": 2.0}}).raise_for_status()
    assert wait_for_fit(api, "five-rbf")["status"] == "completed"
    return "/v1/models/five-rbf"


def post_npy(api, url: str, rows: np.ndarray | bytes, fields: dict | str | None = None, **headers):
    """POST ``rows`` (an array, or bytes as they are) as ``.npy`` bytes, ``fields`` in ``X-KPCA-Fields``."""
    if fields is not None:
        headers["X-KPCA-Fields"] = fields if isinstance(fields, str) else json.dumps(fields)
    body = rows if isinstance(rows, bytes) else npy_bytes(rows)
    return api.post(url, content=body, headers={**NPY, **headers})


@pytest.mark.parametrize("route, fields, answer", [
    ("project", None, "components"),
    ("reconstruct", {"method": "fixed-point", "options": {"n_iter": 5}}, "rows"),
    ("denoise", {"tune": "off", "method": "kwok-tsang"}, "rows"),
    ("denoise", {"tune": "auto", "n_components": 2}, "rows"),
])
def test_npy_rows_answer_as_the_same_json_request(api, model, route, fields, answer):
    as_json = api.post(f"{model}/{route}", json={"rows": ROWS.tolist(), **(fields or {})})
    assert as_json.status_code == 200, as_json.text[:300]
    as_npy = post_npy(api, f"{model}/{route}", ROWS, fields)
    assert as_npy.status_code == 200, as_npy.text[:300]
    # float64 rows in, the same values out, and the same other fields (the tuned steps' times aside)
    assert untimed(as_npy.json()) == untimed(as_json.json())
    # and .npy both ways: the answer's bytes as a .npy answer to the JSON request
    both = post_npy(api, f"{model}/{route}", ROWS, fields, Accept="application/octet-stream")
    assert both.headers["content-type"] == "application/octet-stream"
    assert both.content == api.post(f"{model}/{route}?format=npy", json={"rows": ROWS.tolist(), **(fields or {})}).content
    assert np.array_equal(np.load(io.BytesIO(both.content)), np.asarray(as_json.json()[answer]))


@pytest.mark.parametrize("dtype", ["float32", "int16", "uint8", "bool"])
def test_any_numeric_npy_dtype_is_read_as_the_same_json_numbers(api, model, dtype):
    rows = (np.abs(ROWS) * 3).astype(dtype)
    as_npy = post_npy(api, f"{model}/project", rows)
    assert as_npy.status_code == 200, as_npy.text[:300]
    assert as_npy.json() == api.post(f"{model}/project", json={"rows": rows.astype(np.float64).tolist()}).json()


def test_bad_arrays_are_4xx_naming_the_field(api, model):
    url = f"{model}/project"
    assert_error(post_npy(api, url, ROWS[0]), 422, "invalid", "rows")  # 1-D
    assert_error(post_npy(api, url, ROWS.reshape(3, 10, 5)), 422, "invalid", "rows")  # 3-D
    assert_error(post_npy(api, url, np.empty((0, 5))), 422, "invalid", "rows")
    assert_error(post_npy(api, url, ROWS[:, :4]), 422, "invalid", "rows")  # the wrong width
    bad = ROWS.copy()
    bad[3, 1] = np.nan
    assert "row 3" in error_message(post_npy(api, url, bad), 422, "invalid", "rows")
    assert_error(post_npy(api, url, np.array([["a"] * 5])), 422, "invalid", "rows")  # not numbers
    assert_error(post_npy(api, url, b"not an npy file"), 400, "bad_request", "body")
    assert_error(post_npy(api, url, npy_bytes(ROWS)[:-8]), 400, "bad_request", "body")  # truncated
    pickled = io.BytesIO()
    np.save(pickled, np.array([[{"a": 1}]], dtype=object), allow_pickle=True)
    assert post_npy(api, url, pickled.getvalue()).status_code in (400, 422)  # never unpickled
    over = post_npy(api, url, np.zeros((100_001, 1)))  # over the body model's bound, from the header alone
    assert over.status_code == 413 and over.json()["error"]["field"] == "rows"


def test_the_fields_header_is_checked_as_the_json_body_is(api, model):
    url = f"{model}/reconstruct"
    assert_error(post_npy(api, url, ROWS, "{not json"), 400, "bad_request", "X-KPCA-Fields")
    assert_error(post_npy(api, url, ROWS, "[1, 2]"), 400, "bad_request", "X-KPCA-Fields")
    assert_error(post_npy(api, url, ROWS, {"rows": [[1.0] * 5]}), 400, "bad_request", "X-KPCA-Fields")
    assert_error(post_npy(api, url, ROWS, {"colour": "red"}), 422, "invalid", "colour")
    assert_error(post_npy(api, url, ROWS, {"method": "guess"}), 422, "invalid", "method")
    assert_error(post_npy(api, url, ROWS, {"options": {"n_iter": 0}}), 422, "invalid", "options.n_iter")
    assert_error(post_npy(api, f"{model}/project", ROWS, {"method": "fixed-point"}), 422, "invalid", "method")
    # the rows' own bound and the work budget apply as to JSON rows
    big = post_npy(api, url, ROWS, {"method": "fixed-point", "options": {"n_iter": 1000, "restarts": 20,
                                                                       "tol": 1e-300}})
    assert big.status_code == json_status(api, url, {"method": "fixed-point", "options": {
        "n_iter": 1000, "restarts": 20, "tol": 1e-300}})


def untimed(answer: dict) -> dict:
    """``answer`` with its steps' names but not their times (a tuned ``/denoise``'s ``steps``)."""
    return {**answer, "steps": [step["step"] for step in answer.get("steps") or []]}


def json_status(api, url: str, fields: dict) -> int:
    return api.post(url, json={"rows": ROWS.tolist(), **fields}).status_code


def test_routes_that_take_no_rows_still_refuse_npy(api, model):
    response = api.post("/v1/models", content=npy_bytes(ROWS), headers=NPY)
    assert_error(response, 415, "unsupported_media_type", "content-type")
