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


#: The one answer to every location outside the allowed prefixes: it says nothing about the location
#: (whether it exists, what it resolves to, where a link leads).
OUTSIDE_MESSAGE = ("source.zarr is not inside a location this service registers arrays from; an operator "
                   f"lists those in the setting {_SETTING}")
DISABLED_MESSAGE = ("registering existing zarr arrays is disabled on this service; an operator enables it by "
                    f"listing the allowed locations in the setting {_SETTING}, for example "
                    "KPCA_REGISTER_PREFIXES=/data/arrays; or upload the rows instead (PUT .../chunks/{index})")


def allowed_source(location: str, prefixes: list[str]) -> str:
    """Check a source location against the configured prefixes and return the location to open.

    Parameters
    ----------
    location : str
        ``source.zarr`` from the request: an absolute local path or a URL.
    prefixes : list of str
        `service.settings.Settings.register_prefixes`; empty (the default)
        disables registration.

    Returns
    -------
    str
        For a local path, its ``os.path.realpath`` (so a symbolic link cannot
        lead outside the prefixes after the check); a URL unchanged.

    Raises
    ------
    ApiError
        403 ``forbidden`` on ``"source"``: registration disabled (no prefix;
        `DISABLED_MESSAGE`, whatever the location), or the location is not
        below any prefix (`OUTSIDE_MESSAGE`, the same words for every such
        location: nothing about it is echoed). 422 on ``"source"``, only when
        prefixes are configured: a relative path, control characters, or
        ``..`` components in a URL (the request's own spelling, nothing read
        from the disk).

    Notes
    -----
    Cost: one ``realpath`` (a few ``lstat`` calls) for local paths; nothing
    is opened or read.
    """
    if not prefixes:
        raise ApiError(403, "forbidden", DISABLED_MESSAGE, "source")
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
            raise ApiError(422, "invalid", "source.zarr must be an absolute path or a URL", "source")
        resolved = os.path.realpath(location)
        candidates = [os.path.realpath(p) for p in prefixes if not is_url(p)]
    if not any(_below(resolved, prefix) for prefix in candidates):
        raise ApiError(403, "forbidden", OUTSIDE_MESSAGE, "source")
    return resolved
