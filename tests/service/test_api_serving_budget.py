"""Work budgets and deadlines of serving requests (issue 30, items 1 and 8; real server, real cluster).

A read-key ``/denoise`` with ``n_iter: 1000, restarts: 20, tol: 1e-300`` ran 205 s and four such
requests, abandoned by their clients, starved ``/project`` for a minute. Now: the work is estimated
before it runs (413 naming the option and the limit), a request runs as small tasks behind any
projection, past its deadline it is a 503 with ``Retry-After``, and a client that disconnects has its
tasks cancelled on the workers.
"""

from __future__ import annotations

import socket
import threading
import time

import httpx
import numpy as np
import pytest
import uvicorn

from bench._service import wait_healthy
from service import Settings, create_app
from tests.api_checks import assert_error, wait_for_fit

HEAVY = {"method": "fixed-point", "options": {"n_iter": 1000, "restarts": 10, "tol": 1e-300}}
LOCAL_WORK = 2**20  # the model's 400 x 64 values: projections of up to 40 rows in the API process, more on a worker


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    settings = Settings(data_dir=tmp_path_factory.mktemp("data"), scheduler=None, n_workers=1,
                        max_serving_work=10**11, serving_block_work=5 * 10**7, serving_deadline_s=2.0,
                        local_projection_work=LOCAL_WORK, api_threads=2)
    return create_app(settings)


@pytest.fixture(scope="module")
def base_url(app):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    wait_healthy(url, thread.is_alive, "the server did not start", timeout=90)
    yield url
    server.should_exit = True
    thread.join(timeout=60)
    listener.close()


