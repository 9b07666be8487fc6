"""Fits as jobs, through HTTP: cancel, resume, early stop, events, checkpoints,
concurrent fits and projections served while fits run."""

import io
import json

import httpx
import numpy as np
import pytest

from tests.api_checks import wait_for_pass
from tests.waiting import PATIENCE_S, wait_until

SERVER_SETTINGS = {"n_workers": 2, "checkpoint_keep": 2}
N = 500


@pytest.fixture(scope="module")
def digits_set(api, digits):
    api.post("/v1/datasets", json={"name": "digits", "n_features": 64, "dtype": "float64"})
    buf = io.BytesIO()
    np.save(buf, digits[:N])
    api.put("/v1/datasets/digits/chunks/0", content=buf.getvalue(), headers={"Content-Type": "application/octet-stream"})
    assert api.post("/v1/datasets/digits/commit", json={}).json()["status"] == "ready"
    return "digits"


def start(api, name, passes=10, **params):
    body = {"name": name, "dataset": "digits", "n_components": 6, "kernel": {"type": "gaussian", "sigma": 3.0},
            "solver": params.pop("solver", "kha-smd"),
            "params": {"passes": passes, "seed": 1, "init": "random", **params}}  # the paper's start: jobs take passes
    response = api.post("/v1/models", json=body)
    assert response.status_code == 202, response.text
    return response.json()


def wait(api, name, until=("completed", "failed", "cancelled"), timeout=PATIENCE_S):
    """Poll model ``name`` until its status is one of ``until``; its record then."""
    seen = {}

    def reached() -> bool:
        seen["record"] = api.get(f"/v1/models/{name}").json()
        return seen["record"]["status"] in until

    wait_until(reached, timeout, lambda: f"model {name} to be {' or '.join(until)} (last seen: {seen['record']})")
    return seen["record"]


def test_cancel_then_resume_with_more_passes(api, digits_set):
    start(api, "stoppable", passes=400, block_size=25)
    wait_for_pass(api, "stoppable", 1)
    assert api.post("/v1/models/stoppable/cancel", json={}).status_code == 202
    record = wait(api, "stoppable")
    assert record["status"] == "cancelled"
    done = record["progress"]["pass"]
    assert 1 <= done < 400
    listed = api.get("/v1/models/stoppable/checkpoints").json()["checkpoints"]
    assert 1 <= len(listed) <= 3 and listed[-1]["pass"] == done  # last two kept, plus the best
    assert api.post("/v1/models/stoppable/cancel", json={}).status_code == 409  # nothing to cancel now
    bad = api.post("/v1/models/stoppable/resume", json={"passes": done})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "passes"
    resumed = api.post("/v1/models/stoppable/resume", json={"passes": done + 3})
    assert resumed.status_code == 202 and resumed.json()["status"] == "queued"
    record = wait(api, "stoppable")
    assert record["status"] == "completed" and record["progress"]["pass"] == done + 3
    assert [h["pass"] for h in record["history"]] == list(range(1, done + 4))
    again = api.post("/v1/models/stoppable/resume", json={})
    assert again.status_code == 409 and "more passes" in again.json()["error"]["message"]


def test_early_stop_at_a_tolerance(api, digits_set):
    start(api, "early", passes=200, tol=0.05)
    record = wait(api, "early")
    assert record["status"] == "completed" and record["stopped_early"] is True
    figures = [h["convergence"]["value"] for h in record["history"]]
    assert figures[-1] < 0.05 and all(v >= 0.05 for v in figures[:-1]) and len(figures) < 200


def test_float32_kernel_tiles_fit_like_float64(api, digits_set):
    """kernel_precision=float32 through HTTP: reported, and the same run to float32 rounding (the
    kernel entries differ by ~1e-7 relative, so after two passes the excess errors agree closely)."""
    start(api, "tiles64", passes=2)
    start(api, "tiles32", passes=2, kernel_precision="float32")
    f64, f32 = wait(api, "tiles64"), wait(api, "tiles32")
    assert f64["status"] == f32["status"] == "completed", (f64["error"], f32["error"])
    assert f64["params_used"]["kernel_precision"] == "float64"
    assert f32["params_used"]["kernel_precision"] == "float32"
    e64, e32 = (r["history"][-1]["convergence"]["value"] for r in (f64, f32))
    assert e32 == pytest.approx(e64, rel=1e-3), (e64, e32)


