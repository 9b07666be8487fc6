"""HTTP layer: routes validate, delegate to `store` and `workers`, translate errors.

Build an app with `create_app`; run it with ``python -m service``.

The exports are imported on first use (PEP 562), so that a light submodule does not import the whole
app: uvicorn's logging set-up imports `service.access_log` in each API process before its signal
handling is in place, and a Ctrl-C during a long import there ended the process with a traceback.
"""

from __future__ import annotations

import importlib

_EXPORTS = {"create_app": "service.app", "Settings": "service.settings", "get_settings": "service.settings"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    """``create_app``, ``Settings`` and ``get_settings``, imported from their modules on first use."""
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'service' has no attribute {name!r}")
