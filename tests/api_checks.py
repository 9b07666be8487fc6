"""Assertions on the service's error bodies, uploading small data sets, and waiting for fits, shared by
the API tests."""

import resource
import tracemalloc

import numpy as np

from client.upload import npy_bytes  # noqa: F401  (the client's .npy body, for the API tests)
from tests.waiting import PATIENCE_S, wait_until


def upload_rows(api, name: str, X, chunks: int = 1, commit: bool = True) -> None:
    """Create float64 data set ``name`` from the rows of X in ``chunks`` JSON chunks, and commit it
    (asserting it is ready) unless ``commit`` is False."""
    X = np.asarray(X)
    api.post("/v1/datasets", json={"name": name, "n_features": X.shape[1], "dtype": "float64"}).raise_for_status()
    for i, part in enumerate(np.array_split(X, chunks)):
        api.put(f"/v1/datasets/{name}/chunks/{i}", json={"rows": part.tolist()}).raise_for_status()
    if commit:
        assert api.post(f"/v1/datasets/{name}/commit", json={}).json()["status"] == "ready"


def assert_error(response, status: int, code: str, field: str | None) -> dict:
    """The response is ``status`` with ``{"error": {code, field, message}}`` as given and a message; returns the error."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == (code, field), error
    assert error["message"], error
    return error


def error_message(response, status: int, code: str, field: str | None) -> str:
    """`assert_error`, returning just the message."""
    return assert_error(response, status, code, field)["message"]


def wait_for_fit(api, name: str, timeout: float = PATIENCE_S, route: str = "/v1/models") -> dict:
    """Poll ``GET {route}/{name}`` (a model, or a clustering with ``route="/v1/clusterings"``) until the
    fit is no longer queued or running; the final record."""
    seen = {}

    def ended() -> bool:
        seen["record"] = api.get(f"{route}/{name}").json()
        return seen["record"]["status"] not in ("queued", "running")

    wait_until(ended, timeout, lambda: f"the fit of {name} to end (last seen: {seen['record']})")
    return seen["record"]


def fitted(api, body: dict, route: str = "/v1/models") -> dict:
    """``POST {route}`` ``body`` (a model or, with ``route="/v1/clusterings"``, a clustering), asserting its
    202, then `wait_for_fit`; the record, asserted completed."""
    r = api.post(route, json=body)
    assert r.status_code == 202, r.text
    record = wait_for_fit(api, body["name"], route=route)
    assert record["status"] == "completed", record
    return record


def wait_for_pass(api, name: str, n: int, timeout: float = PATIENCE_S, route: str = "/v1/models") -> dict:
    """Poll ``GET {route}/{name}`` until the running fit has completed ``n`` passes; the record then (a fit
    that ends before fails the test)."""
    seen = {}

    def reached() -> bool:
        record = seen["record"] = api.get(f"{route}/{name}").json()
        if (record.get("progress") or {}).get("pass", 0) >= n:
            return True
        assert record["status"] in ("queued", "running"), record
        return False

    wait_until(reached, timeout, lambda: f"pass {n} of the fit of {name} (last seen: {seen['record']})", interval=0.02)
    return seen["record"]


def peak_rss_bytes() -> int:
    """This process's (the in-process server's and the client's) peak resident memory since the last
    `reset_peak_rss`: VmHWM, which Linux resets on request; else the peak since the process started."""
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) * 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux


def traced_peak_bytes(call):
    """``(call(), bytes)``: what ``call`` returns, and the most memory Python's allocators held for it at
    once in this process (its server threads and its client), by `tracemalloc`. Unlike the resident
    memory, it cannot be hidden by memory that earlier requests freed and this one reused. Slows the
    process while it runs."""
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def reset_peak_rss() -> int:
    """The peak of `peak_rss_bytes` set to the resident memory now (Linux >= 4.0: ``5`` to
    /proc/self/clear_refs), so that what a request grows is measured whatever earlier tests in this
    process peaked at (with the lifetime peak, a higher earlier peak hid the growth); then `peak_rss_bytes`."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        pass
    return peak_rss_bytes()
