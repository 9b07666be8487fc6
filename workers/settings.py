"""What a dask worker reads from its environment: the priority of its fits (`workers.priority`) and where
a fit is sharded (`workers.placement`), as one group of settings, `WorkerSettings`.

These are the workers' own: every worker process reads them from its environment when it uses them
(an external cluster's workers from theirs, docs/scaling.md). The service's `service.settings.Settings`
composes this group, so that ``python -m service --help`` lists it, and passes its values to the
embedded cluster's workers at start-up (`WorkerGroup.worker_environ`). Each description is written here, once.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from store.datasets.object_rows import DEFAULT_CACHE_MB
from store.jobs.object_registry import LEASE_TTL_S

#: Niceness added to a fit, unless ``KPCA_FIT_NICE`` says otherwise (0: fits at the serving priority).
FIT_NICE = 10
#: Niceness added to a serving request's pre-image work unless ``KPCA_PREIMAGE_NICE`` says otherwise: below
#: projections, above fits (a pre-image is a request somebody waits for; a fit is polled). At the lowest
#: priority, beside CPU-bound processes of the usual one, it starved (docs/limits.md).
PREIMAGE_NICE = 5
#: The scheduling policy of lowered threads unless ``KPCA_BACKGROUND_POLICY`` says otherwise: niceness only.
#: Linux's idle policy starves them outright while any other process keeps the cores busy, and a starved thread
#: holding its worker's interpreter lock can stall the worker's projections too; "idle" is for a machine that
#: runs the service alone (workers/priority.py, docs/limits.md).
BACKGROUND_POLICY: Literal["idle", "normal"] = "normal"
# A fit that does not ask is spread over every worker offering the fit resource from SHARD_MIN_ROWS
# rows on. On 2 cores a sharded default fit takes the one-worker fit's passes and about its time (one
# worker already uses both cores); on 16 cores a sharded pass took 0.44x the wall time at 40,000 rows
# (docs/scaling.md, bench/shard_cost.py, bench/service_fit.py).
SHARD_MIN_ROWS = 50_000


class WorkerGroup(BaseModel):
    """The processes, placement and object-store settings every dask worker reads (``KPCA_FIT_NICE``,
    ``KPCA_PREIMAGE_NICE``, ``KPCA_BACKGROUND_POLICY``, ``KPCA_SHARD_MIN_ROWS``, ``KPCA_LEASE_TTL_S``,
    ``KPCA_READ_CACHE_MB``): the fields of `WorkerSettings`, and a group of `service.settings.Settings`."""

    fit_nice: int = Field(default=FIT_NICE, description="OS priority levels a fit (its threads, its shards' "
                          "actor threads) runs below projections on its worker, 0 to 19 (clipped); 0: at the "
                          "serving priority")
    preimage_nice: int = Field(default=PREIMAGE_NICE, description="OS priority levels a serving request's "
                               "pre-image work (denoising, reconstruction by pre-image, image jobs) runs below "
                               "projections on its worker, 0 to 19 (clipped)")
    background_policy: Literal["idle", "normal"] = Field(
        default=BACKGROUND_POLICY, description="normal: lowered threads (fits, pre-images) are niced only; idle: "
        "they also take Linux's SCHED_IDLE and run only on a core nothing else wants (a machine that runs the "
        "service alone: elsewhere any other busy process starves them)")
    shard_min_rows: int = Field(default=SHARD_MIN_ROWS, description="rows from which a fit without "
                                "placement.workers is sharded over every worker offering fits (read by the "
                                "fit's worker)")
    lease_ttl_s: float = Field(default=LEASE_TTL_S, ge=3, description="with an object store (data_dir s3://...): "
                               "seconds a fit's lease lives after its last renewal, renewed every third of it; a fit "
                               "whose worker died is taken over by another this long after (the same in every "
                               "process of a deployment)")
    read_cache_mb: float = Field(default=DEFAULT_CACHE_MB, ge=0, description="with an object store: MiB of "
                                 "verified data set chunks each worker process keeps, so that a fit's later passes "
                                 "read nothing from the store (size it to a worker's share of the data); 0: none")

    @field_validator("fit_nice", "preimage_nice", "shard_min_rows", "lease_ttl_s", "read_cache_mb", mode="before")
    @classmethod
    def _blank_is_default(cls, value: object, info) -> object:
        if isinstance(value, str) and not value.strip():
            return cls.model_fields[info.field_name].default
        return value

    @field_validator("fit_nice", "preimage_nice", mode="after")
    @classmethod
    def _clipped_nice(cls, value: int) -> int:
        return min(19, max(0, value))

    @field_validator("background_policy", mode="before")
    @classmethod
    def _policy_word(cls, value: object) -> object:
        if isinstance(value, str):
            word = value.strip().lower() or BACKGROUND_POLICY
            if word not in ("idle", "normal"):
                raise ValueError(f'KPCA_BACKGROUND_POLICY must be "idle" or "normal", not {word!r}')
            return word
        return value

    def worker_environ(self) -> dict[str, str]:
        """This group's values as the environment variables a worker reads them from (what the embedded
        cluster's workers are started with). O(fields)."""
        return {f"KPCA_{name.upper()}": str(getattr(self, name)) for name in WorkerGroup.model_fields}


class WorkerSettings(WorkerGroup, BaseSettings):
    """`WorkerGroup` read from the environment (variables ``KPCA_`` and the field's name)."""

    model_config = SettingsConfigDict(env_prefix="KPCA_", extra="ignore")


def worker_settings() -> WorkerSettings:
    """The settings of this process's environment, read now (a worker reads them when it uses them, so a
    test that sets a variable sees it at once). A value that cannot be read is a ValueError naming its
    variable. Cost: one read of the environment."""
    try:
        return WorkerSettings()
    except ValidationError as exc:
        problems = "; ".join(f"KPCA_{str(e['loc'][0]).upper()}: {e['msg']}" if e["loc"] else e["msg"]
                             for e in exc.errors())
        raise ValueError(problems) from None


def tune_store(where: str) -> None:
    """Give this process's object-store stores the settings' lease time and read cache (`store.places.tune`)
    when the data location ``where`` is an object store: what a worker does before it opens one. Nothing for a
    folder (a serving task's hot path: `worker_settings` reads the environment, about 0.2 ms). O(1)."""
    from store.places import is_url, tune

    if is_url(where):
        chosen = worker_settings()
        tune(chosen.lease_ttl_s, chosen.read_cache_mb)
