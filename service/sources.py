"""Which existing zarr arrays a client may register: the ``register_prefixes`` policy.

The service decides *whether* a location may be read (this module); the store
opens it read-only and validates its contents (`store.DatasetStore.register`).
"""

from __future__ import annotations

import os

from service.errors import ApiError

_SETTING = "register_prefixes (environment KPCA_REGISTER_PREFIXES)"


def is_url(location: str) -> bool:
    """True for ``scheme://...`` locations, False for local paths. Cost O(len)."""
    return "://" in location


def _below(location: str, prefix: str) -> bool:
    """``location`` equals ``prefix`` or lies below it, by whole path components."""
    return location == prefix or location.startswith(prefix.rstrip("/") + "/")


def allowed_source(location: str, prefixes: list[str]) -> str:
    """Check a source location against the configured prefixes and return the location to open.

    Parameters
    ----------
    location : str
        ``source.zarr`` from the request: an absolute local path or a URL.
    prefixes : list of str
        `service.settings.Settings.register_prefixes`.

    Returns
    -------
    str
        For a local path, its ``os.path.realpath`` (so a symbolic link cannot
        lead outside the prefixes after the check); a URL unchanged.

    Raises
    ------
    ApiError
        422 on field ``"source"``: a relative path, control characters, or
        ``..`` components in a URL. 403 ``forbidden`` on ``"source"``: the
        location is not below any prefix (the message names the setting).

    Notes
    -----
    Cost: one ``realpath`` (a few ``lstat`` calls) for local paths; nothing
    is opened or read.
    """
    if any(ord(char) < 32 for char in location):
        raise ApiError(422, "invalid", "source.zarr must not contain control characters", "source")
    if is_url(location):
        path_part = location.split("://", 1)[1]
        if ".." in path_part.split("/"):
            raise ApiError(422, "invalid", "source.zarr must not contain '..' components", "source")
        resolved = location
        candidates = [p for p in prefixes if is_url(p)]
    else:
        if not os.path.isabs(location):
            raise ApiError(
                422, "invalid", f"source.zarr must be an absolute path or a URL, not {location!r}", "source"
            )
        resolved = os.path.realpath(location)
        candidates = [os.path.realpath(p) for p in prefixes if not is_url(p)]
    if not any(_below(resolved, prefix) for prefix in candidates):
        allowed = ", ".join(prefixes) if prefixes else "none: registration is disabled"
        raise ApiError(
            403,
            "forbidden",
            f"registering arrays from {resolved!r} is not allowed (allowed locations: {allowed}); "
            f"an operator can allow it with the setting {_SETTING}",
            "source",
        )
    return resolved
