"""``/v1/models`` over a real server: validation of model requests, records read from the registry.

Fitting and projecting end to end is covered by ``tests/e2e``; here a model
record is at most submitted (202) or written straight into the registry to
stand for what a worker would have written.
"""

from __future__ import annotations

import numpy as np
import pytest

from store import ModelRegistry
from store.jobs.records import ModelRecord
from tests.api_checks import assert_error, wait_for_fit

N_ROWS, N_FEATURES = 40, 4


def model_body(**changes):
    body = {
        "name": "m",
        "dataset": "ready",
        "kernel": {"type": "gaussian", "sigma": 2.0},
        "n_components": 3,
        "solver": "kha-smd",
        "params": {"passes": 1, "seed": 0},
    }
    body.update(changes)
    return body


@pytest.fixture(scope="module", autouse=True)
def datasets(api):
    """A committed data set "ready" (40 x 4) and an open one "open"."""
    rows = np.random.default_rng(7).standard_normal((N_ROWS, N_FEATURES)).round(5)
    api.post("/v1/datasets", json={"name": "ready", "n_features": N_FEATURES}).raise_for_status()
    api.put("/v1/datasets/ready/chunks/0", json={"rows": rows[:25].tolist()}).raise_for_status()
    api.put("/v1/datasets/ready/chunks/1", json={"rows": rows[25:].tolist()}).raise_for_status()
    api.post("/v1/datasets/ready/commit", json={}).raise_for_status()
    api.post("/v1/datasets", json={"name": "open", "n_features": N_FEATURES}).raise_for_status()
    api.put("/v1/datasets/open/chunks/0", json={"rows": rows.tolist()}).raise_for_status()


@pytest.fixture(scope="module")
def registry(data_dir) -> ModelRegistry:
    return ModelRegistry(data_dir)


def stored_record(registry, name, status, **fields):
    """Write a model record as a worker would have left it."""
    record = {
        "name": name,
        "dataset": "ready",
        "dataset_checksum": None,
        "kernel": {"type": "linear"},
        "n_components": 2,
        "solver": "kha",
        "params": {"passes": 1, "seed": 0},
        "status": status,
        "progress": None,
        "history": [],
        "error": None,
        "params_used": None,
    }
    record.update(fields)
    registry.create(ModelRecord.model_validate(record))


# ------------------------------------------------------------- validation


def test_model_on_unknown_dataset_is_404(api):
    assert_error(api.post("/v1/models", json=model_body(dataset="absent")), 404, "not_found", "dataset")


def test_model_on_uncommitted_dataset_is_409(api):
    error = assert_error(api.post("/v1/models", json=model_body(dataset="open")), 409, "conflict", "dataset")
    assert "commit" in error["message"]


@pytest.mark.parametrize(
    "kernel, field",
    [
        ({"type": "gaussian", "sigma": -1.0}, "kernel.sigma"),
        ({"type": "gaussian", "sigma": 0}, "kernel.sigma"),
        ({"type": "gaussian", "sigma": 1e-300}, "kernel.sigma"),  # sigma^2 underflows: every value 0 or 1
        ({"type": "laplacian", "sigma": 1e200}, "kernel.sigma"),
        ({"type": "gaussian", "sigma": 5e-324}, "kernel.sigma"),
        ({"type": "laplacian", "sigma": "wide"}, "kernel.sigma"),
        ({"type": "polynomial", "degree": 0}, "kernel.degree"),
        ({"type": "polynomial", "offset": -1}, "kernel.offset"),
        ({"type": "tanh", "gamma": 0}, "kernel.gamma"),
        ({"type": "linear", "sigma": 1.0}, "kernel.sigma"),
        ({"type": "cosine"}, "kernel"),
        ({"sigma": 1.0}, "kernel"),
        ("gaussian", "kernel"),
    ],
)
def test_bad_kernel_is_422_naming_the_field(api, kernel, field):
    assert_error(api.post("/v1/models", json=model_body(kernel=kernel)), 422, "invalid", field)


