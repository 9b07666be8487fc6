"""``GET /v1/models/{name}/events``: a model's progress as server-sent events, read from its record.

The record is read by the app's `service.event_hub.EventHub`: one watcher per model shared by all its
streams, at most ``max_event_streams`` streams open (503 with ``Retry-After`` past it). FastAPI's
`EventSourceResponse` does the wire format, the keep-alive comments (every 15 s of silence),
``Cache-Control: no-cache`` and the end of the generator when the client goes away."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.sse import EventSourceResponse, ServerSentEvent
from starlette.concurrency import run_in_threadpool

from service.deps import ModelsDep
from service.event_hub import EventHub, Slot
from service.routes.models import ERRORS, ModelName
from service.security import READ, access
from store.jobs.records import TERMINAL, ModelRecord, PassRecord

#: Seconds a stream waits for news before it checks that its client is still there.
DISCONNECT_CHECK_S = 1.0

router = APIRouter(prefix="/v1/models", tags=["models"])


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



#: the 200 response: ``schema`` describes each event (OpenAPI 3.1 has no ``itemSchema``; the one FastAPI
#: adds for event streams is taken out, `service.schemas.openapi.without_item_schemas`)
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
#: the errors come before the stream, as JSON (with ``model=``, FastAPI would document them as events)
_ERROR_BODY = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
EVENT_ERRORS = {**{status: {"description": ERRORS[status]["description"], "content": _ERROR_BODY} for status in (404, 422)},
                503: {"description": "max_event_streams (KPCA_MAX_EVENT_STREAMS) streams are open; see Retry-After",
                      "content": _ERROR_BODY}}
EVENTS_RESPONSE = {200: {"description": "a stream of server-sent events (progress, status, end) until the fit ends; "
                                        "a comment line every 15 s of silence keeps proxies from closing it",
                         "content": {"text/event-stream": {"schema": EVENT_SCHEMA}}}}


async def _existing(name: ModelName, models: ModelsDep) -> str:
    """The model's name once its record exists: the 404 comes before the stream starts."""
    await run_in_threadpool(models.get, name)
    return name


def _slot(request: Request, name: Annotated[str, Depends(_existing)]) -> Iterator[Slot]:
    """A stream slot of the app's `EventHub` (a 503 before the stream starts when all are taken), held
    until the stream ends."""
    slot = request.app.state.event_hub.reserve()
    try:
        yield slot
    finally:
        slot.release()


@router.get("/{name}/events", openapi_extra=access(READ), responses={**EVENT_ERRORS, **EVENTS_RESPONSE},
            response_class=EventSourceResponse)
async def model_events(name: Annotated[str, Depends(_existing)], slot: Annotated[Slot, Depends(_slot, scope="request")],
                       request: Request) -> AsyncIterator[ServerSentEvent]:
    """Server-sent events: one ``progress`` event per finished pass (the history
    records, earlier ones first, each with ``passes``, ``remaining_s`` and ``workers``; its event
    id is the pass), a ``status`` event on every status change, and a final ``end`` event when the
    fit is completed, failed or cancelled. A client that reconnects with ``Last-Event-ID: k`` gets
    only the passes after k (and the current status); after a fit went back to an earlier
    checkpoint, the passes after that checkpoint."""
    hub: EventHub = request.app.state.event_hub
    last_pass = _last_event_id(request)
    last_status = None
    async with hub.watch(name) as watch:
        while not await request.is_disconnected():
            changed, record = await watch.next(DISCONNECT_CHECK_S)
            if not changed:
                continue
            if record is None:
                yield ServerSentEvent(event="end", data={"status": "deleted"})
                return
            history = record.history
            last_pass = min(last_pass, history[-1].pass_ if history else 0)  # resumed from an earlier checkpoint
            for entry in history:
                if entry.pass_ > last_pass:
                    yield ServerSentEvent(event="progress", data=progress_event(entry, record), id=str(entry.pass_))
            last_pass = history[-1].pass_ if history else 0
            if record.status != last_status:
                last_status = record.status
                error = record.error.model_dump() if record.error is not None else None
                yield ServerSentEvent(event="status", data={"status": record.status, "error": error})
            if record.status in TERMINAL:
                yield ServerSentEvent(event="end", data={"status": record.status})
                return
