"""HTTP layer: routes validate, delegate to `store` and `workers`, translate errors.

Build an app with `create_app`; run it with ``python -m service``.
"""

from service.app import create_app
from service.settings import Settings, get_settings

__all__ = ["Settings", "create_app", "get_settings"]
