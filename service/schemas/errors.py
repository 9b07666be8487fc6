"""The error envelope every 4xx/5xx response carries."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ErrorDetail(BaseModel):
    code: str = Field(description="machine-readable error code, such as invalid, not_found or conflict")
    message: str = Field(description="what is wrong and how to fix it")
    field: str | None = Field(default=None, description="the request field, parameter or header at fault, if one is")


class ErrorBody(BaseModel):
    """``{"error": {"code": ..., "message": ..., "field": ...}}``."""

    error: ErrorDetail = Field(description="the error")
