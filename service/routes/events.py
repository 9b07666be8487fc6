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
from store.records import TERMINAL

EVENT_POLL_S = 0.25
EVENT_KEEPALIVE_S = 15.0

router = APIRouter(prefix="/v1/models", tags=["models"])


def _sse(event: str, data: dict, event_id: str | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data)}\n\n".encode()


#: the 200 response: ``schema`` describes each event (OpenAPI 3.1 has no ``itemSchema``)
EVENT_SCHEMA = {
    "type": "object", "required": ["event", "data"],
    "properties": {
        "event": {"type": "string", "enum": ["progress", "status", "end"],
                  "description": "progress: a finished pass; status: a status change; end: the last event"},
        "data": {"type": "string", "contentMediaType": "application/json",
                 "description": "JSON: a pass record (progress), {status, error} (status) or {status} (end)"},
        "id": {"type": "string", "description": "the pass number (progress events)"},
    },
}
EVENTS_RESPONSE = {200: {"description": "a stream of server-sent events (progress, status, end) until the fit ends",
                         "content": {"text/event-stream": {"schema": EVENT_SCHEMA}}}}


@router.get("/{name}/events", responses={**ERRORS, **EVENTS_RESPONSE}, response_class=StreamingResponse)
async def model_events(name: ModelName, models: ModelsDep, request: Request) -> StreamingResponse:
    """Server-sent events: one ``progress`` event per finished pass (the history
    records, earlier ones first), a ``status`` event on every status change,
    and a final ``end`` event when the fit is completed, failed or cancelled."""
    await run_in_threadpool(models.get, name)  # 404 before the stream starts

    async def stream() -> AsyncIterator[bytes]:
        sent, last_status = 0, None
        loop = asyncio.get_running_loop()
        quiet_since = loop.time()
        while not await request.is_disconnected():
            try:
                record = await run_in_threadpool(models.get, name)
            except NotFound:
                yield _sse("end", {"status": "deleted"})
                return
            history = record.history
            if len(history) < sent:  # resumed from an earlier checkpoint
                sent = 0
            for entry in history[sent:]:
                yield _sse("progress", entry.model_dump(mode="json", by_alias=True), str(entry.pass_))
                quiet_since = loop.time()
            sent = len(history)
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