def test_infinite_sigma_is_422(api):
    body = b'{"name": "m", "dataset": "ready", "kernel": {"type": "gaussian", "sigma": Infinity}, "n_components": 2}'
    response = api.post("/v1/models", content=body, headers={"Content-Type": "application/json"})
    assert_error(response, 422, "invalid", "kernel.sigma")


def test_unknown_solver_is_422(api):
    error = assert_error(api.post("/v1/models", json=model_body(solver="newton")), 422, "invalid", "solver")
    assert "kha-smd" in error["message"]


@pytest.mark.parametrize(
    "params, field",
    [
        ({"learning_rate": 0.1}, "params.learning_rate"),
        ({"passes": 0}, "params.passes"),
        ({"passes": 10_001}, "params.passes"),
        ({"seed": -1}, "params.seed"),
        ({"eta0": -0.5}, "params.eta0"),
        ({"mu": -1}, "params.mu"),
        ({"xi": 1.5}, "params.xi"),
        ({"block_size": 0}, "params.block_size"),
        ({"block_size": 4097}, "params.block_size"),
        ({"init": "warm"}, "params.init"),
        ({"init": None}, "params.init"),
        ({"init_size": 0}, "params.init_size"),
        ({"init_size": 2.5}, "params.init_size"),
        ({"init": "subset", "init_size": 2}, "params.init_size"),  # below n_components = 3
        ({"init": "subset", "init_size": N_ROWS + 1}, "params.init_size"),
        ({"kernel_precision": "float16"}, "params.kernel_precision"),
        ({"workers": 2}, "params.workers"),  # placement, not a parameter: the message says where it went
    ],
)
def test_bad_params_are_422_naming_the_key(api, params, field):
    error = assert_error(api.post("/v1/models", json=model_body(params=params)), 422, "invalid", field)
    assert field.split(".")[1] in error["message"]


@pytest.mark.parametrize("workers", [0, -1, 1.5, "many", True, 4097])
def test_bad_placement_is_422_naming_the_key(api, workers):
    error = assert_error(api.post("/v1/models", json=model_body(placement={"workers": workers})), 422, "invalid",
                         "placement.workers")
    assert "workers" in error["message"]


@pytest.mark.parametrize("n_components", [N_ROWS, N_ROWS + 1, 10**6])
def test_too_many_components_is_422(api, n_components):
    error = assert_error(
        api.post("/v1/models", json=model_body(n_components=n_components)), 422, "invalid", "n_components"
    )
    # the message gives the limit the data set's rows set: at most n_rows - 1 components
    assert "rows" in error["message"] and str(N_ROWS - 1) in error["message"]


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"n_components": 0}, "n_components"),
        ({"n_components": 2.5}, "n_components"),
        ({"name": "../escape"}, "name"),
        ({"dataset": "a/b"}, "dataset"),
        ({"extra": 1}, "extra"),
    ],
)
def test_other_bad_fields_are_422(api, changes, field):
    assert_error(api.post("/v1/models", json=model_body(**changes)), 422, "invalid", field)