@pytest.fixture(scope="module")
def api(base_url):
    with httpx.Client(base_url=base_url, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def model(api, digits):
    api.post("/v1/datasets", json={"name": "digits", "n_features": 64, "dtype": "float64"}).raise_for_status()
    api.put("/v1/datasets/digits/chunks/0", json={"rows": digits[:400].tolist()}).raise_for_status()
    api.post("/v1/datasets/digits/commit", json={}).raise_for_status()
    api.post("/v1/models", json={"name": "m", "dataset": "digits", "n_components": 8,
                                 "kernel": {"type": "gaussian", "sigma": 3.0}, "solver": "exact"}).raise_for_status()
    assert wait_for_fit(api, "m")["status"] == "completed"
    api.post("/v1/models/m/project", json={"rows": digits[:2].tolist()}).raise_for_status()  # loaded on the worker
    return "m"


def cluster_tasks(app) -> int:
    """Pre-image tasks the dask scheduler holds (queued, processing or kept in memory)."""
    def count(dask_scheduler):
        return sum(1 for key in dask_scheduler.tasks if "reconstruct_rows" in str(key))
    return app.state.backend.client.run_on_scheduler(count)


def running_tasks(app, name: str) -> int:
    """Tasks running on the workers whose function is ``name`` (a task's thread, found by its frames)."""
    def count(dask_worker):
        import sys as _sys
        return sum(1 for frame in _sys._current_frames().values() for f in _walk(frame) if f.f_code.co_name == name)

    def _walk(frame):
        while frame is not None:
            yield frame
            frame = frame.f_back

    return sum(app.state.backend.client.run(count).values())


def test_a_request_over_its_work_budget_is_refused_before_it_runs(api, model, digits):
    body = {"rows": digits[:200].tolist(), "method": "fixed-point",
            "options": {"n_iter": 1000, "restarts": 20, "tol": 1e-300}}  # the request
    started = time.monotonic()
    r = api.post(f"/v1/models/{model}/denoise", json=body)
    message = assert_error(r, 413, "too_large", "options.n_iter")["message"]
    assert time.monotonic() - started < 2.0
    for part in ("200 rows", "400 model points", "64 features", "options.restarts 20", "options.n_iter 1000",
                 str(10**11), "KPCA_MAX_SERVING_WORK"):
        assert part in message, message


def test_past_its_deadline_a_request_is_a_503_with_retry_after_and_its_tasks_are_dropped(api, app, model, digits):
    body = {"rows": digits[:200].tolist(), **HEAVY}  # 5.1e10: within the budget, tens of seconds of work
    started = time.monotonic()
    r = api.post(f"/v1/models/{model}/denoise", json=body)
    took = time.monotonic() - started
    assert_error(r, 503, "unavailable", "rows")
    assert r.headers["retry-after"] == "10" and "KPCA_SERVING_DEADLINE_S" in r.json()["error"]["message"]
    assert took < 2.0 + 3.0, took  # the deadline, plus the block running then
    deadline = time.monotonic() + 5
    while cluster_tasks(app) > 0:
        assert time.monotonic() < deadline, "the request's tasks were not cancelled"
        time.sleep(0.1)


def test_a_client_that_disconnects_cancels_its_work_and_projections_go_first(api, app, model, digits, base_url):
    body = {"rows": digits[:200].tolist(), **HEAVY}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{base_url}/v1/models/{model}/denoise", json=body, timeout=0.8)  # the client gives up
    deadline = time.monotonic() + 5
    while cluster_tasks(app) > 0:
        assert time.monotonic() < deadline, "the abandoned request's tasks were not cancelled"
        time.sleep(0.1)

    done, slowest = threading.Event(), []

    def heavy() -> None:
        with httpx.Client(base_url=base_url, timeout=30) as client:
            client.post(f"/v1/models/{model}/denoise", json=body)  # a 503 after its deadline
        done.set()

    thread = threading.Thread(target=heavy, daemon=True)
    thread.start()
    time.sleep(0.3)
    while not done.is_set():
        started = time.monotonic()
        assert api.post(f"/v1/models/{model}/project", json={"rows": digits[:20].tolist()}).status_code == 200
        slowest.append(time.monotonic() - started)
        time.sleep(0.05)
    thread.join()
    # one thread of the worker runs the heavy request's blocks (resource "preimage"), the other projections
    assert len(slowest) >= 3 and max(slowest) < 1.0, slowest


def test_a_request_that_ends_stops_its_running_block_at_its_next_step(app, model, digits):
    """A block already running when its request ends (here one block of all 200 rows, tens of seconds of
    work) is stopped at its next fixed-point iteration through the request's stop flag, instead of
    holding the worker's pre-image thread to its end (dask cancels only the blocks not yet run)."""
    from workers.operations import Reconstruct
    from workers.watch import RequestEnded, Watch

    ended = []

    def request() -> None:
        try:
            app.state.backend.serve(Reconstruct(model, digits[:200], "fixed-point", HEAVY["options"], block_rows=200),
                                    watch=Watch(time.monotonic() + 1.5))
        except RequestEnded as exc:
            ended.append(exc.reason)

    thread = threading.Thread(target=request, daemon=True)
    thread.start()
    seen_running = False
    while thread.is_alive():
        seen_running = seen_running or running_tasks(app, "reconstruct_rows") > 0
        time.sleep(0.1)
    assert ended == ["deadline"] and seen_running
    deadline = time.monotonic() + 3.0
    while running_tasks(app, "reconstruct_rows") > 0:
        assert time.monotonic() < deadline, "the running block went on after its request ended"
        time.sleep(0.1)


def test_requests_waiting_for_the_cluster_leave_the_short_steps_their_threads(app, model, digits, base_url):
    """Four heavy ``/denoise`` requests wait for the workers on threads of their own (`service.threads`),
    not on the ``api_threads`` (here 2) that short steps run on: a data set listing (a plain ``def`` route,
    run on those) is answered at once meanwhile, and no request runs more short steps at once."""
    body = {"rows": digits[:200].tolist(), **HEAVY}  # each a 503 after the 2 s deadline
    heavies = [threading.Thread(target=lambda: httpx.post(f"{base_url}/v1/models/{model}/denoise", json=body,
                                                          timeout=30), daemon=True) for _ in range(4)]
    for thread in heavies:
        thread.start()
    time.sleep(0.5)
    assert cluster_tasks(app) > 0 and all(thread.is_alive() for thread in heavies)
    seconds = []
    with httpx.Client(base_url=base_url, timeout=30) as client:
        for _ in range(10):
            started = time.monotonic()
            assert client.get("/v1/datasets").status_code == 200
            seconds.append(time.monotonic() - started)
    assert any(thread.is_alive() for thread in heavies)  # the listings ran while the four waited
    for thread in heavies:
        thread.join(timeout=30)
    assert max(seconds) < 0.5, seconds  # behind the waits on 2 shared threads: until their deadline


def test_four_heavy_requests_in_flight_leave_concurrent_projections_answered_at_once(api, app, model, digits,
                                                                                   base_url):
    """The issue's stall: with the scheduler's queueing (a worker "saturated" at 1.1 tasks per thread), the
    pre-image blocks of four heavy requests, sent at once, filled the worker while the projections of
    many clients (a task group large enough to be queued) waited on the scheduler until blocks finished:
    /project waited 23 s behind 4 such requests. Projections now go to the worker at once and run ahead of
    the blocks (`workers.dask_cluster.PRIORITIES_ON_WORKERS`), on the thread the blocks cannot take (resource
    ``preimage``)."""
    body = {"rows": digits[:200].tolist(), **HEAVY}
    answered, seconds = [], []
    on_workers = {"rows": digits[:50].tolist()}  # above LOCAL_WORK: computed on the worker, behind the blocks

    def heavy() -> None:
        with httpx.Client(base_url=base_url, timeout=30) as client:
            answered.append(client.post(f"/v1/models/{model}/denoise", json=body).status_code)

    def projecting(until) -> None:
        with httpx.Client(base_url=base_url, timeout=30) as client:
            while until():
                started = time.monotonic()
                status = client.post(f"/v1/models/{model}/project", json=on_workers).status_code
                seconds.append((status, time.monotonic() - started))

    heavies = [threading.Thread(target=heavy, daemon=True) for _ in range(4)]
    for thread in heavies:
        thread.start()
    time.sleep(0.5)  # their blocks are on the cluster
    assert cluster_tasks(app) > 4
    clients = [threading.Thread(target=projecting, args=(lambda: any(h.is_alive() for h in heavies),), daemon=True)
               for _ in range(8)]
    for thread in clients:
        thread.start()
    for thread in heavies + clients:
        thread.join(timeout=60)
    assert answered == [503] * 4  # each past its deadline, its blocks dropped
    assert len(seconds) >= 8 and {status for status, _ in seconds} == {200}
    took = sorted(s for _, s in seconds)  # with the scheduler's queueing: median 1.0 s, slowest 1.8 s
    assert took[len(took) // 2] < 0.6 and took[-1] < 1.5, took


def projections_by_place(base_url) -> dict:
    text = httpx.get(f"{base_url}/metrics").text
    return {where: float(line.split()[-1]) for where in ("api", "workers") for line in text.splitlines()
            if line.startswith(f'kpca_projections_total{{where="{where}"}}')}


def test_small_projections_are_computed_in_the_api_process_and_agree_with_the_workers(api, model, digits, base_url):
    """A projection of a small model is computed in the API process (no dask round trip, no wait behind a
    busy worker), one over ``local_projection_work`` on a worker; both give the same components."""
    before = projections_by_place(base_url)
    here = np.array(api.post(f"/v1/models/{model}/project", json={"rows": digits[:40].tolist()}).json()["components"])
    after_local = projections_by_place(base_url)
    there = np.array(api.post(f"/v1/models/{model}/project", json={"rows": digits[:41].tolist()}).json()["components"])
    after_workers = projections_by_place(base_url)
    assert after_local["api"] == before["api"] + 1 and after_local["workers"] == before["workers"]
    assert after_workers["workers"] == before["workers"] + 1 and after_workers["api"] == after_local["api"]
    np.testing.assert_allclose(here, there[:40], rtol=1e-12, atol=1e-12)


def test_a_heavy_request_keeps_few_blocks_on_the_cluster_at_a_time(api, app, model, digits, base_url):
    """A request of hundreds of pre-image blocks submits them as earlier ones end (`workers.serving.
    BLOCKS_IN_FLIGHT` per worker), instead of all at once: it neither floods the scheduler nor leaves
    hundreds of tasks to cancel when it ends (all 200 of this one were on the cluster at once)."""
    from workers.serving import BLOCKS_IN_FLIGHT

    body = {"rows": digits[:200].tolist(), **HEAVY}  # 200 blocks of one row
    thread = threading.Thread(target=lambda: httpx.post(f"{base_url}/v1/models/{model}/denoise", json=body,
                                                        timeout=30), daemon=True)
    thread.start()
    seen = []
    while thread.is_alive():
        seen.append(cluster_tasks(app))
        time.sleep(0.05)
    assert max(seen) > 0 and max(seen) <= BLOCKS_IN_FLIGHT * 1, seen  # one worker


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
    assert r.headers["retry-after"] == "10" and time.monotonic() - started < 2.0 + 1.5
    # the task was already running: dask does not interrupt it, its stop flag does (store.stop_flags), at
    # the tuning's next candidate; before, it ran on for its ten candidates and the pre-images (over 20 s)
    deadline = time.monotonic() + 15
    while running_tasks(app, "denoise_rows_tuned"):
        assert time.monotonic() < deadline, "the tuned task ran on after its request ended"
        time.sleep(0.1)
    assert set(stops.iterdir()) == earlier  # the task cleared its flag


def test_a_one_call_denoise_image_past_its_deadline_is_a_503_and_stops(api, app):
    """Issue 52, item 8: ``POST /v1/denoise-image`` had no deadline. A 256 x 256 image tuned on its own tiles
    takes far longer than the 2 s deadline: a 503 with ``Retry-After``, and its task stops at its next
    tuning candidate or tile (its named job ends cancelled)."""
    from tests.service.test_api_denoise_tuned import PNG, noisy_of, png, scene

    r = api.post("/v1/denoise-image?job=late", content=png(noisy_of(scene(256, 3), 0.1, 4)), headers=PNG)
    error = assert_error(r, 503, "unavailable", "body")
    assert "KPCA_SERVING_DEADLINE_S" in error["message"] and r.headers["retry-after"] == "10"
    deadline = time.monotonic() + 120
    while (job := api.get("/v1/image-jobs/late").json())["status"] == "running":
        assert time.monotonic() < deadline, "the image request's task ran on after its request ended"
        time.sleep(0.1)
    assert job["status"] == "cancelled", job
