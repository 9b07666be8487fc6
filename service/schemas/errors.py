"""The error envelope every 4xx/5xx response carries."""

from __future__ import annotations

from pydantic import BaseModel


class ErrorDetail(BaseModel):
    code: str
    message: str
    field: str | None = None


class ErrorBody(BaseModel):
    """``{"error": {"code": ..., "message": ..., "field": ...}}``."""

    error: ErrorDetail
