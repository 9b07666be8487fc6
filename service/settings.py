"""Service configuration: environment variables prefixed ``KPCA_``.

``get_settings()`` reads the environment once (cached); tests build their own
`Settings` and pass it to `service.app.create_app` instead.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Everything the HTTP layer needs to start.

    Attributes
    ----------
    host, port : where ``python -m service`` listens.
    data_dir : root of the local data folder (data sets, models, checkpoints).
    scheduler : address of an external dask scheduler (``tcp://host:8786``);
        ``None`` starts an embedded `LocalCluster`.
    n_workers : worker processes of the embedded cluster.
    max_body_bytes : largest accepted request body; larger ones get 413.
    exact_limit : largest data set (rows) on which a fit reports the exact
        excess reconstruction error. The worker reads it; the service only
        carries it.
    """

    model_config = SettingsConfigDict(env_prefix="KPCA_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    data_dir: Path = Path("./data")
    scheduler: str | None = None
    n_workers: int = Field(default=2, ge=1)
    max_body_bytes: int = Field(default=64 * 1024 * 1024, ge=1)
    exact_limit: int = Field(default=3000, ge=0)

    @field_validator("scheduler", mode="before")
    @classmethod
    def _blank_scheduler_is_embedded(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            return None
        return value


@lru_cache
def get_settings() -> Settings:
    """The settings read from the environment (cached for the process)."""
    return Settings()
