"""The deadline of serving requests (issue 30, item 8; real server, real cluster): past
``serving_deadline_s`` (here 2 s) a request is a 503 with ``Retry-After``, its tasks not yet run are
dropped and the running ones stop at their next step. (Budgets, and what heavy requests leave to other
requests: tests/service/test_api_serving_budget.py.)

These tests bound in time what must come *soon* after the deadline; each bound, measured on a quiet
machine, is `tests.waiting.stretched` by the machine's load, and stays far below the work that a
request not stopped would go on with.
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from service import Settings, create_app
from tests.api_checks import assert_error
from tests.service.serving_load import HEAVY, SETTINGS, cluster_tasks, fit_model, running_tasks, served
from tests.waiting import stretched, wait_until

DEADLINE_S = 2.0


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    return create_app(Settings(data_dir=tmp_path_factory.mktemp("data"), serving_deadline_s=DEADLINE_S, **SETTINGS))


@pytest.fixture(scope="module")
def base_url(app):
    with served(app) as url:
        yield url


@pytest.fixture(scope="module")
def api(base_url):
    with httpx.Client(base_url=base_url, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def model(api, digits):
    return fit_model(api, digits)


def test_past_its_deadline_a_request_is_a_503_with_retry_after_and_its_tasks_are_dropped(api, app, model, digits):
    body = {"rows": digits[:200].tolist(), **HEAVY}  # 5.1e10: within the budget, tens of seconds of work
    started = time.monotonic()
    r = api.post(f"/v1/models/{model}/denoise", json=body)
    took = time.monotonic() - started
    assert_error(r, 503, "unavailable", "rows")
    assert r.headers["retry-after"] == "10" and "KPCA_SERVING_DEADLINE_S" in r.json()["error"]["message"]
    assert took < DEADLINE_S + stretched(3.0), took  # the deadline, plus the block running then
    wait_until(lambda: cluster_tasks(app) == 0, timeout=stretched(5.0), what="the request's tasks to be cancelled")


def test_a_request_that_ends_stops_its_running_block_at_its_next_step(app, model, digits):
    """A block already running when its request ends (here one block of all 200 rows, tens of seconds of
    work) is stopped at its next fixed-point iteration through the request's stop flag, instead of
    holding the worker's pre-image thread to its end (dask cancels only the blocks not yet run). The
    request's deadline is set to now once its block is seen running."""
    from workers.operations import Reconstruct
    from workers.watch import RequestEnded, Watch

    ended, watch = [], Watch(time.monotonic() + 3600)

    def request() -> None:
        try:
            app.state.backend.serve(Reconstruct(model, digits[:200], "fixed-point", HEAVY["options"], block_rows=200),
                                    watch=watch)
        except RequestEnded as exc:
            ended.append(exc.reason)

    thread = threading.Thread(target=request, daemon=True)
    thread.start()
    def block_runs() -> bool:
        assert thread.is_alive(), f"the request ended before its block ran: {ended}"
        return running_tasks(app, "reconstruct_rows") > 0

    wait_until(block_runs, what="the request's block to run")
    watch.deadline = time.monotonic()
    thread.join(timeout=60)
    assert ended == ["deadline"]
    wait_until(lambda: running_tasks(app, "reconstruct_rows") == 0, timeout=stretched(3.0),
               what="the running block to stop after its request ended")


def test_a_tuned_request_past_its_deadline_is_a_503_too(api, app, model, digits):
    """``tune=auto`` runs as one task, at the pre-images' priority and resource, under the same deadline: past
    it a 503 with ``Retry-After`` (it ran on, unbounded, before)."""
    # 100 rows (the tuning needs more rows than columns): ten candidates of a few seconds each, so that the
    # stop, looked at between candidates, comes within seconds even on a loaded machine
    body = {"rows": digits[:100].tolist(), "tune": "auto", "method": "fixed-point", "options": {"n_iter": 1000}}
    stops = app.state.settings.data_dir / ".stops"
    earlier = set(stops.iterdir()) if stops.exists() else set()  # left by untuned requests' blocks
    started = time.monotonic()
    r = api.post(f"/v1/models/{model}/denoise", json=body)
    assert_error(r, 503, "unavailable", "rows")
    assert r.headers["retry-after"] == "10" and time.monotonic() - started < DEADLINE_S + stretched(1.5)
    # the task was already running: dask does not interrupt it, its stop flag does (store.stop_flags), at
    # the tuning's next candidate; before, it ran on for its ten candidates and the pre-images (over 20 s)
    wait_until(lambda: not running_tasks(app, "denoise_rows_tuned"), timeout=stretched(15.0),
               what="the tuned task to stop after its request ended")
    assert set(stops.iterdir()) == earlier  # the task cleared its flag


def test_a_one_call_denoise_image_past_its_deadline_is_a_503_and_stops(api, app):
    """Issue 52, item 8: ``POST /v1/denoise-image`` had no deadline. A large image tuned on its own tiles
    (`tests.service.test_denoise_image_bounds.BIG`) takes far longer than the 2 s deadline: a 503 with
    ``Retry-After``, and its task stops at its next tuning candidate or tile (its named job ends cancelled)."""
    from tests.service.test_api_denoise_tuned import PNG
    from tests.service.test_denoise_image_bounds import BIG

    r = api.post("/v1/denoise-image?job=late", content=BIG, headers=PNG)
    error = assert_error(r, 503, "unavailable", "body")
    assert "KPCA_SERVING_DEADLINE_S" in error["message"] and r.headers["retry-after"] == "10"
    wait_until(lambda: api.get("/v1/image-jobs/late").json()["status"] != "running", timeout=stretched(120.0),
               what="the image request's task to stop after its request ended")
    job = api.get("/v1/image-jobs/late").json()
    assert job["status"] == "cancelled", job
