"""The smallest HTTP server on the service's stack, for bench/load.py's control probe: uvicorn with
uvloop and httptools (as `python -m service` runs) and an ASGI app of a few lines that answers every
request with ``{"status": "ok"}``, as ``/healthz`` does. Nothing else runs in its process, so its
answer time under load is the machine's own delay in scheduling a process that has a request to
answer (its share of the cores, the loopback's cost), with none of the service's code or threads.

    python bench/_bare_server.py PORT
"""

from __future__ import annotations

import sys

import uvicorn

BODY = b'{"status":"ok"}'
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]


async def app(scope, receive, send) -> None:
    """Answer every HTTP request with ``BODY``; accept lifespan events."""
    if scope["type"] == "lifespan":
        while True:
            event = (await receive())["type"]  # lifespan.startup, then lifespan.shutdown
            await send({"type": f"{event}.complete"})
            if event == "lifespan.shutdown":
                return
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), loop="uvloop", http="httptools",
                log_level="warning", access_log=False)
