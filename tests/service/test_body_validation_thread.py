"""Large JSON bodies of the row routes are validated off the event loop (`service.payloads.ThreadParsedRoute`).

Decoding a large body already ran in a worker thread, but FastAPI validated the decoded rows against the
body model on the event loop: a 13 MB ``/project`` of 10,000 rows x 64 stalled ``/healthz`` for about
0.3 s. Here a route of that class with a body model that records where it is validated, served by a real
uvicorn on loopback: a large body is validated (once) in a worker thread, a small one inline, and a
large invalid body gets the same 422 as a small one.
"""

from __future__ import annotations

import threading

import httpx
import pytest
from fastapi import APIRouter, FastAPI
from pydantic import BaseModel, field_validator

from bench._service import serving
from service.errors import install_error_handlers
from service.payloads import INLINE_JSON_BYTES, ThreadParsedRoute
from service.schemas.common import Number

validated_in: list[str] = []


class RowsBody(BaseModel):
    rows: list[list[Number]]

    @field_validator("rows")
    @classmethod
    def where(cls, rows):
        validated_in.append(threading.current_thread().name)
        return rows


router = APIRouter(route_class=ThreadParsedRoute)


@router.post("/rows")
async def count_rows(body: RowsBody) -> dict:
    return {"rows": len(body.rows)}


@router.get("/healthz")
async def healthz() -> dict:
    return {"status": "ok"}


@pytest.fixture(scope="module")
def url():
    app = FastAPI()
    install_error_handlers(app)
    app.include_router(router)
    with serving(app, lifespan="off") as base:  # uvicorn on loopback, in a thread of this process
        yield base


def test_a_large_body_is_validated_in_a_worker_thread_and_a_small_one_inline(url):
    large = {"rows": [[0.5] * 8] * (INLINE_JSON_BYTES // 16)}  # well over INLINE_JSON_BYTES of JSON
    validated_in.clear()
    r = httpx.post(f"{url}/rows", json=large, timeout=30)
    assert r.status_code == 200 and r.json() == {"rows": len(large["rows"])}
    assert len(validated_in) == 1 and validated_in[0].startswith("AnyIO worker thread"), validated_in
    validated_in.clear()
    assert httpx.post(f"{url}/rows", json={"rows": [[1.0, 2.0]]}, timeout=30).json() == {"rows": 1}
    assert len(validated_in) == 1 and not validated_in[0].startswith("AnyIO worker thread"), validated_in


def test_a_large_invalid_body_gets_the_same_422_as_a_small_one(url):
    small = httpx.post(f"{url}/rows", json={"rows": [[1.0, "x"]]}, timeout=30)
    rows = [[0.5] * 8] * (INLINE_JSON_BYTES // 16)
    large = httpx.post(f"{url}/rows", json={"rows": rows + [[1.0, "x"]]}, timeout=30)
    assert small.status_code == large.status_code == 422
    assert small.json()["error"]["field"] == "rows.0.1" and large.json()["error"]["field"] == f"rows.{len(rows)}.1"
    assert small.json()["error"]["code"] == large.json()["error"]["code"] == "invalid"
    missing = httpx.post(f"{url}/rows", json={"other": [[0.5] * 8] * (INLINE_JSON_BYTES // 16)}, timeout=30)
    assert missing.status_code == 422 and missing.json()["error"]["field"] == "rows"
