"""Schemas of image jobs: the progress of a named image request (``GET /v1/image-jobs/{job}``)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from store.image_jobs import ImageJobRecord, ImageStep


class ImageJobPublic(BaseModel):
    """An image request's progress: the step running now, its units done, the steps finished."""

    name: str
    kind: str
    status: str = Field(description="running, completed, failed or cancelled")
    phase: str = Field(description="the step running now (noise, tuning, denoising, hyperresolution, done)")
    done: int
    total: int
    fraction: float = Field(description="fraction of the current step done")
    elapsed_s: float
    steps: list[ImageStep]
    chosen: dict | None = Field(description="what the tuning chose, once the request has ended")
    error: str | None
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, record: ImageJobRecord) -> "ImageJobPublic":
        return cls(**record.model_dump(exclude={"schema_version"}), fraction=record.fraction)
