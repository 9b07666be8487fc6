"""Schemathesis over the service's own OpenAPI document, against a real server (bounded, in CI).

Every operation gets generated requests (schemathesis 4, Hypothesis, derandomized: the same
requests on every run): valid and invalid ones with random names, and valid ones aimed at an
existing data set, model and clustering. Each response must be no 5xx, have a documented status
code and content type, and a body and headers that match the documented schema
(`bench._fuzzing`). DELETE runs last (the data folder is the module's temporary one). The long
run is ``bench/fuzz.py``.

Defends against: a client input that reaches a 500; a status code the document does not list
(400 for a malformed JSON body, 415 for a missing content type); a response body the document
does not describe; a documented name pattern the server refuses.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from bench._fuzzing import fuzz_operations
from tests.api_checks import wait_for_fit

pytest.importorskip("schemathesis")

MAX_EXAMPLES = 5  # per operation and kind (positive, negative, aimed at a known resource)
TIME_BUDGET_S = 60.0
SERVER_SETTINGS = {"register_prefixes": []}


@pytest.fixture(scope="module")
def known(api) -> dict[str, str]:
    """A committed data set "d" (60 x 3), a completed model "m" and a clustering "c" on it."""
    rows = np.random.default_rng(3).standard_normal((60, 3)).round(4)
    api.post("/v1/datasets", json={"name": "d", "n_features": 3}).raise_for_status()
    api.put("/v1/datasets/d/chunks/0", json={"rows": rows.tolist()}).raise_for_status()
    api.post("/v1/datasets/d/commit", json={}).raise_for_status()
    api.post("/v1/models", json={"name": "m", "dataset": "d", "kernel": {"type": "gaussian", "sigma": 2.0},
                                 "n_components": 2, "solver": "kha",
                                 "params": {"passes": 1, "seed": 0}}).raise_for_status()
    api.post("/v1/clusterings", json={"name": "c", "dataset": "d", "n_clusters": 2,
                                      "kernel": {"type": "gaussian", "sigma": 2.0}}).raise_for_status()
    assert wait_for_fit(api, "m")["status"] == "completed"
    assert wait_for_fit(api, "c", route="/v1/clusterings")["status"] == "completed"
    return {"datasets": "d", "models": "m", "clusterings": "c"}


@pytest.mark.slow
def test_every_operation_conforms_to_the_document(server, known):
    started = time.monotonic()
    report = fuzz_operations(server, MAX_EXAMPLES, known=known)
    elapsed = time.monotonic() - started
    figures = report.as_dict()
    print(f"schemathesis took {elapsed:.0f} s (about {TIME_BUDGET_S:.0f} on a quiet 2-core machine):",
          {k: v for k, v in figures.items() if k != "failure_list"})
    assert report.operations >= 20 and report.requests >= 10 * report.operations, figures
    assert figures["server_errors"] == 0, report.failures
    assert not report.failures, "\n\n".join(
        f"{f['operation']}: {f['check']} (status {f['status']})\n{f['message']}\n{f['curl']}" for f in report.failures
    )


@pytest.mark.parametrize("route", ["/v1/models", "/v1/clusterings"])
@pytest.mark.parametrize("kernel_type", [{}, ["gaussian"], 3, None])
def test_a_kernel_type_that_is_not_a_string_is_422(api, known, route, kernel_type):
    """Found by bench/fuzz.py: {"kernel": {"type": {}}} was a TypeError (unhashable) and a 500."""
    body = {"name": "k", "dataset": "d", "kernel": {"type": kernel_type}, "n_components": 2, "n_clusters": 2}
    body.pop("n_clusters" if route == "/v1/models" else "n_components")
    response = api.post(route, json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"].startswith("kernel"), response.text
