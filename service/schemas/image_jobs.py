"""Schemas of image jobs: the progress of a named image request (``GET /v1/image-jobs/{job}``), made
from its stored record (`store.image_jobs.ImageJobRecord`) by `service.public.image_job_public`, plus
the fraction of the current step done."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ImageStep(BaseModel):
    """One step of an image job and how long it took."""

    model_config = ConfigDict(extra="forbid")

    step: str = Field(description="noise (the noise estimate), tuning, denoising, fitting, hyperresolution")
    seconds: float = Field(ge=0, description="how long the step took")


class ImageJobPublic(BaseModel):
    """An image request's progress: the step running now, its units done, the steps finished."""

    name: str = Field(description="the job name the request gave (its job query parameter)")
    kind: str = Field(description="denoise-image (a stored model), denoise-image-fit (one call), hyperresolution")
    status: str = Field(default="running", description="running, completed, failed or cancelled")
    phase: str = Field(default="starting", description="the step running now")
    done: int = Field(default=0, ge=0, description="units of the phase done (tiles, candidates, rounds)")
    total: int = Field(default=0, ge=0, description="units of the phase in all")
    elapsed_s: float = Field(default=0.0, ge=0, description="seconds since the request started")
    steps: list[ImageStep] = Field(default_factory=list, description="the steps finished, with their times")
    chosen: dict | None = Field(default=None, description="what the tuning chose, once it has")
    error: str | None = Field(default=None, description="why a failed request failed")
    created_at: str = Field(default="", description="when the request started (UTC, ISO 8601)")
    updated_at: str = Field(default="", description="when the record was last written (UTC, ISO 8601)")
    fraction: float = Field(description="fraction of the current step done")
    step_left_s: float | None = Field(default=None, description=(
        "seconds the current step has left at its pace so far (null before its first unit, and once ended)"))
    background: bool = Field(default=False, description=(
        "run in the background: its answer is at GET /v1/image-jobs/{job}/result once completed"))
