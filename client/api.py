"""`Client`: kpca-stream's HTTP API as Python functions, with typed errors.

Every refusal by the server is an `ApiError` carrying its status and its error body
(``code``, ``message``, ``field``); a server that cannot be reached is `ConnectionFailed`.
State-changing POSTs always send a JSON body (``{}`` when they have nothing to say), as the
service requires.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import time
from collections.abc import Iterator

import httpx
import numpy as np

from client.upload import UploadError, npy_bytes, upload_array

DEFAULT_URL = "http://127.0.0.1:8000"
#: statuses in which a fit is still going
RUNNING = ("queued", "running")
#: the kinds `Client.ls` and `Client.rm` know, and their routes
KINDS = {"datasets": "/v1/datasets", "models": "/v1/models", "clusterings": "/v1/clusterings"}



def _chosen(response: httpx.Response) -> dict:
    """What an image answer says it chose: its ``X-KPCA-Chosen`` header (JSON) with ``steps`` from
    ``Server-Timing`` (seconds)."""
    chosen = json.loads(response.headers.get("x-kpca-chosen", "{}"))
    steps = {}
    for part in filter(None, (p.strip() for p in response.headers.get("server-timing", "").split(","))):
        step, _, duration = part.partition(";dur=")
        steps[step] = float(duration) / 1000.0 if duration else None
    return {**chosen, "steps": steps}

class ApiError(RuntimeError):
    """The server said no: HTTP ``status`` with its error body's ``code``, ``message`` and ``field``."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None):
        self.status, self.code, self.message, self.field = status, code, message, field
        where = f" (field {field})" if field else ""
        super().__init__(f"{status} {code}: {message}{where}")

    @classmethod
    def from_response(cls, response: httpx.Response) -> ApiError:
        """The error a non-2xx response stands for, read from its ``{"error": {...}}`` body when it has one."""
        try:
            error = response.json()["error"]
            return cls(response.status_code, str(error.get("code")), str(error.get("message")), error.get("field"))
        except (ValueError, KeyError, TypeError, AttributeError):
            return cls(response.status_code, "http_error", response.text or response.reason_phrase)


class ConnectionFailed(RuntimeError):
    """No answer from the server (refused, unknown host, timed out)."""


