"""Limits on what one request (or one API key) may cost: body size, rows, patches, fits, disk.

The body size limit is enforced before any route sees the body
(``max_body_bytes``; the smaller ``max_serving_body_bytes`` on the serving
routes, whose JSON rows cost far more memory parsed than sent).

Two checks, so that neither a lying nor an absent ``Content-Length`` gets
past: a declared length over the limit is refused before the route runs (the
body is never read into memory), and the bytes actually received are counted
while the route reads the stream; crossing the limit raises `BodyTooLarge`
(a 413 `ApiError`) from ``receive``, which FastAPI's body reader and our own
chunk reader let through to the error handlers. A body that arrives too slowly
is a 408 the same way (`BodyTimeout`).

An answer given before the body has all arrived carries ``Connection: close``
(when the route had begun to read it, refused it unread, or never read a body
that is chunked or declared larger than 64 KiB), and the HTTP protocol ends such a
connection instead of reading the rest of the body to reach the next request
(`service.http_protocol`: the answer, the end of the stream, a linger of at most
256 KiB or 2 s, the close).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import threading
import time
from typing import Annotated

from fastapi import Depends, Request
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kpca.images.patches import patch_count
from service.errors import ApiError, error_response
from service.http_protocol import DRAIN_BYTES, body_length
from store.jobs.records import ACTIVE


class BodyTooLarge(ApiError):
    def __init__(self, limit: int, variable: str = "KPCA_MAX_BODY_BYTES", advice: str = "send the data in smaller "
                 "chunks"):
        self.limit = limit
        super().__init__(413, "too_large", f"request body is larger than the limit of {limit} bytes ({variable}); "
                         f"{advice}", "body")


class BodyTimeout(ApiError):
    """408: the body arrived more slowly than the settings allow (`BodyLimitMiddleware`)."""

    def __init__(self, received: int, waited_s: float, timeout_s: float, min_rate: int):
        super().__init__(408, "timeout", f"the request body arrived too slowly: {received} bytes in {waited_s:.0f} s "
                         f"of waiting for it; a body may take {timeout_s:g} s plus one second per {min_rate} bytes "
                         "(KPCA_BODY_TIMEOUT_S, KPCA_BODY_MIN_BYTES_PER_S); send it faster, or in smaller chunks",
                         "body")


class BodyLimitMiddleware:
    """Refuse request bodies over ``max_body_bytes`` (over ``max_serving_body_bytes`` on the serving
    routes, `SERVING_PATH`; over ``max_import_bytes`` on the model import, `IMPORT_PATH`, which streams
    its archive to disk) with 413, and bodies that arrive too slowly with 408: while the route waits for
    its body it may wait ``body_timeout_s`` plus one second per ``body_min_bytes_per_s`` bytes received,
    in all (the time the route spends elsewhere does not count). An answer sent after the route began to
    read the body and before its end carries ``Connection: close`` (module docstring)."""

    def __init__(self, app: ASGIApp, max_body_bytes: int, max_serving_body_bytes: int | None = None,
                 max_import_bytes: int | None = None, body_timeout_s: float | None = None,
                 body_min_bytes_per_s: int = 1024):
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_serving_body_bytes = max_serving_body_bytes
        self.max_import_bytes = max_import_bytes
        self.body_timeout_s = body_timeout_s
        self.body_min_bytes_per_s = body_min_bytes_per_s

    def _limit(self, path: str) -> BodyTooLarge:
        """The refusal a body over this path's limit gets (its ``limit`` attribute is the limit)."""
        if self.max_import_bytes is not None and IMPORT_PATH.match(path):
            return BodyTooLarge(self.max_import_bytes, "KPCA_MAX_IMPORT_BYTES", "ask the operator to raise it")
        if self.max_serving_body_bytes is not None and SERVING_PATH.match(path):
            if self.max_serving_body_bytes < self.max_body_bytes:
                return BodyTooLarge(self.max_serving_body_bytes, "KPCA_MAX_SERVING_BODY_BYTES",
                                    "send fewer rows per request")
        return BodyTooLarge(self.max_body_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        error = self._limit(scope.get("path", ""))
        limit = error.limit
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > limit:
            response = error_response(error.status_code, error.code, error.message, error.field,
                                      headers={"Connection": "close"})  # the body is not read: end the connection
            await response(scope, receive, send)
            return

        received, waited, begun, ended = 0, 0.0, False, False
        timeout, rate = self.body_timeout_s, self.body_min_bytes_per_s
        loop = asyncio.get_running_loop()

        async def counting_receive() -> Message:
            nonlocal received, waited, begun, ended
            if ended or timeout is None:
                message = await receive()  # after the body (a wait for the client to leave): no deadline
            else:
                begun = True
                budget = timeout + received / rate - waited
                if budget <= 0:
                    raise BodyTimeout(received, waited, timeout, rate)
                started = loop.time()
                try:
                    message = await asyncio.wait_for(receive(), budget)
                except TimeoutError:
                    raise BodyTimeout(received, waited + budget, timeout, rate) from None
                finally:
                    waited += loop.time() - started
            if message["type"] == "http.request":
                begun = True
                received += len(message.get("body", b""))
                ended = ended or not message.get("more_body", False)
                if received > limit:
                    raise error
            else:
                ended = True  # the client left
            return message

        small = declared_small(scope)

        async def closing_send(message: Message) -> None:
            if message["type"] == "http.response.start" and not ended and (begun or not small):
                message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        await self.app(scope, counting_receive, closing_send)


def declared_small(scope: Scope) -> bool:
    """Whether a request's body is declared and at most `service.http_protocol.DRAIN_BYTES` (none: 0): an
    answer that leaves it unread keeps the connection, which reads and drops it. O(headers)."""
    length = body_length(scope.get("headers"))
    return length is not None and length <= DRAIN_BYTES


# --- per-request and per-principal limits (Settings.max_*) -------------------------------------------

IMPORT_PATH = re.compile(r"^/v1/models/import/?$")
SERVING_PATH = re.compile(r"^/v1/(models|clusterings)/[^/]+/(project|reconstruct|denoise|denoise-image|predict)/?$")


def check_rows(n_rows: int, limit: int, field: str = "rows") -> None:
    """413 on ``field`` if a request carries more than ``limit`` rows (``max_rows_per_request``)."""
    if n_rows > limit:
        raise ApiError(413, "too_large", f"{field}: {n_rows} rows is over the limit of {limit} rows per request "
                       "(KPCA_MAX_ROWS_PER_REQUEST); send them in several requests", field)


def check_image_dataset(rows: int, features: int, patch: int, stride: int, limit: int) -> None:
    """422 on ``patch`` when a ``/from-image`` data set of ``rows`` patches of ``features`` values each
    would hold more than ``limit`` values (``max_image_dataset_values``), naming patch, stride, the
    size and the limit. Cost O(1)."""
    values = rows * features
    if values > limit:
        raise ApiError(422, "invalid", f"patch {patch} with stride {stride} would make {rows} rows x {features} "
                       f"features = {values} values ({values * 4} bytes of float32), over the limit of {limit} "
                       "values (KPCA_MAX_IMAGE_DATASET_VALUES); use a smaller patch, a larger stride or a smaller "
                       "image", "patch")


def check_patches(height: int, width: int, patch: int, stride: int, limit: int | None, setting: str,
                  field: str = "stride") -> int:
    """The patch count of an image request (`kpca.images.patches.patch_count`), or a 422 on ``field``
    (``stride``, ``patch``) naming the count and the limit (``setting``: the environment variable) when
    it is over ``limit`` (None: a request that reads its patches a band at a time, not bounded so). Cost O(1)."""
    count = patch_count(height, width, patch, stride)
    if limit is not None and count > limit:
        raise ApiError(422, "invalid", f"a {height}x{width} image cut into {patch}x{patch} patches with stride "
                       f"{stride} gives {count} patches, over the limit of {limit} ({setting}); use a larger "
                       "stride or a smaller image", field)
    return count


def principal(request: Request) -> str | None:
    """Who sent the request: the API key's id set by the security middleware, None without keys (one
    anonymous principal)."""
    return getattr(request.state, "principal", None)


def fit_owner(request: Request) -> str | None:
    """Route dependency of the job-creating routes: the request's principal, after checking that it has
    fewer than ``max_fits_per_key`` queued or running jobs (models and clusterings together, the
    ``/v1/denoise-image`` requests it runs now, `store.running`, and its background image jobs); 429 with
    ``Retry-After`` otherwise.
    Cost: one listing of each registry and of the running requests."""
    owner = principal(request)
    limit = request.app.state.settings.max_fits_per_key
    active = 0
    for attribute in ("models", "clusterings"):
        registry = getattr(request.app.state, attribute, None)
        if registry is not None:
            active += sum(1 for r in registry.list() if r.status in ACTIVE and getattr(r, "owner", None) == owner)
    running = getattr(request.app.state, "running", None)
    if running is not None:
        active += running.count(owner)
    image_jobs = getattr(request.app.state, "image_jobs", None)
    if image_jobs is not None:  # background image jobs (`store.image_jobs`)
        active += image_jobs.running(owner)
    if active >= limit:
        raise FitsBusy(active, limit)
    return owner


FitOwner = Annotated[str | None, Depends(fit_owner)]


class FitsBusy(ApiError):
    """429: the principal already has ``limit`` fits queued or running."""

    RETRY_AFTER_S = 30

    def __init__(self, active: int, limit: int):
        super().__init__(429, "too_many_fits", f"{active} fits (models, clusterings and /v1/denoise-image "
                         f"requests) of this API key are queued or running, the limit is {limit} "
                         "(KPCA_MAX_FITS_PER_KEY); wait for one to finish, or cancel one, and retry", "name")
        self.headers = {"Retry-After": str(self.RETRY_AFTER_S)}


class DataUsage:
    """Bytes under the data folder against ``max_data_bytes`` (None: unlimited).

    The folder is walked once when this is made, then again at most every ``ttl_s`` seconds in a
    thread of its own: no caller, the event loop included, ever waits for a walk (a walk of a busy
    folder was one of the event loop's stalls under bench/load.py). Writes accepted in
    between are added to the figure (`add`), so a burst of uploads cannot overshoot by more than one
    ``ttl_s`` (plus one walk) of other writers (workers).
    """

    def __init__(self, data_dir, limit: int | None, ttl_s: float = 5.0, used: int | None = None):
        self.data_dir = str(data_dir)
        self.limit = limit
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._added = 0  # bytes counted by `add` since this was made
        self._walking = False
        self._bytes = 0 if limit is None else folder_bytes(self.data_dir) if used is None else int(used)
        self._walked_at = time.monotonic()

    def used(self) -> int:
        """Bytes in the data folder: the last walk's figure plus what `add` counted since it began.
        O(1); starts a walk in a thread of its own when the figure is older than ``ttl_s``."""
        with self._lock:
            return self._used_locked()

    def _used_locked(self) -> int:
        if self.limit is not None and time.monotonic() - self._walked_at > self.ttl_s and not self._walking:
            self._walking = True
            threading.Thread(target=self._walk, args=(self._added,), name="data-usage-walk", daemon=True).start()
        return self._bytes

    def _walk(self, added_before: int) -> None:
        """Walk the folder (`folder_bytes`) and keep its figure plus the bytes added during the walk."""
        try:
            walked = folder_bytes(self.data_dir)
            with self._lock:
                self._bytes = walked + self._added - added_before
                self._walked_at = time.monotonic()
        finally:
            with self._lock:
                self._walking = False

    def add(self, n_bytes: int) -> None:
        """Count ``n_bytes`` just written until the next walk."""
        with self._lock:
            self._bytes += max(0, int(n_bytes))
            self._added += max(0, int(n_bytes))

    def check(self, n_bytes: int, field: str = "body") -> None:
        """413 ``storage_full`` on ``field`` if writing ``n_bytes`` more would exceed the limit. O(1)
        (`used`)."""
        if self.limit is None:
            return
        used = self.used()
        if used + n_bytes > self.limit:
            raise self._full(used, n_bytes, field)

    def take(self, n_bytes: int, field: str = "body") -> None:
        """`check` and `add` at once, under one lock: ``n_bytes`` about to be written are counted, or a 413
        ``storage_full`` on ``field`` if they would exceed the limit. Writers that take each piece before
        they write it (an import streamed to disk) together never hold more than the limit. O(1)."""
        with self._lock:
            used = self._used_locked()
            if self.limit is not None and used + n_bytes > self.limit:
                raise self._full(used, n_bytes, field)
            self._bytes += max(0, int(n_bytes))
            self._added += max(0, int(n_bytes))

    def release(self, n_bytes: int) -> None:
        """Uncount ``n_bytes`` counted (`take`, `add`) and removed since, and walk the folder again at the
        next look: the figure may stay above the folder's bytes until that walk ends, never below. O(1)."""
        with self._lock:
            self._bytes = max(0, self._bytes - max(0, int(n_bytes)))
            self._walked_at = float("-inf")

    def _full(self, used: int, n_bytes: int, field: str) -> ApiError:
        return ApiError(413, "storage_full", f"the data folder holds {used} bytes; {n_bytes} more would exceed "
                        f"the limit of {self.limit} bytes (KPCA_MAX_DATA_BYTES); delete data sets or models "
                        "you no longer need", field)


def folder_bytes(path: str) -> int:
    """Total size of the regular files below ``path`` (symbolic links not followed). O(files)."""
    total = 0
    stack = [path]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            total += entry.stat(follow_symlinks=False).st_size
                    except OSError:  # removed meanwhile
                        continue
        except OSError:
            continue
    return total


#: The share of the disk's free bytes at start that the data folder may grow by when ``max_data_bytes``
#: is not set (the rest is left to checkpoints' temporary files, logs and the system).
DATA_DISK_FRACTION = 0.8


def automatic_data_limit(data_dir, fraction: float = DATA_DISK_FRACTION, used: int | None = None) -> int:
    """The default ``max_data_bytes``: what the data folder holds now (``used`` if the caller has walked
    it) plus ``fraction`` of the free bytes of the disk it is on (its nearest existing folder when it
    does not exist yet). Cost: one walk of the folder (`folder_bytes`) unless ``used`` is given, and one
    ``statvfs``."""
    folder = os.path.abspath(str(data_dir))
    probe = folder
    while not os.path.isdir(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    free = shutil.disk_usage(probe).free
    if used is None:
        used = folder_bytes(folder) if os.path.isdir(folder) else 0
    return used + max(1, int(fraction * free))


def resolved_data_limit(data_dir, setting: int | None, used: int | None = None) -> int | None:
    """``max_data_bytes`` as the service applies it: None (unset) -> `automatic_data_limit` (with the
    folder's ``used`` bytes if known); 0 -> None (unlimited); otherwise the setting. Cost:
    `automatic_data_limit` when unset, else O(1)."""
    if setting is None:
        return automatic_data_limit(data_dir, used=used)
    return setting or None


def data_usage(request: Request) -> DataUsage:
    """The app's `DataUsage` (created with the app)."""
    return request.app.state.data_usage


async def _data_usage_dependency(request: Request) -> DataUsage:
    """`data_usage` as a route dependency, on the event loop (`service.deps`)."""
    return data_usage(request)


DataUsageDep = Annotated[DataUsage, Depends(_data_usage_dependency)]
