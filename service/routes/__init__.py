"""One router per resource."""

from service.routes import datasets, health, models

__all__ = ["datasets", "health", "models"]
