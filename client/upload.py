"""Upload a numpy or zarr array to kpca-stream in chunks, resumably, with retries.

The server keeps chunks idempotent by index, so an interrupted upload is
resumed by calling `upload_array` again: it asks which indices have arrived
and sends only the missing ones.
"""

from __future__ import annotations

import io
import os
import time

import httpx
import numpy as np

RETRY_STATUS = {429, 502, 503, 504}
TARGET_CHUNK_BYTES = 8 * 2**20


class UploadError(RuntimeError):
    """The server refused a request; the message carries its error body."""


def default_chunk_rows(array) -> int:
    """Rows per request: the array's own row chunking if it has one, else about 8 MiB per chunk."""
    chunks = getattr(array, "chunks", None)
    if chunks and isinstance(chunks[0], int) and chunks[0] > 0:
        return int(chunks[0])
    row_bytes = max(1, int(array.shape[1]) * np.dtype(array.dtype).itemsize)
    return max(1, TARGET_CHUNK_BYTES // row_bytes)


def _request(client: httpx.Client, method: str, url: str, retries: int, backoff: float, **kwargs) -> httpx.Response:
    for attempt in range(retries + 1):
        try:
            response = client.request(method, url, **kwargs)
        except httpx.TransportError as exc:
            if attempt == retries:
                raise UploadError(f"{method} {url}: {exc} (after {retries + 1} attempts; is the service running?)")
        else:
            if response.status_code not in RETRY_STATUS and response.status_code < 500:
                return response
            if attempt == retries:
                raise UploadError(f"{method} {url} -> {response.status_code}: {response.text}")
        time.sleep(backoff * 2**attempt)
    raise AssertionError("unreachable")


def _ok(response: httpx.Response, *expected: int) -> dict:
    if response.status_code not in expected:
        raise UploadError(f"{response.request.method} {response.request.url} -> {response.status_code}: "
                          f"{response.text}")
    return response.json() if response.content else {}


def upload_array(
    server: str | httpx.Client,
    name: str,
    array,
    *,
    dtype: str = "float32",
    chunk_rows: int | None = None,
    commit: bool = True,
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
    retries, backoff : transport errors and 429/5xx answers are retried
        ``retries`` times, waiting ``backoff * 2**attempt`` seconds
    progress : show a tqdm progress bar
    api_key : sent as ``Authorization: Bearer <key>`` when ``server`` is a URL; default the
        environment's ``KPCA_API_KEY`` (none if unset). An ``httpx.Client`` passed as ``server``
        carries its own headers.

    Returns
    -------
    dict : the data set's metadata after the upload (and commit).

    Cost: one request per missing chunk; each chunk is read from ``array``
    once and sent as ``.npy`` bytes.
    """
    api_key = api_key if api_key is not None else os.environ.get("KPCA_API_KEY")
    auth = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    client = server if isinstance(server, httpx.Client) else httpx.Client(base_url=server, timeout=120, headers=auth)
    l, n = (int(s) for s in array.shape)
    rows = int(chunk_rows or default_chunk_rows(array))
    created = _request(client, "POST", "/v1/datasets", retries, backoff,
                       json={"name": name, "n_features": n, "dtype": dtype})
    if created.status_code == 409:
        meta = _ok(_request(client, "GET", f"/v1/datasets/{name}", retries, backoff), 200)
        if meta["n_features"] != n:
            raise UploadError(f"data set {name!r} exists with {meta['n_features']} features; the array has {n}")
    else:
        meta = _ok(created, 201)
    have = set(meta.get("chunks") or []) | set(meta.get("staged") or [])
    missing = [i for i in range(-(-l // rows)) if i not in have]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=l, initial=l - sum(min(rows, l - i * rows) for i in missing), unit="rows",
                   desc=f"upload {name}")
    try:
        for i in missing:
            chunk = np.asarray(array[i * rows : min((i + 1) * rows, l)])
            buf = io.BytesIO()
            np.save(buf, chunk, allow_pickle=False)
            _ok(_request(client, "PUT", f"/v1/datasets/{name}/chunks/{i}", retries, backoff,
                         content=buf.getvalue(), headers={"Content-Type": "application/octet-stream"}), 200)
            if bar is not None:
                bar.update(chunk.shape[0])
    finally:
        if bar is not None:
            bar.close()
    if commit:
        meta = _ok(_request(client, "POST", f"/v1/datasets/{name}/commit", retries, backoff, json={}), 200)
    else:
        meta = _ok(_request(client, "GET", f"/v1/datasets/{name}", retries, backoff), 200)
    return meta
