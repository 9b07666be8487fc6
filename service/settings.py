"""Service configuration: environment variables prefixed ``KPCA_``, and the same settings as flags of
``python -m service`` (`service.flags`).

The settings come in groups, each a class whose fields carry their one description (shown by ``--help``):
`ServerSettings` (where it listens, what it keeps), `ProcessSettings` (the dask cluster, the API processes
and their threads), `workers.settings.WorkerGroup` (what every dask worker reads: a fit's priority, when a
fit is sharded), `PlacementSettings` (which projections run in the API process), `SecuritySettings`
(keys, hosts, origins, registration) and `LimitSettings` (bodies, rows, work, deadlines, storage).
`Settings` composes them; a variable's name is ``KPCA_`` and its field's name, whatever its group.
Nothing else reads a ``KPCA_*`` variable: the workers read theirs through `workers.settings`, and the API
processes of ``python -m service`` their supervisor's hand-over through `ProcessHandoff`.

``get_settings()`` reads the environment once (cached); tests build their own `Settings` and pass it to
`service.app.create_app` instead.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from kpca import defaults
from store.objects.urls import parse_url
from workers.settings import WorkerGroup

#: a list setting's form in the environment and in a flag
_LIST = "comma-separated (or a JSON list)"


class ServerSettings(BaseModel):
    """Where the service listens and what it keeps."""

    host: str = Field(default="127.0.0.1", description="interface the service listens on")
    port: int = Field(default=8000, ge=0, le=65535, description="TCP port the service listens on")
    data_dir: Path | str = Field(default=Path("./data"), description="where data sets, models and checkpoints are "
                                 "kept: a folder, or an S3-compatible object store as s3://bucket/prefix (with "
                                 "AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION; "
                                 "docs/scaling.md)")
    exact_limit: int = Field(default=defaults.EXACT_LIMIT, ge=0,
                             description="largest data set (rows) on which a fit reports the exact excess error "
                                         "(the worker reads it from the job's record; the service only carries it)")
    checkpoint_keep: int = Field(default=defaults.CHECKPOINT_KEEP, ge=1,
                                 description="checkpoints kept per model (the last k, plus the best)")
    image_job_keep_s: float = Field(default=86_400.0, gt=0, description="seconds an image job that has ended "
                                    "(its record and a background job's answer) is kept after its last write; "
                                    "older ones are removed as a background job starts")
    # ``| str`` lets a comma-separated value through pydantic-settings' JSON decoding of lists
    solver_plugins: list[str] | str = Field(default_factory=list, description="modules that register solvers "
                                            f"(kpca.solvers.register), {_LIST}, imported by the service and "
                                            "every worker at start-up")

    @field_validator("solver_plugins", mode="after")
    @classmethod
    def _plugin_list(cls, value: list[str] | str) -> list[str]:
        return _string_list(value, "solver_plugins")

    @field_validator("data_dir", mode="before")
    @classmethod
    def _a_folder_or_s3(cls, value):
        """A folder's path (a `Path`), or ``s3://bucket/prefix`` kept as a string (a `Path` would mangle it); any other
        URL is refused, not taken for a folder named ``gs:`` in the working directory (docs/scaling.md)."""
        if isinstance(value, str) and "://" in value:
            try:
                parse_url(value)
            except ValueError:
                raise ValueError(f"{value!r} is a URL but not s3://bucket[/prefix], the one object store the service "
                                 "keeps its data in (docs/scaling.md); give s3://bucket/prefix or a folder's path"
                                 ) from None
            return value.rstrip("/")
        return Path(value) if isinstance(value, str) else value


class ProcessSettings(BaseModel):
    """The dask cluster, the API processes and their threads."""

    scheduler: str | None = Field(default=None, description="address of an external dask scheduler "
                                  "(tcp://host:8786); unset: an embedded LocalCluster")
    n_workers: int | None = Field(default=None, ge=1, description="worker processes of the embedded cluster; "
                                  "unset: sized to the machine, min(cores, 8), each with numba kernels on "
                                  "cores // workers threads")
    api_processes: int | None = Field(default=None, ge=1, le=64, description="processes answering requests, "
                                      "on one socket, clients of one dask cluster; unset: one per core, at most 4 "
                                      "(an app built by create_app is one process whatever it says)")
    warm_workers: bool = Field(default=True, description="dask workers load the default fit's and serving's "
                               "jitted code when they start, API processes a projection's")
    api_threads: int = Field(default=40, ge=1, description="threads of each API process for short blocking steps "
                             "(parsing, checks, reads, writes, small projections; service.threads)")
    api_wait_threads: int = Field(default=64, ge=1, description="threads of each API process that wait for "
                                  "the cluster's answers (projections, pre-images, imports on the workers)")
    access_log: bool = Field(default=True, description="one line per request on standard output, written by a "
                             "thread of each API process (service.access_log)")
    watchdog_s: float = Field(default=5.0, gt=0, description="seconds between looks for fits that lost their "
                              "runner (they are resubmitted)")
    shutdown_timeout_s: float = Field(default=5.0, gt=0, description="seconds running requests get on "
                                      "SIGTERM/SIGINT before they are cancelled; the dask cluster is then closed "
                                      "without waiting for running tasks")

    @field_validator("scheduler", "n_workers", "api_processes", mode="before")
    @classmethod
    def _blank_is_automatic(cls, value: object) -> object:  # unset: an embedded cluster, counts sized to the machine
        if isinstance(value, str) and not value.strip():
            return None
        return value


class PlacementSettings(BaseModel):
    """Which projections the API process computes itself (`workers.operations.Project`): no round trip
    through the scheduler, and no wait behind fits and pre-images."""

    local_projection_values: int = Field(default=2**22, ge=0, description="model points x features up to which "
                                         "/project is computed in the API process (0: always on the workers)")
    local_projection_work: int = Field(default=2**26, ge=0, description="rows x model points x features of a "
                                       "/project computed in the API process, at most")


class SecuritySettings(BaseModel):
    """Who may call the service, from where, and what it may read (`service.security`, docs/security.md)."""

    api_keys: list[str] | str = Field(default_factory=list, repr=False, description="API keys as key:scope "
                                      f"(read or write; write implies read), {_LIST}; prefer the environment or "
                                      "a keys file")
    api_keys_file: Path | None = Field(default=None, description="file of one key:scope per line (# comments), "
                                       "merged into api_keys")
    allow_unauthenticated: bool = Field(default=False, description="serve beyond loopback without API keys")
    allowed_hosts: list[str] | str = Field(default_factory=list, description=f"Host header names served, {_LIST} "
                                           "(* for any); default the bound host and loopback")
    cors_origins: list[str] | str = Field(default_factory=list, description="origins allowed cross-origin "
                                          f"requests, {_LIST}; empty: CORS off")
    register_prefixes: list[str] | str = Field(  # closed by default
        default_factory=list, description="where existing zarr arrays may be registered from: absolute paths "
        f"or URLs, {_LIST}; a source must equal a prefix or lie below one by whole path components (local paths "
        "compared after realpath); empty: registration disabled")

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
    def _keys(self):
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


class LimitSettings(BaseModel):
    """What one request may ask and how long it may take (`service.limits`, docs/limits.md): each refusal
    names the limit and its variable."""

    max_body_bytes: int = Field(default=64 * 1024 * 1024, ge=1, description="largest request body (413 above)")
    max_serving_body_bytes: int = Field(default=16 * 1024 * 1024, ge=1, description="body limit of the serving "
                                        "routes, below max_body_bytes: JSON rows cost far more memory parsed than "
                                        "sent (413 above)")
    max_import_bytes: int = Field(default=4 * 1024**3, ge=1, description="body limit of POST /v1/models/import "
                                  "(the archive is streamed to disk, so it may exceed max_body_bytes; 413 above)")
    max_rows_per_request: int = Field(default=100_000, ge=1, description="rows in one serving request or "
                                      "chunk upload (413 above)")
    max_image_pixels: int = Field(default=2048 * 2048, ge=1, description="decoded pixels of a PNG, read from its "
                                  "header, and of an upscaled image (413 above)")
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
    stream_response_values: int = Field(default=65_536, ge=0, description="numbers in a serving answer above "
                                        "which it is streamed (chunked), a block of rows at a time")
    max_event_streams: int = Field(default=256, ge=1, description="/events streams open at once, shared "
                                   "among the API processes (503 with Retry-After above)")
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

    @field_validator("max_data_bytes", mode="before")
    @classmethod
    def _blank_data_bytes_is_automatic(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() in ("", "none", "auto"):
            return None
        if isinstance(value, str) and value.strip().lower() == "unlimited":
            return 0
        return value


# the groups in reverse: pydantic lists the fields of the last base first (``--help`` shows them in order)
class Settings(LimitSettings, SecuritySettings, PlacementSettings, WorkerGroup, ProcessSettings, ServerSettings,
               BaseSettings):
    """Everything the service needs to start: its groups' fields, each read from ``KPCA_`` and its name."""

    model_config = SettingsConfigDict(
        env_prefix="KPCA_", extra="ignore",
        # the description of ``python -m service --help`` (pydantic-settings reads it here, not __doc__)
        json_schema_extra={"description": "Serve kpca-stream with uvicorn. Every flag overrides the "
                           "environment variable named beside it; without API keys the service listens on "
                           "loopback only."})


class ProcessHandoff(BaseSettings):
    """What the supervisor of ``python -m service`` with several API processes (`service.processes`) hands
    each of them in its environment: not settings of a user's, written by the supervisor only."""

    model_config = SettingsConfigDict(env_prefix="KPCA_PROCESS_", extra="ignore")

    argv: list[str] = Field(default_factory=list, description="the supervisor's flags (KPCA_PROCESS_ARGV, JSON)")
    embedded: bool = Field(default=False, description="the supervisor started the embedded cluster "
                           "(KPCA_PROCESS_EMBEDDED)")
    supervisor: int | None = Field(default=None, description="the supervisor's process id (KPCA_PROCESS_SUPERVISOR)")


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