def test_missing_body_is_422(api):
    response = api.post("/v1/models", headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "body"


# ----------------------------------------------------------------- records


def test_unknown_model_is_404(api):
    assert_error(api.get("/v1/models/absent"), 404, "not_found", "name")
    assert_error(api.delete("/v1/models/absent"), 404, "not_found", "name")
    response = api.post("/v1/models/absent/project", json={"rows": [[0.0] * N_FEATURES]})
    assert_error(response, 404, "not_found", "name")


def test_get_reports_what_the_worker_wrote(api, registry):
    convergence = {"metric": "excess_error", "value": 0.25, "iterate": 0.5}
    progress = {"pass": 1, "passes": 1, "t": 40, "fraction": 1.0, "elapsed_s": 0.1, "remaining_s": 0.0,
                "eigenvalues": [2.0, 1.0], "gains": [0.5, 0.25], "convergence": convergence}
    history = [{"pass": 1, "elapsed_s": 0.1, "convergence": convergence, "eigenvalues": [2.0, 1.0]}]
    stored_record(
        registry,
        "written",
        "failed",
        progress=progress,
        history=history,
        error={"code": "diverged", "message": "the gains grew without bound; lower eta0"},
        params_used={"eta0": 0.05, "mu": 1.0, "block_size": 8},
    )
    model = api.get("/v1/models/written").json()
    assert model["status"] == "failed"
    assert model["error"]["code"] == "diverged" and "lower eta0" in model["error"]["message"]
    # a record written without workers (before sharded fits, or an unsharded one) reports None: one worker;
    # without a residual (a fit that did not measure one), None
    figure = {**convergence, "residual": None}
    assert model["progress"] == {**progress, "convergence": figure, "workers": None}
    assert model["history"] == [{**h, "convergence": figure, "workers": None} for h in history]
    assert model["params_used"]["eta0"] == 0.05
    assert model["params"] == {"passes": 1, "seed": 0} and model["placement"] == {"workers": None, "device": "auto"}
    assert not {"schema_version", "owner", "exact_limit", "fit_kernel"} & set(model)  # the service's, not the API's
    assert "written" in [m["name"] for m in api.get("/v1/models").json()["models"]]


def test_a_polled_record_is_read_again_only_when_it_was_written(api, registry, server):
    """``GET /v1/models/{name}`` keeps the encoded view of a record until the record is written again
    (`service.record_views`): the same bytes FastAPI made from the record, and the new record's view
    after every write, however soon."""
    from pydantic import TypeAdapter

    from service.public import model_public
    from service.schemas.models import ModelPublic

    stored_record(registry, "polled", "running", progress=None)
    first = api.get("/v1/models/polled")
    again = api.get("/v1/models/polled")
    expected = TypeAdapter(ModelPublic).dump_json(model_public(registry.get("polled")), by_alias=True)
    assert first.content == again.content == expected and first.headers["content-type"] == "application/json"
    for i in range(5):  # writes closer together than any file time resolution would tell apart by time alone
        registry.update("polled", status="running", params_used={"eta0": float(i)})
        assert api.get("/v1/models/polled").json()["params_used"] == {"eta0": float(i)}
    registry.delete("polled")
    assert api.get("/v1/models/polled").status_code == 404


@pytest.mark.parametrize("status", ["queued", "running", "failed", "cancelled"])
def test_project_needs_a_completed_model(api, registry, status):
    stored_record(registry, f"is-{status}", status)
    response = api.post(f"/v1/models/is-{status}/project", json={"rows": [[0.0] * N_FEATURES]})
    error = assert_error(response, 409, "conflict", "name")
    assert status in error["message"]
    # what to do next depends on the status: wait (and poll) for a fit under way, resume one that stopped
    next_step = f"GET /v1/models/is-{status}" if status in ("queued", "running") else \
        f"POST /v1/models/is-{status}/resume"
    assert next_step in error["message"]


@pytest.fixture(scope="module")
def completed(registry):
    stored_record(registry, "done", "completed")
    return "/v1/models/done/project"


@pytest.mark.parametrize(
    "rows, field",
    [
        ([[0.0] * (N_FEATURES - 1)], "rows"),
        ([[0.0] * N_FEATURES, [0.0] * (N_FEATURES + 1)], "rows"),
        ([], "rows"),
        ([0.0] * N_FEATURES, "rows.0"),
        ([[0.0, "x", 0.0, 0.0]], "rows.0.1"),
    ],
)
def test_project_rows_are_validated(api, completed, rows, field):
    assert_error(api.post(completed, json={"rows": rows}), 422, "invalid", field)


def test_project_refuses_non_finite_rows_naming_the_row(api, completed):
    body = b'{"rows": [[0, 0, 0, 0], [1, 1, 1, 1], [0, NaN, 0, 0]]}'
    response = api.post(completed, content=body, headers={"Content-Type": "application/json"})
    assert "row 2" in assert_error(response, 422, "invalid", "rows")["message"]


def test_project_refuses_too_many_rows(api, completed):
    response = api.post(completed, json={"rows": [[0, 0, 0, 0]] * 100_001})
    assert_error(response, 422, "invalid", "rows")


# ------------------------------------------------------------------- fits


def test_more_workers_than_the_cluster_offers_is_422(api):
    # the module's server has an embedded cluster of one worker offering the fit resource
    error = assert_error(api.post("/v1/models", json=model_body(name="wide", placement={"workers": 2})),
                         422, "invalid", "placement.workers")
    assert "1 worker" in error["message"] and '"all"' in error["message"], error
    assert_error(api.get("/v1/models/wide"), 404, "not_found", "name")  # nothing stored
    error = assert_error(api.post("/v1/models", json=model_body(name="m", solver="exact", params={"workers": 1})),
                         422, "invalid", "params.workers")  # where a fit runs is not a parameter of any solver
    assert "placement.workers" in error["message"], error


@pytest.mark.parametrize("workers", [1, "all"])
def test_workers_the_cluster_has_are_accepted(api, workers):
    name = f"sharded-{workers}"
    response = api.post("/v1/models", json=model_body(name=name, solver="kha", params={"passes": 1},
                                                      placement={"workers": workers}))
    assert response.status_code == 202, response.text
    assert response.json()["placement"]["workers"] == workers and "workers" not in response.json()["params"]
    assert api.delete(f"/v1/models/{name}").status_code == 204


def test_create_model_is_202_with_location_and_record(api):
    body = model_body(name="submitted", kernel={"type": "polynomial"}, params={"passes": 2})
    response = api.post("/v1/models", json=body)
    assert response.status_code == 202, response.text
    assert response.headers["location"] == "/v1/models/submitted"
    created = response.json()
    assert created["status"] == "queued"
    assert created["kernel"] == {"type": "polynomial", "degree": 2, "offset": 1.0, "gamma": 1.0}
    assert created["params"] == {"passes": 2}  # what was asked; the others take the solver's declared defaults
    assert created["dataset_checksum"] == api.get("/v1/datasets/ready").json()["checksum"]

    model = api.get("/v1/models/submitted").json()
    assert model["name"] == "submitted"
    assert model["status"] in ("queued", "running", "completed", "failed")
    assert model["n_components"] == 3

    clash = api.post("/v1/models", json=body)
    assert_error(clash, 409, "conflict", "name")

    assert api.delete("/v1/models/submitted").status_code == 204
    assert_error(api.get("/v1/models/submitted"), 404, "not_found", "name")


def test_a_gpu_placement_where_none_is_visible_fails_saying_so(api):
    """placement.device gpu on a worker without a CUDA device: the fit fails with a message naming what is
    missing (no silent fall-back to cores); auto takes the cores."""
    from kpca.array_rows import namespace

    if namespace("auto") is not None:
        pytest.skip("a CUDA device is visible here")
    assert_error(api.post("/v1/models", json=model_body(name="on-gpu", placement={"device": "tpu"})), 422,
                 "invalid", "placement.device")
    response = api.post("/v1/models", json=model_body(name="on-gpu", placement={"device": "gpu"}))
    assert response.status_code == 202, response.text
    record = wait_for_fit(api, "on-gpu")
    assert record["status"] == "failed" and "no CUDA device" in record["error"]["message"], record


@pytest.mark.parametrize("solver, params, field", [
    ("ritz", {"eta0": 0.1}, "params.eta0"),  # the default's passes take no gain
    ("ritz", {"mu": 1.0}, "params.mu"),
    ("kha-et", {"mu": 1.0}, "params.mu"),  # SMD's meta-gain, not KHA/et's
    ("kha", {"xi": 0.9}, "params.xi"),
])
def test_a_gain_the_solver_does_not_use_is_422_saying_so(api, solver, params, field):
    """Issue 53: a request that names a gain its solver does not use is refused, naming it and the solver."""
    error = assert_error(api.post("/v1/models", json=model_body(solver=solver, params=params)), 422, "invalid", field)
    assert solver in error["message"], error
