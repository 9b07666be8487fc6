"""Jobs through HTTP across a crash of the whole service, and continuation of a
model on appended rows (a new data set version)."""

import io

import httpx
import numpy as np
import pytest

from service_process import ServiceProcess, running_service
from tests.waiting import PATIENCE_S, wait_until


def upload(api, name, X, index=0, create=True):
    if create:
        assert api.post("/v1/datasets", json={"name": name, "n_features": X.shape[1],
                                              "dtype": "float64"}).status_code == 201
    buf = io.BytesIO()
    np.save(buf, X)
    r = api.put(f"/v1/datasets/{name}/chunks/{index}", content=buf.getvalue(),
                headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 200, r.text
    return api.post(f"/v1/datasets/{name}/commit", json={}).json()


def fit(api, name, dataset, passes, **params):
    r = api.post("/v1/models", json={"name": name, "dataset": dataset, "n_components": 6,
                                     "kernel": {"type": "gaussian", "sigma": 3.0}, "solver": "kha-smd",
                                     "params": {"passes": passes, "seed": 3, **params}})
    assert r.status_code == 202, r.text


def wait(api, name, predicate, timeout=PATIENCE_S):
    """Poll model ``name`` until ``predicate(record)`` holds; the record then."""
    seen = {}

    def holds() -> bool:
        seen["record"] = api.get(f"/v1/models/{name}").json()
        return predicate(seen["record"])

    wait_until(holds, timeout, lambda: f"model {name} (last seen: {seen['record']})")
    return seen["record"]


def finished(record):
    return record["status"] in ("completed", "failed", "cancelled")


@pytest.mark.slow
def test_a_fit_survives_a_crash_of_the_whole_service(tmp_path, digits):
    first = ServiceProcess(tmp_path).wait_ready()
    try:
        api = httpx.Client(base_url=first.url, timeout=60)
        upload(api, "digits", digits[:700])
        fit(api, "victim", "digits", 25, block_size=50, init="random")  # the paper's passes: all 25 run
        wait(api, "victim", lambda r: (r.get("progress") or {}).get("pass", 0) >= 3)
    finally:
        first.crash()  # SIGKILL: API, scheduler and workers, mid-pass
    with running_service(tmp_path) as url:
        api = httpx.Client(base_url=url, timeout=60)
        stale = api.get("/v1/models/victim").json()
        assert stale["status"] in ("running", "queued") and stale["progress"]["pass"] < 25
        victim = wait(api, "victim", finished)  # the new service's watchdog resubmits it
        assert victim["status"] == "completed", victim["error"]
        assert [h["pass"] for h in victim["history"]] == list(range(1, 26))
        fit(api, "reference", "digits", 25, block_size=50, init="random")
        assert wait(api, "reference", finished)["status"] == "completed"
        rows = {"rows": digits[1000:1020].tolist()}
        Z_victim = api.post("/v1/models/victim/project", json=rows).json()["components"]
        Z_reference = api.post("/v1/models/reference/project", json=rows).json()["components"]
    np.testing.assert_array_equal(Z_victim, Z_reference)  # same seed: bit for bit


def test_continue_a_model_on_appended_rows(tmp_path, digits):
    with running_service(tmp_path) as url:
        api = httpx.Client(base_url=url, timeout=60)
        meta = upload(api, "grow", digits[:600])
        assert meta["version"] == 1
        fit(api, "growing", "grow", 10, update="rayleigh-ritz")  # kha-smd's passes as the default solver's
        first = wait(api, "growing", finished)
        assert first["status"] == "completed" and first["dataset_version"] == 1
        meta = upload(api, "grow", digits[600:800], index=1, create=False)
        assert meta["version"] == 2 and meta["n_rows"] == 800
        r = api.post("/v1/models/growing/resume", json={"dataset_version": 2, "passes": 14})
        assert r.status_code == 202, r.text
        record = wait(api, "growing", finished)
        assert record["status"] == "completed" and record["dataset_version"] == 2
        assert record["params_used"]["n_rows"] == 800
        # the continued fit goes on from the fitted subspace, guard vectors and all, and stops once its
        # residual on all 800 rows meets the default tol, well before the 14 passes allowed
        passes = [h["pass"] for h in record["history"]]
        assert passes == list(range(1, len(passes) + 1)) and len(passes) < 14, passes
        assert record["stopped_early"] and record["history"][-1]["convergence"]["value"] <= 1e-3
        back = api.post("/v1/models/growing/resume", json={"dataset_version": 1, "passes": 20})
        assert back.status_code == 422 and back.json()["error"]["field"] == "dataset_version"
        missing = api.post("/v1/models/growing/resume", json={"dataset_version": 7, "passes": 20})
        assert missing.status_code == 404
        Z = api.post("/v1/models/growing/project", json={"rows": digits[900:905].tolist()}).json()["components"]
        assert np.asarray(Z).shape == (5, 6) and np.all(np.isfinite(Z))
