"""Upload a numpy or zarr array to kpca-stream in chunks, resumably, with retries.

The server keeps chunks idempotent by index, so an interrupted upload is
resumed by calling `upload_array` again: it asks which indices have arrived
and sends only the missing ones.

A name that already holds committed data is never silently reused: the same
rows again (however they are cut into requests) are a no-op that returns the
set's metadata; other rows are an `UploadError`, unless ``append=True`` asks
for them to be added as the set's next version.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import io
import math
import os
import time
from datetime import UTC, datetime

import httpx
import numpy as np
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

RETRY_STATUS = {429, 502, 503, 504}
#: Longest wait between two attempts, in seconds, whatever the backoff or ``Retry-After`` say.
MAX_WAIT_S = 60.0
TARGET_CHUNK_BYTES = 8 * 2**20
#: Most chunk lengths tried per version when looking for how a stored set was cut (`same_rows`).
MAX_CHUNKINGS = 16


#: how `upload_array`'s refusal names its ``append`` option (`RowsDiffer`; the CLI says ``--append``)
APPEND_WORDS = "append=True"


class UploadError(RuntimeError):
    """The server refused a request; the message carries its error body."""


class RowsDiffer(UploadError):
    """The name holds committed rows other than the array's, and ``append`` was not asked for."""


def content_digest(body: bytes) -> str:
    """The ``Content-Digest`` header (RFC 9530, sha-256) of a body: the service refuses a chunk whose bytes
    were altered on their way instead of storing them. O(len(body))."""
    return "sha-256=:" + base64.b64encode(hashlib.sha256(body).digest()).decode("ascii") + ":"

