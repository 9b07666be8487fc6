"""A small Python client for kpca-stream (HTTP only; no server-side imports)."""

from client.api import ApiError, Client, ConnectionFailed
from client.upload import UploadError, upload_array

__all__ = ["upload_array", "UploadError", "Client", "ApiError", "ConnectionFailed"]