def test_warm_start_fit_then_resume(api, digits_set):
    """init=subset through HTTP: reported in params_used, far closer after one pass than the random
    start, and carried through a checkpoint (resume loads the state with its init fields)."""
    start(api, "warm", passes=1, init="subset", init_size=200)
    start(api, "cold", passes=1)
    warm, cold = wait(api, "warm"), wait(api, "cold")
    assert warm["status"] == "completed" and cold["status"] == "completed", (warm["error"], cold["error"])
    assert warm["params"]["init"] == "subset" and warm["params_used"]["init"] == "subset"
    assert warm["params_used"]["init_size"] == 200
    assert cold["params_used"]["init"] == "random" and "init_size" not in cold["params_used"]
    figure = {name: r["history"][0]["convergence"] for name, r in (("warm", warm), ("cold", cold))}
    assert figure["warm"]["metric"] == "excess_error"
    assert figure["warm"]["value"] < figure["cold"]["value"], figure
    assert api.post("/v1/models/warm/resume", json={"passes": 2}).status_code == 202
    resumed = wait(api, "warm")
    assert resumed["status"] == "completed" and resumed["progress"]["pass"] == 2, resumed["error"]
    assert resumed["params_used"]["init"] == "subset" and resumed["params_used"]["init_size"] == 200
    bad = api.post("/v1/models", json={"name": "bad-init", "dataset": "digits", "n_components": 6,
                                       "kernel": {"type": "gaussian", "sigma": 3.0}, "params": {"init": "warm"}})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "params.init", bad.text
    too_big = api.post("/v1/models", json={"name": "bad-init", "dataset": "digits", "n_components": 6,
                                           "kernel": {"type": "gaussian", "sigma": 3.0},
                                           "params": {"init": "subset", "init_size": N + 1}})
    assert too_big.status_code == 422 and too_big.json()["error"]["field"] == "params.init_size", too_big.text


def test_events_stream_every_pass_then_ends(api, digits_set, server):
    start(api, "watched", passes=5)
    events = []
    with httpx.stream("GET", f"{server}/v1/models/watched/events", timeout=120) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        event = None
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                events.append((event, json.loads(line[6:])))
    kinds = [e for e, _ in events]
    assert kinds[-1] == "end" and events[-1][1]["status"] == "completed"
    progress = [d for e, d in events if e == "progress"]
    assert [p["pass"] for p in progress] == [1, 2, 3, 4, 5]
    assert all(p["convergence"]["metric"] == "excess_error" for p in progress)
    assert api.get("/v1/models/nope/events").status_code == 404


def test_concurrent_fits_and_projections_while_they_run(api, digits_set, digits):
    start(api, "ready", passes=1, solver="kha-et")
    wait(api, "ready")
    start(api, "first", passes=5000, block_size=50)
    start(api, "second", passes=5000, block_size=50)
    wait_for_pass(api, "first", 1)
    wait_for_pass(api, "second", 1)
    assert {api.get(f"/v1/models/{n}").json()["status"] for n in ("first", "second")} == {"running"}
    for _ in range(5):  # projections are answered while both fits hold the workers
        r = api.post("/v1/models/ready/project", json={"rows": digits[1000:1010].tolist()})
        assert r.status_code == 200 and np.asarray(r.json()["components"]).shape == (10, 6)
    # both still running: the projections did not wait for the fits (5000 passes each) to end
    assert {api.get(f"/v1/models/{n}").json()["status"] for n in ("first", "second")} == {"running"}
    metrics = api.get("/metrics").text
    assert 'kpca_models{status="running"} 2.0' in metrics
    for name in ("first", "second"):
        api.post(f"/v1/models/{name}/cancel", json={})
        assert wait(api, name)["status"] == "cancelled"
