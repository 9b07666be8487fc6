"""``GET /v1/models/{name}/events``: a model's progress as server-sent events, read from its record.

The record is read by the app's `service.event_hub.EventHub`: one watcher per model shared by all its
streams, at most ``max_event_streams`` streams open (503 with ``Retry-After`` past it). The route
writes the wire format itself (FastAPI's, `_sse`), a keep-alive comment after 15 s of silence, and
``Cache-Control: no-cache``; the stream ends within `DISCONNECT_CHECK_S` of its client going away."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse
from fastapi.sse import KEEPALIVE_COMMENT
from starlette.concurrency import run_in_threadpool

from service.deps import ModelsDep
from service.event_hub import EventHub, Slot
from service.routes.models import ERRORS, ModelName
from service.schemas.openapi import Responses
from service.security import READ, access
from store.jobs.records import ACTIVE, TERMINAL, ModelRecord, PassRecord

#: Seconds a stream waits for news before it checks that its client is still there.
DISCONNECT_CHECK_S = 1.0
#: Seconds of silence after which a stream sends a keep-alive comment (proxies close silent streams).
PING_S = 15.0

router = APIRouter(prefix="/v1/models", tags=["models"])


class EventStream(StreamingResponse):
    """A ``text/event-stream`` answer of bytes made by the route (`_event_stream`), not by FastAPI's
    per-item event machinery (which `fastapi.sse.EventSourceResponse` as a route's class switches on):
    an event is encoded once for every stream that needs it, and one news is one write."""

    media_type = "text/event-stream"


def _last_event_id(request: Request) -> int:
    """The pass named by the ``Last-Event-ID`` header of a reconnecting client (0 without one, or
    with one that is not a pass number: everything is replayed)."""
    try:
        return max(0, int(request.headers.get("last-event-id", "0").strip()))
    except ValueError:
        return 0


def progress_event(entry: PassRecord, record: ModelRecord) -> dict:
    """A ``progress`` event's data: the pass's history record, plus ``passes`` (the fit's total: what an ended
    fit ran to, what a running one is asked for, resumed or not), ``remaining_s`` (the record's estimate for its
    latest pass; for an earlier pass, or the last pass before a resume, seconds per pass so far times the passes
    left then) and ``workers`` (1 where the record says None: one)."""
    data = entry.model_dump(mode="json", by_alias=True)
    passes = record.passes
    progress = record.progress
    if progress is not None and progress.pass_ == entry.pass_ and record.status not in ACTIVE:
        passes, remaining = progress.passes, progress.remaining_s  # an ended fit's own count (it may stop early)
    elif progress is not None and progress.pass_ == entry.pass_ and progress.passes == record.passes:
        remaining = progress.remaining_s
    else:  # an earlier pass, or the last pass of a fit resumed to more passes: the fit's total now
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
                 "description": "JSON: a pass record with passes, remaining_s and workers (progress), "
                                "{status, error} (status) or {status} (end)"},
        "id": {"type": "string", "description": "the pass number (progress events)"},
    },
}
#: the errors come before the stream, as JSON (with ``model=``, FastAPI would document them as events)
_ERROR_BODY = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
EVENT_ERRORS: Responses = {**{status: {"description": ERRORS[status]["description"], "content": _ERROR_BODY}
                   for status in (404, 422)},
                503: {"description": "max_event_streams (KPCA_MAX_EVENT_STREAMS) streams are open; see Retry-After",
                      "content": _ERROR_BODY}}
EVENTS_RESPONSE: Responses = {200: {
    "description": "a stream of server-sent events (progress, status, end) until the fit ends; "
                   "a comment line every 15 s of silence keeps proxies from closing it",
    "content": {"text/event-stream": {"schema": EVENT_SCHEMA}}}}


async def _existing(name: ModelName, models: ModelsDep) -> str:
    """The model's name once its record exists: the 404 comes before the stream starts."""
    await run_in_threadpool(models.get, name)
    return name


async def _slot(request: Request, name: Annotated[str, Depends(_existing)]) -> AsyncIterator[Slot]:
    """A stream slot of the app's `EventHub` (a 503 before the stream starts when all are taken), held
    until the stream ends; taken and given back on the event loop (a plain generator would run in worker
    threads, which could interleave the count's updates)."""
    slot = request.app.state.event_hub.reserve()
    try:
        yield slot
    finally:
        slot.release()


@router.get("/{name}/events", openapi_extra=access(READ), responses={**EVENT_ERRORS, **EVENTS_RESPONSE},
            response_class=EventStream)
async def model_events(name: Annotated[str, Depends(_existing)], slot: Annotated[Slot, Depends(_slot, scope="request")],
                       request: Request) -> EventStream:
    """Server-sent events: one ``progress`` event per finished pass (the history
    records, earlier ones first, each with ``passes``, ``remaining_s`` and ``workers``; its event
    id is the pass), a ``status`` event on every status change, and a final ``end`` event when the
    fit is completed, failed or cancelled. A client that reconnects with ``Last-Event-ID: k`` gets
    only the passes after k (and the current status); after a fit went back to an earlier
    checkpoint, the passes after that checkpoint."""
    stream = _event_stream(request.app.state.event_hub, name, _last_event_id(request), request)
    return EventStream(stream, headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def _event_stream(hub: EventHub, name: str, last_pass: int, request: Request) -> AsyncIterator[bytes]:
    """The bytes of the stream: what changed in the record at each news of the model's watcher, the
    events of one news in one piece, encoded once for all the streams that saw the same before
    (`_events_since` through the watcher's cache); a keep-alive comment after `PING_S` of silence."""
    last_status, silent = None, 0.0
    async with hub.watch(name) as watch:
        while not await request.is_disconnected():
            changed, record = await watch.next(DISCONNECT_CHECK_S)
            if not changed:
                silent += DISCONNECT_CHECK_S
                if silent >= PING_S:
                    silent = 0.0
                    yield KEEPALIVE_COMMENT
                continue
            silent = 0.0
            chunk, last_pass, last_status, done = watch.shared(  # make() runs now: the loop's values, bound
                (last_pass, last_status),
                lambda record=record, seen=last_pass, status=last_status: _events_since(record, seen, status))
            if chunk:
                yield chunk
            if done:
                return


def _events_since(record: ModelRecord | None, last_pass: int, last_status: str | None) -> tuple:
    """``(bytes, last_pass, last_status, done)``: the events a stream that has seen passes up to
    ``last_pass`` and status ``last_status`` gets from ``record`` (None: deleted), where it then
    stands, and whether the stream ends. Cost O(new passes), not O(history)."""
    if record is None:
        return _sse("end", {"status": "deleted"}), last_pass, last_status, True
    history = record.history
    last_pass = min(last_pass, history[-1].pass_ if history else 0)  # resumed from an earlier checkpoint
    fresh = []
    for entry in reversed(history):
        if entry.pass_ <= last_pass:
            break
        fresh.append(entry)
    events = [_sse("progress", progress_event(entry, record), str(entry.pass_)) for entry in reversed(fresh)]
    last_pass = history[-1].pass_ if history else 0
    if record.status != last_status:
        last_status = record.status
        error = record.error.model_dump() if record.error is not None else None
        events.append(_sse("status", {"status": record.status, "error": error}))
    done = record.status in TERMINAL
    if done:
        events.append(_sse("end", {"status": record.status}))
    return b"".join(events), last_pass, last_status, done


def _sse(event: str, data: dict, event_id: str | None = None) -> bytes:
    """One server-sent event as FastAPI writes it (``event:``, ``data:`` JSON with non-finite numbers as
    null, ``id:``, a blank line)."""
    lines = [f"event: {event}", f"data: {json.dumps(_finite(data))}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    return ("\n".join(lines) + "\n\n").encode()


def _finite(value):
    """``value`` with every non-finite float (inf, nan) replaced by None, as JSON cannot hold them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value
