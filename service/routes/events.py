"""``GET /v1/models/{name}/events``: a model's progress as server-sent events, read from its record."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from service.deps import ModelsDep
from service.routes.models import ERRORS, ModelName
from store.errors import NotFound
from store.records import TERMINAL, ModelRecord, PassRecord

EVENT_POLL_S = 0.25
EVENT_KEEPALIVE_S = 15.0

router = APIRouter(prefix="/v1/models", tags=["models"])


def _sse(event: str, data: dict, event_id: str | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _last_event_id(request: Request) -> int:
    """The pass named by the ``Last-Event-ID`` header of a reconnecting client (0 without one, or
    with one that is not a pass number: everything is replayed)."""
    try:
        return max(0, int(request.headers.get("last-event-id", "0").strip()))
    except ValueError:
        return 0


def progress_event(entry: PassRecord, record: ModelRecord) -> dict:
    """A ``progress`` event's data: the pass's history record, plus ``passes`` (the fit's total),
    ``remaining_s`` (the record's estimate for its latest pass; for an earlier pass, seconds per
    pass so far times the passes left then) and ``workers`` (1 where the record says None: one)."""
    data = entry.model_dump(mode="json", by_alias=True)
    passes = record.passes
    progress = record.progress
    if progress is not None and progress.pass_ == entry.pass_:
        passes, remaining = progress.passes, progress.remaining_s
    else:
        remaining = entry.elapsed_s / max(entry.pass_, 1) * max(passes - entry.pass_, 0)
    return {**data, "passes": passes, "remaining_s": remaining, "workers": entry.workers or 1}



#: the 200 response: ``schema`` describes each event (OpenAPI 3.1 has no ``itemSchema``)
EVENT_SCHEMA = {
    "type": "object", "required": ["event", "data"],
    "properties": {
        "event": {"type": "string", "enum": ["progress", "status", "end"],
                  "description": "progress: a finished pass; status: a status change; end: the last event"},
        "data": {"type": "string", "contentMediaType": "application/json",
                 "description": "JSON: a pass record with passes, remaining_s and workers (progress), {status, error} (status) or {status} (end)"},
        "id": {"type": "string", "description": "the pass number (progress events)"},
    },
}
EVENTS_RESPONSE = {200: {"description": "a stream of server-sent events (progress, status, end) until the fit ends",
                         "content": {"text/event-stream": {"schema": EVENT_SCHEMA}}}}


@router.get("/{name}/events", responses={**ERRORS, **EVENTS_RESPONSE}, response_class=StreamingResponse)
async def model_events(name: ModelName, models: ModelsDep, request: Request) -> StreamingResponse:
    """Server-sent events: one ``progress`` event per finished pass (the history
    records, earlier ones first, each with ``passes``, ``remaining_s`` and ``workers``; its event
    id is the pass), a ``status`` event on every status change, and a final ``end`` event when the
    fit is completed, failed or cancelled. A client that reconnects with ``Last-Event-ID: k`` gets
    only the passes after k (and the current status); after a fit went back to an earlier
    checkpoint, the passes after that checkpoint."""
    await run_in_threadpool(models.get, name)  # 404 before the stream starts
    last_pass = _last_event_id(request)

    async def stream() -> AsyncIterator[bytes]:
        nonlocal last_pass
        last_status = None
        loop = asyncio.get_running_loop()
        quiet_since = loop.time()
        while not await request.is_disconnected():
            try:
                record = await run_in_threadpool(models.get, name)
            except NotFound:
                yield _sse("end", {"status": "deleted"})
                return
            history = record.history
            last_pass = min(last_pass, history[-1].pass_ if history else 0)  # resumed from an earlier checkpoint
            for entry in history:
                if entry.pass_ > last_pass:
                    yield _sse("progress", progress_event(entry, record), str(entry.pass_))
                    quiet_since = loop.time()
            last_pass = history[-1].pass_ if history else 0
            if record.status != last_status:
                last_status = record.status
                error = record.error.model_dump() if record.error is not None else None
                yield _sse("status", {"status": record.status, "error": error})
                quiet_since = loop.time()
            if record.status in TERMINAL:
                yield _sse("end", {"status": record.status})
                return
            if loop.time() - quiet_since > EVENT_KEEPALIVE_S:
                yield b": keep-alive\n\n"
                quiet_since = loop.time()
            await asyncio.sleep(EVENT_POLL_S)

    return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
