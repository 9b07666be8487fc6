"""Schemas of image jobs: the progress of a named image request (``GET /v1/image-jobs/{job}``)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from store.image_jobs import ImageJobRecord, ImageStep


class ImageJobPublic(BaseModel):
    """An image request's progress: the step running now, its units done, the steps finished."""

    name: str = Field(description="the job name the request gave (its job query parameter)")
    kind: str = Field(description="denoise-image (a stored model), denoise-image-fit (one call) or hyperresolution")
    status: str = Field(description="running, completed, failed or cancelled")
    phase: str = Field(description="the step running now (noise, tuning, denoising, hyperresolution, done)")
    done: int = Field(description="units of the current step done (tiles, candidates, rounds)")
    total: int = Field(description="units of the current step in all (0: not counted)")
    fraction: float = Field(description="fraction of the current step done")
    elapsed_s: float = Field(description="seconds since the request started")
    steps: list[ImageStep] = Field(description="the steps finished, each with its seconds")
    chosen: dict | None = Field(description="what the tuning chose, once the request has ended")
    error: str | None = Field(description="why a failed request failed")
    created_at: str = Field(description="when the request started (UTC, ISO 8601)")
    updated_at: str = Field(description="when the record was last written (UTC, ISO 8601)")

    @classmethod
    def of(cls, record: ImageJobRecord) -> "ImageJobPublic":
        return cls(**record.model_dump(exclude={"schema_version"}), fraction=record.fraction)