class Client:
    """kpca-stream at ``url`` (default ``$KPCA_URL`` or `DEFAULT_URL`), authenticated with ``api_key``
    (default ``$KPCA_API_KEY``; sent as ``Authorization: Bearer``)."""

    def __init__(self, url: str | None = None, api_key: str | None = None, timeout: float = 120.0):
        self.url = (url or os.environ.get("KPCA_URL") or DEFAULT_URL).rstrip("/")
        api_key = api_key if api_key is not None else os.environ.get("KPCA_API_KEY")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(base_url=self.url, timeout=timeout, headers=headers)

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def request(self, method: str, path: str, **kwargs) -> httpx.Response:
        """One request; `ApiError` on a non-2xx answer, `ConnectionFailed` when there is none."""
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ConnectionFailed(f"cannot reach {self.url}: {exc} (is the service running? see --url)") from None
        if response.status_code >= 400:
            raise ApiError.from_response(response)
        return response

    def _json(self, method: str, path: str, **kwargs) -> dict:
        response = self.request(method, path, **kwargs)
        return response.json() if response.content else {}

    def upload(self, name: str, array, *, chunk_rows: int | None = None, append: bool = False,
               progress: bool = False) -> dict:
        """Upload ``array`` (shape (l, n)) as data set ``name`` (`client.upload.upload_array`); its metadata."""
        try:
            return upload_array(self.http, name, array, chunk_rows=chunk_rows, append=append, progress=progress,
                                retries=2, backoff=0.2)
        except UploadError as exc:
            raise _upload_error(str(exc)) from None

    def upload_image(self, name: str, png: bytes, patch: int = 11, stride: int = 2) -> dict:
        """Create data set ``name`` from the ``patch`` x ``patch`` patches of a PNG, taken every ``stride``
        pixels (``POST /v1/datasets/{name}/from-image``); its metadata."""
        return self._json("POST", f"/v1/datasets/{name}/from-image", content=png,
                          params={"patch": patch, "stride": stride}, headers={"Content-Type": "image/png"})

    def fit(self, name: str, dataset: str, kernel: dict, n_components: int, solver: str = "ritz",
            params: dict | None = None) -> dict:
        """Create model ``name`` on ``dataset`` and start its fit; the queued model record."""
        body = {"name": name, "dataset": dataset, "kernel": kernel, "n_components": n_components,
                "solver": solver, "params": params or {}}
        return self._json("POST", "/v1/models", json=body)

    def model(self, name: str) -> dict:
        """Model ``name``'s record: status, progress, history."""
        return self._json("GET", f"/v1/models/{name}")

    def dataset(self, name: str) -> dict:
        """Data set ``name``'s metadata: status, rows, features, versions."""
        return self._json("GET", f"/v1/datasets/{name}")

    def clustering(self, name: str, labels_limit: int = 0) -> dict:
        """Clustering ``name``'s record: status, progress, history and (``labels_limit`` > 0) a page of labels."""
        return self._json("GET", f"/v1/clusterings/{name}", params={"labels_limit": labels_limit})

    def job_kind(self, name: str) -> str:
        """``"models"`` if a model ``name`` exists, else ``"clusterings"`` if a clustering does; the
        model's 404 otherwise. Cost: one or two requests."""
        try:
            self.model(name)
            return "models"
        except ApiError as exc:
            if exc.status != 404:
                raise
            try:
                self.clustering(name)
            except ApiError:
                raise exc from None
            return "clusterings"

    def cancel(self, name: str, kind: str = "models") -> dict:
        """Ask job ``name``'s fit to stop after its current block (``kind``: models or clusterings)."""
        return self._json("POST", f"{_route(kind)}/{name}/cancel", json={})

    def resume(self, name: str, passes: int | None = None, dataset_version: int | None = None,
               kind: str = "models") -> dict:
        """Continue job ``name`` from its last checkpoint; ``passes`` is the new total (not more passes),
        ``dataset_version`` a newer version of its data set (models). The queued record."""
        body = {key: value for key, value in (("passes", passes), ("dataset_version", dataset_version))
                if value is not None}
        return self._json("POST", f"{_route(kind)}/{name}/resume", json=body)

    def cluster(self, name: str, dataset: str, n_clusters: int, kernel: dict, solver: str = "ritz",
                params: dict | None = None, labels_dataset: str | None = None) -> dict:
        """Create clustering ``name`` of ``dataset`` into ``n_clusters`` and start it; the queued record."""
        body = {"name": name, "dataset": dataset, "n_clusters": n_clusters, "kernel": kernel, "solver": solver,
                "params": params or {}}
        if labels_dataset is not None:
            body["labels_dataset"] = labels_dataset
        return self._json("POST", "/v1/clusterings", json=body)

    def events(self, name: str, after_pass: int = 0) -> Iterator[tuple[str, dict]]:
        """Model ``name``'s server-sent events as ``(event, data)`` pairs, until the stream ends; the passes
        after ``after_pass`` only (0: the whole history first, as the stream replays it)."""
        headers = {"Accept": "text/event-stream"}
        if after_pass:
            headers["Last-Event-ID"] = str(int(after_pass))
        try:
            with self.http.stream("GET", f"/v1/models/{name}/events", timeout=httpx.Timeout(10.0, read=None),
                                  headers=headers) as response:
                if response.status_code >= 400:
                    response.read()
                    raise ApiError.from_response(response)
                event, data = "message", list[str]()
                for line in response.iter_lines():
                    if not line:
                        if data:
                            yield event, json.loads("\n".join(data))
                        event, data = "message", []
                    elif line.startswith("event:"):
                        event = line[6:].strip()
                    elif line.startswith("data:"):
                        data.append(line[5:].strip())
        except httpx.TransportError as exc:
            raise ConnectionFailed(f"cannot reach {self.url}: {exc}") from None

    def wait(self, name: str, timeout: float | None = None, poll_s: float = 0.2, kind: str = "models") -> dict:
        """Poll job ``name`` (a model, or a clustering with ``kind``) until its fit is no longer queued or
        running; the final record."""
        deadline = None if timeout is None else time.monotonic() + timeout
        read = self.model if kind == "models" else self.clustering
        while (record := read(name))["status"] in RUNNING:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"model {name!r} is still {record['status']} after {timeout} s")
            time.sleep(poll_s)
        return record

    def project(self, name: str, rows) -> np.ndarray:
        """Kernel principal components of ``rows`` (shape (m, n)): an array of shape (m, n_components)."""
        return self._rows(f"/v1/models/{name}/project", rows, {}, "components")

    def denoise(self, name: str, rows, method: str = "auto") -> np.ndarray:
        """Denoised ``rows`` (shape (m, n)): pre-images of their projections, same shape."""
        return self._rows(f"/v1/models/{name}/denoise", rows, {"method": method}, "rows")

    def _rows(self, path: str, rows, fields: dict, field: str) -> np.ndarray:
        """The rows a serving route answers for ``rows`` and the request's other ``fields``, both ways as
        ``.npy`` bytes (the rows sent as float64 ``.npy``, the fields in the header ``X-KPCA-Fields``; the
        answer's values bit for bit, no JSON text to write or parse). A service that refuses ``.npy`` rows
        (415: an older one) is sent JSON; one that answers JSON is read as JSON."""
        rows = np.ascontiguousarray(np.asarray(rows, dtype=np.float64))
        accept = {"Accept": "application/octet-stream"}
        headers = {**accept, "Content-Type": "application/octet-stream"}
        if fields:
            headers["X-KPCA-Fields"] = json.dumps(fields)
        try:
            response = self.request("POST", path, content=npy_bytes(rows), headers=headers)
        except ApiError as exc:
            if exc.status != 415:
                raise
            response = self.request("POST", path, json={"rows": rows.tolist(), **fields}, headers=accept)
        if response.headers.get("content-type", "").startswith("application/octet-stream"):
            return np.load(io.BytesIO(response.content), allow_pickle=False)
        return np.asarray(response.json()[field])

    def denoise_image(self, name: str, png: bytes, stride: int = 2, method: str = "auto", upscale: int = 1,
                      compare: bool = False, tune: str = "auto", n_components: int | None = None,
                      second_stage: str = "auto") -> bytes:
        """A PNG denoised patch by patch through model ``name``; the denoised PNG's bytes (with ``compare``,
        a picture of the input and the denoised image side by side). ``second_stage``: the Wiener stage,
        ``auto`` (where it is estimated to help), ``wiener`` or ``off``. `denoise_image_chosen` also says
        what the tuning chose."""
        return self.denoise_image_chosen(name, png, stride, method, upscale, compare, tune, n_components,
                                         second_stage)[0]

    def denoise_image_chosen(self, name: str, png: bytes, stride: int = 2, method: str = "auto", upscale: int = 1,
                             compare: bool = False, tune: str = "auto", n_components: int | None = None,
                             second_stage: str = "auto") -> tuple[bytes, dict]:
        """`denoise_image`, and what was chosen and how long each step took: the answer's
        ``X-KPCA-Chosen`` header (JSON) with ``steps`` from ``Server-Timing`` (seconds)."""
        params = {"stride": stride, "method": method, "upscale": upscale, "compare": str(compare).lower(),
                  "tune": tune, "second_stage": second_stage}
        if n_components is not None:
            params["n_components"] = n_components
        response = self.request("POST", f"/v1/models/{name}/denoise-image", content=png, params=params,
                                headers={"Content-Type": "image/png"})
        return response.content, _chosen(response)

    def start_image_job(self, png: bytes, job: str, **params) -> dict:
        """Start ``POST /v1/denoise-image`` on a PNG as the background image job ``job`` (``params``: the
        route's query parameters: ``patch``, ``stride``, ``tile``, ``second_stage``, ...); its progress."""
        query = {key: value for key, value in params.items() if value is not None}
        return self._json("POST", "/v1/denoise-image", content=png, headers={"Content-Type": "image/png"},
                          params={**query, "job": job, "background": "true"})

    def image_job(self, job: str) -> dict:
        """The progress of image job ``job`` (``GET /v1/image-jobs/{job}``)."""
        return self._json("GET", f"/v1/image-jobs/{job}")

    def image_job_result(self, job: str) -> tuple[bytes, dict]:
        """A completed background image job's PNG and what it chose (as `denoise_image_chosen`)."""
        response = self.request("GET", f"/v1/image-jobs/{job}/result")
        return response.content, _chosen(response)

    def delete_image_job(self, job: str) -> None:
        """Remove the record (and answer) of image job ``job``, once it has ended."""
        self.request("DELETE", f"/v1/image-jobs/{job}")

    def denoise_photo(self, png: bytes, job: str, progress=None, poll_s: float = 1.0, **params) -> tuple[bytes, dict]:
        """A PNG denoised with nothing but the PNG (``POST /v1/denoise-image``), run as the background image
        job ``job`` and followed until it ends (``progress(record)`` after each poll); the PNG and what was
        chosen, the job's record deleted after. `ApiError` (409 on ``job``) if it failed or was cancelled."""
        record = self.start_image_job(png, job, **params)
        try:
            while record["status"] == "running":
                time.sleep(poll_s)
                record = self.image_job(job)
                if progress is not None:
                    progress(record)
            return self.image_job_result(job)
        finally:
            with contextlib.suppress(ApiError):
                self.delete_image_job(job)

    def export_model(self, name: str, path) -> dict:
        """Download model ``name`` as one archive (``GET /v1/models/{name}/export``) into the file ``path``,
        streamed (written under a temporary name, renamed once complete); ``{"path", "bytes"}``."""
        path = os.fspath(path)
        partial = f"{path}.part"
        try:
            with self.http.stream("GET", f"/v1/models/{name}/export",
                                  timeout=httpx.Timeout(30.0, read=None)) as response:
                if response.status_code >= 400:
                    response.read()
                    raise ApiError.from_response(response)
                written = 0
                with open(partial, "wb") as out:
                    for block in response.iter_bytes(2**20):
                        out.write(block)
                        written += len(block)
                expected = response.headers.get("content-length")
                if expected is not None and int(expected) != written:
                    raise ConnectionFailed(f"the export of {name!r} ended after {written} of {expected} bytes; "
                                           "try again")
        except httpx.TransportError as exc:
            raise ConnectionFailed(f"cannot reach {self.url}: {exc} (is the service running? see --url)") from None
        except BaseException:
            if os.path.exists(partial):
                os.unlink(partial)
            raise
        os.replace(partial, path)
        return {"path": path, "bytes": written}

    def import_model(self, path, name: str | None = None, dataset: str | None = None) -> dict:
        """Create a model from an archive file of `export_model` (``POST /v1/models/import``, streamed),
        optionally under another ``name`` and data set name ``dataset``; the imported model's record."""
        params = {key: value for key, value in (("name", name), ("dataset", dataset)) if value is not None}
        size = os.path.getsize(path)

        def blocks() -> Iterator[bytes]:
            with open(path, "rb") as archive:
                while block := archive.read(2**20):
                    yield block

        return self._json("POST", "/v1/models/import", content=blocks(), params=params,
                          headers={"Content-Type": "application/x-tar", "Content-Length": str(size)})

    def ls(self, kind: str = "models", page_size: int = 1000) -> list[dict]:
        """Every data set, model (summaries) or clustering (``kind``), sorted by name: the list routes'
        pages of ``page_size`` followed through ``next_cursor``. Cost: one request per page."""
        items: list[dict] = []
        params: dict = {"limit": page_size}
        while True:
            body = self._json("GET", _route(kind), params=params)
            items += body[kind]
            if not body.get("next_cursor"):
                return items
            params = {"limit": page_size, "cursor": body["next_cursor"]}

    def rm(self, kind: str, name: str, cascade: bool = False) -> None:
        """Delete data set, model or clustering ``name``; ``cascade`` (data sets): with the models and
        clusterings fit on it."""
        self.request("DELETE", f"{_route(kind)}/{name}", params={"cascade": "true"} if cascade else None)


def _upload_error(text: str) -> Exception:
    """The typed error behind an `UploadError`'s text (``METHOD URL -> STATUS: BODY`` for a refusal)."""
    if "is the service running" in text:
        return ConnectionFailed(text)
    found = re.match(r"\S+ \S+ -> (\d{3}): (.*)", text, re.DOTALL)
    if found is None:  # refused by the client itself: a width or rows that differ from the stored set's
        return ApiError(409, "conflict", text, "name")
    try:
        error = json.loads(found.group(2))["error"]
        return ApiError(int(found.group(1)), str(error.get("code")), str(error.get("message")), error.get("field"))
    except (ValueError, KeyError, TypeError):
        return ApiError(int(found.group(1)), "http_error", found.group(2))


def _route(kind: str) -> str:
    try:
        return KINDS[kind]
    except KeyError:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}") from None


def save_npy(path, array) -> None:
    """Write ``array`` to ``path`` as ``.npy``."""
    with open(path, "wb") as out:
        out.write(npy_bytes(np.asarray(array)))
