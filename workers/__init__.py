"""Dask layer: the only package that knows dask.

`Backend` is the small interface the service talks to (submit, project);
`workers.fit` drives training passes on a worker, `workers.project` serves
projections. Job state lives in `store/`, never in dask futures.
"""

from workers.backend import Backend

__all__ = ["Backend"]
