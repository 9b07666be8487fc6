"""Service configuration: environment variables prefixed ``KPCA_``.

``get_settings()`` reads the environment once (cached); tests build their own
`Settings` and pass it to `service.app.create_app` instead.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from kpca import defaults


class Settings(BaseSettings):
    """Everything the HTTP layer needs to start.

    Attributes
    ----------
    host, port : where ``python -m service`` listens.
    data_dir : root of the local data folder (data sets, models, checkpoints).
    scheduler : address of an external dask scheduler (``tcp://host:8786``);
        ``None`` starts an embedded `LocalCluster`.
    n_workers : worker processes of the embedded cluster; None (the default,
        ``KPCA_N_WORKERS`` unset) sizes it to the machine: min(cores, 8)
        workers, each with numba kernels on cores // workers threads
        (`workers.dask_cluster.embedded_sizing`). Unused with ``scheduler``.
    api_processes : processes answering requests (`service.processes`): with more
        than one, ``python -m service`` starts the embedded cluster in its own
        process and runs that many API processes on one socket, each a client
        of the cluster. None (the default, ``KPCA_API_PROCESSES`` unset): one
        per core, at most 4. Apps built by `service.app.create_app` (the tests)
        are one process whatever it says.
    warm_workers : every dask worker loads the default fit's and serving's
        jitted code when it starts (``KPCA_WARM_WORKERS``, default true), so
        that the first fit does not, and every API process that projects small
        models itself loads a projection's before it answers; the test suite
        turns it off.
    api_threads, api_wait_threads : threads of each API process for short blocking steps, and for waits
        on the cluster (`service.threads`): the waits sleep until the workers answer, and have threads of
        their own, so that no number of them can take the threads that the short steps need.
    access_log : ``python -m service`` writes uvicorn's line per request to standard output
        (``KPCA_ACCESS_LOG``, default true), from a thread, never the event loop
        (`service.access_log`); off saves the API processes the lines' cost under load.
    max_body_bytes : largest accepted request body; larger ones get 413.
    exact_limit : largest data set (rows) on which a fit reports the exact
        excess reconstruction error. The worker reads it; the service only
        carries it.
    checkpoint_keep : checkpoints kept per model (the last k, plus the best).
    watchdog_s : how often fits without a live runner (dead worker, restart)
        are looked for and resubmitted.
    solver_plugins : modules the service and every dask worker import at
        start-up, each registering solvers (`kpca.solvers.register`; see
        `workers.plugins`). Environment: ``KPCA_SOLVER_PLUGINS`` as a
        comma-separated list or a JSON list.
    register_prefixes : where ``POST /v1/datasets`` with ``{"source":
        {"zarr": ...}}`` may register existing arrays from. A source is
        allowed if it equals a prefix or lies below one, by whole path
        components (``/data`` allows ``/data/x.zarr``, not ``/database``).
        Local paths are compared after ``os.path.realpath`` (of the source
        and of the prefix), URLs (``s3://bucket/``) as written. Environment:
        ``KPCA_REGISTER_PREFIXES`` as a comma-separated list or a JSON list.
        Default ``[]``: registration is disabled (403 ``forbidden``) until an
        operator names the allowed locations.
    api_keys, api_keys_file, allow_unauthenticated, allowed_hosts,
    cors_origins : access control, see `service.security` and
        docs/security.md. ``KPCA_API_KEYS`` is a comma-separated list of
        ``key:scope`` (scope ``read`` or ``write``; write implies read);
        ``KPCA_API_KEYS_FILE`` names a file of one ``key:scope`` per line (``#``
        comments); both are merged into ``api_keys``. With no keys every route
        is open and ``python -m service`` listens on loopback only, unless
        ``allow_unauthenticated`` (``KPCA_ALLOW_UNAUTHENTICATED=1``).
        ``allowed_hosts`` (``KPCA_ALLOWED_HOSTS``): the ``Host`` names served,
        default the bound host, ``localhost``, ``127.0.0.1`` and ``::1``; ``*``
        allows any. ``cors_origins`` (``KPCA_CORS_ORIGINS``): origins allowed
        cross-origin requests; empty (the default) turns CORS off.

    Limits (each refusal names the limit and its variable):

    max_image_pixels : decoded pixels (width x height) of a PNG, read from its
        header before decoding, and of an upscaled image; more is a 413 on
        ``body`` (``upscale``). Default 4,194,304 (2048 x 2048).
    max_patches : patches one image request (``/denoise-image``) is cut into,
        computed from the image size, patch and stride before any work; more
        is a 422 on ``stride``. Default 65,536.
    max_image_dataset_rows : rows (patches) of a data set made by
        ``/from-image``; more is a 422 on ``stride``. Default 100,000.
    max_image_dataset_values : rows x features of a data set made by
        ``/from-image`` (a few KB of PNG cut into large overlapping patches
        would otherwise become gigabytes); more is a 422 on ``patch`` naming
        patch, stride and the limit. Default 2^25 (128 MiB of float32).
    max_serving_work : work of one ``/project``, ``/reconstruct``, ``/denoise`` or
        ``/denoise-image`` request, estimated before it runs
        (`service.serving_work`): rows x model points x features x the
        pre-image method's starts and iterations; more is a 413 naming the
        option. Default 10^11.
    serving_block_work : work of one pre-image task; a request is cut into
        tasks of about this much. Default 2 x 10^8.
    serving_deadline_s : seconds a serving request may take; then a 503
        with ``Retry-After`` and its tasks not yet run are cancelled (as when
        its client disconnects). Default 60.
    max_rows_per_request : rows in one ``/project``, ``/reconstruct``, ``/predict``,
        ``/denoise`` request or chunk upload; more is a 413 on ``rows``.
        Default 100,000.
    stream_response_values : numbers in a ``/project``, ``/reconstruct`` or
        ``/denoise`` answer above which it is sent as a chunked stream, a
        block of rows encoded at a time off the event loop
        (`service.responses`), not as one JSON text. Default 65,536.
    max_event_streams : ``/events`` streams open at once in the service (each of
        its ``api_processes`` allows its share);
        one more is a 503 with ``Retry-After``. Default 256.
    local_projection_values : training values (model points x features) up to
        which a model's ``/project`` is computed in the API process (the model
        cached there, `workers.operations.Project`) instead of on a
        worker: no round trip through the scheduler, and no wait behind fits
        and pre-images. 0: every projection on the workers. Default 2^22
        (32 MiB of float64 rows per cached model, at most 4 cached).
    local_projection_work : rows x model points x features of a ``/project``
        computed in the API process, at most; larger ones go to the workers.
        Default 2^26.
    max_serving_body_bytes : body limit of the serving routes (project,
        reconstruct, denoise, denoise-image, predict), below
        ``max_body_bytes``: JSON rows cost far more memory parsed than sent.
        Default 16 MiB.
    max_import_bytes : body limit of ``POST /v1/models/import``, which streams
        the archive (training rows included) to a file in the data folder
        instead of holding it, so it may be far above ``max_body_bytes``.
        Default 4 GiB.
    max_fits_per_key : queued or running fits (models and clusterings) per
        API key (all requests are one principal without keys); a new one is a
        429 with ``Retry-After``. Default 4.
    max_data_bytes : total bytes of the data folder; a chunk upload, data set
        creation or ``/from-image`` that would exceed it is a 413
        ``storage_full``. Default None: automatic, the folder's bytes at
        start plus `DATA_DISK_FRACTION` of the disk's free bytes then
        (`service.limits.automatic_data_limit`); 0 (or ``unlimited``): no limit.
    header_timeout_s : seconds a request's headers may take to arrive, from the
        connection (or the request's first byte on a kept-alive one); then
        the connection is closed, with a 408 if a request began
        (`service.http_protocol`). Default 10.
    body_timeout_s, body_min_bytes_per_s : while a route waits for a request's
        body, it may wait ``body_timeout_s`` plus one second per
        ``body_min_bytes_per_s`` bytes received, in all; past that the request
        is a 408 on ``body`` and its connection is closed
        (`service.limits.BodyLimitMiddleware`). Defaults 30 s and 1024 B/s.
    shutdown_timeout_s : seconds ``python -m service`` waits for running
        requests on SIGTERM/SIGINT before cancelling them (uvicorn
        ``timeout_graceful_shutdown``); the dask cluster is then closed
        without waiting for running tasks. Default 5.
    """

    model_config = SettingsConfigDict(
        env_prefix="KPCA_", extra="ignore",
        # the description of ``python -m service --help`` (pydantic-settings reads it here, not __doc__)
        json_schema_extra={"description": "Serve kpca-stream with uvicorn. Every flag overrides the "
                           "environment variable named beside it; without API keys the service listens on "
                           "loopback only."})

    host: str = Field(default="127.0.0.1", description="interface the service listens on")
    port: int = Field(default=8000, ge=0, le=65535, description="TCP port the service listens on")
    data_dir: Path = Field(default=Path("./data"), description="data folder: data sets, models, checkpoints")
    scheduler: str | None = Field(default=None, description="address of an external dask scheduler "
                                  "(tcp://host:8786); unset: an embedded LocalCluster")
    n_workers: int | None = Field(default=None, ge=1, description="worker processes of the embedded cluster; "
                                  "unset: sized to the machine")
    api_processes: int | None = Field(default=None, ge=1, le=64, description="processes answering requests, "
                                      "on one socket, clients of one dask cluster; unset: one per core, at most 4")
    warm_workers: bool = Field(default=True, description="dask workers load the default fit's and serving's "
                               "jitted code when they start, API processes a projection's")
    api_threads: int = Field(default=40, ge=1, description="threads of each API process for short blocking steps "
                             "(parsing, checks, reads, writes, small projections; service.threads)")
    api_wait_threads: int = Field(default=64, ge=1, description="threads of each API process that wait for "
                                  "the cluster's answers (projections, pre-images, imports on the workers)")
    access_log: bool = Field(default=True, description="one line per request on standard output, written by a "
                             "thread of each API process (service.access_log)")
    max_body_bytes: int = Field(default=64 * 1024 * 1024, ge=1, description="largest request body (413 above)")
    exact_limit: int = Field(default=defaults.EXACT_LIMIT, ge=0,
                             description="largest data set (rows) on which a fit reports the exact excess error")
    checkpoint_keep: int = Field(default=defaults.CHECKPOINT_KEEP, ge=1,
                                 description="checkpoints kept per model (the last k, plus the best)")
    watchdog_s: float = Field(default=5.0, gt=0, description="seconds between looks for fits that lost their "
                              "runner (they are resubmitted)")
    # ``| str`` lets a comma-separated value through pydantic-settings' JSON decoding of lists
    register_prefixes: list[str] | str = Field(  # closed by default
        default_factory=list, description="where existing zarr arrays may be registered from: absolute paths "
        "or URLs, comma-separated; empty: registration disabled")
    solver_plugins: list[str] | str = Field(default_factory=list, description="modules that register solvers, "
                                            "comma-separated, imported by the service and every worker")
    # security (service.security): keys as "key:scope" entries, merged from KPCA_API_KEYS_FILE
    api_keys: list[str] | str = Field(default_factory=list, repr=False, description="API keys as key:scope "
                                      "(read or write), comma-separated; prefer the environment or a keys file")
    api_keys_file: Path | None = Field(default=None, description="file of one key:scope per line (# comments)")
    allow_unauthenticated: bool = Field(default=False, description="serve beyond loopback without API keys")
    allowed_hosts: list[str] | str = Field(default_factory=list, description="Host header names served, "
                                           "comma-separated (* for any); default the bound host and loopback")
    cors_origins: list[str] | str = Field(default_factory=list, description="origins allowed cross-origin "
                                          "requests, comma-separated; empty: CORS off")
    # limits (service.limits); documented above
    max_image_pixels: int = Field(default=2048 * 2048, ge=1, description="decoded pixels of a PNG (413 above)")
    max_patches: int = Field(default=65_536, ge=1, description="patches one image request is cut into "
                             "(422 above)")
    max_image_dataset_rows: int = Field(default=100_000, ge=1, description="rows of a data set made by "
                                        "/from-image (422 above)")
    max_image_dataset_values: int = Field(default=2**25, ge=1, description="rows x features of a data set "
                                          "made by /from-image (422 above)")
    max_serving_work: int = Field(default=10**11, ge=1, description="work of one serving request: rows x model "
                                  "points x features x a pre-image method's starts and iterations (413 above)")
    serving_block_work: int = Field(default=2 * 10**8, ge=1, description="work of one pre-image task: a request "
                                    "is cut into tasks of this much, so projections and cancellation get in between")
    serving_deadline_s: float = Field(default=60.0, gt=0, description="seconds a serving request may run; past "
                                      "them it is a 503 with Retry-After and its queued tasks are cancelled")
    max_rows_per_request: int = Field(default=100_000, ge=1, description="rows in one serving request or "
                                      "chunk upload (413 above)")
    stream_response_values: int = Field(default=65_536, ge=0, description="numbers in a serving answer above "
                                        "which it is streamed (chunked), a block of rows at a time")
    max_event_streams: int = Field(default=256, ge=1, description="/events streams open at once, shared "
                                   "among the API processes (503 with Retry-After above)")
    local_projection_values: int = Field(default=2**22, ge=0, description="model points x features up to which "
                                         "/project is computed in the API process (0: always on the workers)")
    local_projection_work: int = Field(default=2**26, ge=0, description="rows x model points x features of a "
                                       "/project computed in the API process, at most")
    max_serving_body_bytes: int = Field(default=16 * 1024 * 1024, ge=1, description="body limit of the serving "
                                        "routes (413 above)")
    max_import_bytes: int = Field(default=4 * 1024**3, ge=1, description="body limit of POST /v1/models/import "
                                  "(the archive is streamed to disk, so it may exceed max_body_bytes; 413 above)")
    max_fits_per_key: int = Field(default=4, ge=1, description="queued or running fits per API key "
                                  "(429 with Retry-After above)")
    max_data_bytes: int | None = Field(default=None, ge=0, description="total bytes of the data folder "
                                       "(413 storage_full above); unset: the folder's bytes at start plus 80 % of "
                                       "the disk's free bytes then; 0 or 'unlimited': no limit")
    header_timeout_s: float = Field(default=10.0, gt=0, description="seconds a request's headers may take to "
                                    "arrive; then the connection is closed (408)")
    body_timeout_s: float = Field(default=30.0, gt=0, description="seconds a route may wait for a request's "
                                  "body, plus one per body_min_bytes_per_s bytes received (408 past them)")
    body_min_bytes_per_s: int = Field(default=1024, ge=1, description="bytes a second a request's body must "
                                      "average, after body_timeout_s (408 below)")
    shutdown_timeout_s: float = Field(default=5.0, gt=0, description="seconds running requests get on "
                                      "SIGTERM/SIGINT before they are cancelled")

    @field_validator("scheduler", mode="before")
    @classmethod
    def _blank_scheduler_is_embedded(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            return None
        return value

    @field_validator("n_workers", "api_processes", mode="before")
    @classmethod
    def _blank_count_is_automatic(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            return None
        return value

    @field_validator("max_data_bytes", mode="before")
    @classmethod
    def _blank_data_bytes_is_automatic(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() in ("", "none", "auto"):
            return None
        if isinstance(value, str) and value.strip().lower() == "unlimited":
            return 0
        return value

    @field_validator("solver_plugins", mode="after")
    @classmethod
    def _plugin_list(cls, value: list[str] | str) -> list[str]:
        return _string_list(value, "solver_plugins")

    @field_validator("allowed_hosts", "cors_origins", mode="after")
    @classmethod
    def _security_lists(cls, value: list[str] | str, info) -> list[str]:
        return _string_list(value, info.field_name)

    @field_validator("api_keys_file", mode="before")
    @classmethod
    def _blank_keys_file_is_none(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            return None
        return value

    @model_validator(mode="after")
    def _keys(self) -> Settings:
        from service.security import parse_key_entries  # no import cycle: security needs no settings

        entries = _string_list(self.api_keys, "api_keys")
        if self.api_keys_file is not None:
            entries += read_keys_file(self.api_keys_file)
        self.api_keys = [f"{key}:{scope}" for key, scope in parse_key_entries(entries)]
        return self

    @field_validator("register_prefixes", mode="after")
    @classmethod
    def _prefix_list(cls, value: list[str] | str) -> list[str]:
        prefixes = _string_list(value, "register_prefixes")
        for prefix in prefixes:
            if "://" not in prefix and not os.path.isabs(prefix):
                raise ValueError(f"register prefix {prefix!r} must be an absolute path or a URL")
        return prefixes


def _string_list(value: list[str] | str, name: str) -> list[str]:
    """A list of non-empty strings from a list, a JSON list or a comma-separated string."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise ValueError(f"not a JSON list of strings: {exc}") from None
        else:
            value = text.split(",")
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{name} must be a list of strings")
    return [item.strip() for item in value if item.strip()]


def read_keys_file(path: Path) -> list[str]:
    """The ``key:scope`` lines of an API keys file (blank lines and ``#`` comments skipped)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"api_keys_file: cannot read {path}: {exc.__class__.__name__}") from None
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [line for line in lines if line]


@lru_cache
def get_settings() -> Settings:
    """The settings read from the environment (cached for the process)."""
    return Settings()