def default_chunk_rows(array) -> int:
    """Rows per request: the array's own row chunking if it has one, else about 8 MiB per chunk."""
    chunks = getattr(array, "chunks", None)
    if chunks and isinstance(chunks[0], int) and chunks[0] > 0:
        return int(chunks[0])
    row_bytes = max(1, int(array.shape[1]) * np.dtype(array.dtype).itemsize)
    return max(1, TARGET_CHUNK_BYTES // row_bytes)


class _Retryable(Exception):
    """A 429 or 5xx answer, to be retried (tenacity retries on exceptions)."""

    def __init__(self, response: httpx.Response):
        super().__init__(response.status_code)
        self.response = response


def retry_after_s(response: httpx.Response) -> float | None:
    """Seconds the server asks to wait (``Retry-After``: seconds, or an HTTP date), or None without a
    usable header. Only 429 and 503 answers carry one that counts."""
    if response.status_code not in (429, 503):
        return None
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _wait(backoff: float, max_wait: float):
    """Tenacity wait: the server's ``Retry-After`` where it gave one, else exponential backoff with full
    jitter (uniform in [0, backoff * 2**attempt]); at most ``max_wait`` seconds either way."""
    jitter = wait_random_exponential(multiplier=backoff, max=max_wait)

    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        asked = retry_after_s(error.response) if isinstance(error, _Retryable) else None
        return min(asked, max_wait) if asked is not None else jitter(state)

    return wait


def _request(client: httpx.Client, method: str, url: str, retries: int, backoff: float, *,
             max_wait: float = MAX_WAIT_S, sleep=time.sleep, **kwargs) -> httpx.Response:
    """``client.request(method, url, **kwargs)``, retried ``retries`` times on transport errors and
    429/5xx answers (`_wait`: ``Retry-After``, else jittered exponential backoff); other answers
    are returned as they are. ``sleep`` is the wait function (tests pass a recorder)."""

    def attempt() -> httpx.Response:
        response = client.request(method, url, **kwargs)
        if response.status_code in RETRY_STATUS or response.status_code >= 500:
            raise _Retryable(response)
        return response

    retrying = Retrying(stop=stop_after_attempt(retries + 1), wait=_wait(backoff, max_wait), sleep=sleep,
                        retry=retry_if_exception_type((httpx.TransportError, _Retryable)), reraise=True)
    try:
        return retrying(attempt)
    except _Retryable as exc:
        raise UploadError(f"{method} {url} -> {exc.response.status_code}: {exc.response.text} "
                          f"(after {retries + 1} attempts)") from None
    except httpx.TransportError as exc:
        raise UploadError(f"{method} {url}: {exc} (after {retries + 1} attempts; is the service running?)") from None


def _ok(response: httpx.Response, *expected: int, raw: bool = False):
    """The decoded JSON body of ``response`` (the response itself with ``raw``) if its status is one of
    ``expected``, else `UploadError` carrying the server's answer."""
    if response.status_code not in expected:
        raise UploadError(f"{response.request.method} {response.request.url} -> {response.status_code}: "
                          f"{response.text}")
    if raw:
        return response
    return response.json() if response.content else {}


def npy_bytes(array) -> bytes:
    """``array`` as the bytes of a ``.npy`` file (never pickled): a chunk's or a serving request's body.
    O(array)."""
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _chunk_digest(rows, dtype: str) -> str:
    """sha256 hex of a chunk's rows cast to the set's dtype, C order: the server's chunk digest."""
    return hashlib.sha256(np.ascontiguousarray(np.asarray(rows), dtype=np.dtype(dtype)).data).hexdigest()


def _checksum(digests: list[str]) -> str:
    """A version's checksum from its chunk digests (the server's documented scheme)."""
    return "sha256:" + hashlib.sha256("".join(digests).encode("ascii")).hexdigest()


def _chunkings(n_rows: int, n_chunks: int, preferred: list[int]) -> list[int]:
    """Chunk lengths c that cut ``n_rows`` rows into ``n_chunks`` chunks (all c rows but the last), the
    ``preferred`` ones first, then the shortest and longest, powers of two and round decimal numbers, at
    most `MAX_CHUNKINGS`."""
    if n_chunks <= 0 or n_rows < n_chunks:
        return []
    low = -(-n_rows // n_chunks)
    high = n_rows if n_chunks == 1 else -(-n_rows // (n_chunks - 1)) - 1
    fits = [c for c in dict.fromkeys(preferred) if low <= c <= high]
    fits += [low, high]
    span = range(low, min(high, low + 65536) + 1)
    fits += [c for c in span if c & (c - 1) == 0]  # powers of two, then round decimal numbers
    for step in (1000, 100, 50, 10):
        fits += [c for c in span if c % step == 0]
    return list(dict.fromkeys(fits))[:MAX_CHUNKINGS]


def same_rows(meta: dict, array, preferred: list[int]) -> bool:
    """Whether ``array`` holds exactly the rows of the latest committed version described by ``meta``
    (public metadata), however they were cut into chunks.

    Each version's checksum (sha256 over its chunk digests) is recomputed from the array for the chunk
    lengths that give that version's chunk count (`_chunkings`, ``preferred`` first), version after
    version. Cost: one read and hash of the array per chunk length tried (usually one); the
    row count is compared first, for free.
    """
    if int(meta.get("n_rows") or 0) != int(array.shape[0]) or int(meta["n_features"]) != int(array.shape[1]):
        return False
    digests: list[str] = []
    first_row = first_chunk = 0
    for version in meta.get("versions") or []:
        n_rows, n_chunks = int(version["n_rows"]) - first_row, int(version["n_chunks"]) - first_chunk
        for length in _chunkings(n_rows, n_chunks, preferred):
            part = [_chunk_digest(array[a:min(a + length, first_row + n_rows)], meta["dtype"])
                    for a in range(first_row, first_row + n_rows, length)]
            if _checksum(digests + part) == version["checksum"]:
                digests += part
                break
        else:
            return False
        first_row, first_chunk = int(version["n_rows"]), int(version["n_chunks"])
    return bool(digests) and _checksum(digests) == meta["checksum"]


def stored_rows_equal(client: httpx.Client, meta: dict, array, retries: int = 5, backoff: float = 0.5) -> bool:
    """Whether ``array`` holds exactly the rows of the latest committed version described by ``meta``,
    read back from the server chunk by chunk (``GET /v1/datasets/{name}/chunks/{i}?format=npy``) and
    compared with ``array``'s rows cast to the set's dtype: the answer for a set cut into chunks that
    `same_rows` does not guess (``np.array_split``'s, say).

    Cost: at most one download of the set, one chunk in memory at a time; it stops at the first chunk
    that differs, so other rows usually cost one chunk.
    """
    name, dtype, l = meta["name"], np.dtype(meta["dtype"]), int(array.shape[0])
    if int(meta.get("n_rows") or 0) != l or int(meta["n_features"]) != int(array.shape[1]) or not meta.get("versions"):
        return False
    latest = meta["versions"][-1]
    start = 0
    for index in range(int(latest["n_chunks"])):
        response = _ok(_request(client, "GET", f"/v1/datasets/{name}/chunks/{index}", retries, backoff,
                                params={"version": latest["version"], "format": "npy"}), 200, raw=True)
        stored = np.load(io.BytesIO(response.content), allow_pickle=False)
        stop = start + int(stored.shape[0])
        if stop > l or not np.array_equal(stored, np.asarray(array[start:stop]).astype(dtype)):
            return False
        start = stop
    return start == l


def upload_array(
    server: str | httpx.Client,
    name: str,
    array,
    *,
    dtype: str = "float32",
    chunk_rows: int | None = None,
    commit: bool = True,
    append: bool = False,
    retries: int = 5,
    backoff: float = 0.5,
    progress: bool = True,
    api_key: str | None = None,
) -> dict:
    """Create (or reuse) data set ``name`` and upload ``array`` (shape (l, n)) in chunks.

    Parameters
    ----------
    server : base URL (``http://127.0.0.1:8000``) or an ``httpx.Client`` with a base_url
    array : numpy array, zarr array or anything with ``shape``, ``dtype`` and row slicing
    dtype : storage dtype of a new data set
    chunk_rows : rows per request (default: the array's chunking, or ~8 MiB)
    commit : commit the set after the last chunk
    append : on a set with committed rows, add ``array``'s rows as its next
        version (an interrupted append resumes like an upload)
    retries, backoff : transport errors and 429/5xx answers are retried
        ``retries`` times, waiting what a 429/503's ``Retry-After`` asks, else a random time
        in [0, ``backoff * 2**attempt``] seconds (full jitter); never more than `MAX_WAIT_S`
    progress : show a tqdm progress bar
    api_key : sent as ``Authorization: Bearer <key>`` when ``server`` is a URL; default the
        environment's ``KPCA_API_KEY`` (none if unset). An ``httpx.Client`` passed as ``server``
        carries its own headers.

    Returns
    -------
    dict : the data set's metadata after the upload (and commit), and ``unchanged``: True where the set
        already held exactly these rows and nothing was sent, else False.

    Raises
    ------
    UploadError
        A refusal by the server; a set of another width; a set whose committed
        rows differ from ``array``'s without ``append=True`` (nothing is sent).

    Existing names: an open set (nothing committed) is resumed: only missing
    chunk indices are sent. A set with committed rows and ``append=False``:
    if ``array`` holds exactly those rows (compared by row count and checksum,
    whatever cut them into chunks: `same_rows` from the checksums, else `stored_rows_equal`
    from the stored rows) nothing is sent and the metadata (``status: ready``) is returned;
    otherwise `RowsDiffer`.

    Cost: one request per missing chunk; each chunk is read from ``array``
    once and sent as ``.npy`` bytes. Re-uploading to a committed set reads
    and hashes the array once (more if it was cut differently, and at most one
    download of the set when no guessed cut matches), sends nothing.
    """
    api_key = api_key if api_key is not None else os.environ.get("KPCA_API_KEY")
    auth = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    client = server if isinstance(server, httpx.Client) else httpx.Client(base_url=server, timeout=120, headers=auth)
    l, n = (int(s) for s in array.shape)
    rows = int(chunk_rows or default_chunk_rows(array))
    first_index = 0
    created = _request(client, "POST", "/v1/datasets", retries, backoff,
                       json={"name": name, "n_features": n, "dtype": dtype})
    if created.status_code == 409:
        meta = _ok(_request(client, "GET", f"/v1/datasets/{name}", retries, backoff), 200)
        if meta["n_features"] != n:
            raise UploadError(f"data set {name!r} exists with {meta['n_features']} features; the array has {n}")
        if int(meta.get("version") or 0) >= 1:
            if not append:
                if (same_rows(meta, array, [rows, default_chunk_rows(array)])
                        or stored_rows_equal(client, meta, array, retries, backoff)):
                    return {**meta, "unchanged": True}  # the same rows are already committed: nothing sent
                raise RowsDiffer(
                    f"data set {name!r} already holds {meta['n_rows']} committed rows (version {meta['version']}, "
                    f"{meta['checksum']}) that differ from this array's {l} rows; nothing was uploaded. Use "
                    f"{APPEND_WORDS} to add the array's rows as a new version, or upload under another name")
            first_index = len(meta.get("chunks") or [])  # the next version's chunks follow the committed ones
    else:
        meta = _ok(created, 201)
    have = set(meta.get("staged") or []) | (set(meta.get("chunks") or []) if first_index == 0 else set())
    missing = [i for i in range(-(-l // rows)) if first_index + i not in have]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=l, initial=l - sum(min(rows, l - i * rows) for i in missing), unit="rows",
                   desc=f"upload {name}")
    try:
        for i in missing:
            chunk = np.asarray(array[i * rows : min((i + 1) * rows, l)])
            body = npy_bytes(chunk)
            _ok(_request(client, "PUT", f"/v1/datasets/{name}/chunks/{first_index + i}", retries, backoff,
                         content=body, headers={"Content-Type": "application/octet-stream",
                                                "Content-Digest": content_digest(body)}), 200)
            if bar is not None:
                bar.update(chunk.shape[0])
    finally:
        if bar is not None:
            bar.close()
    if commit:
        meta = _ok(_request(client, "POST", f"/v1/datasets/{name}/commit", retries, backoff, json={}), 200)
    else:
        meta = _ok(_request(client, "GET", f"/v1/datasets/{name}", retries, backoff), 200)
    return {**meta, "unchanged": False}
