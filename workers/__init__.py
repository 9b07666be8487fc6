"""Dask layer: the only package that knows dask.

`Backend` is the small interface the service talks to (submit, project,
predict); `workers.fit` drives training passes on a worker (a model's fit,
and through it a clustering's, `workers.cluster`), `workers.serve` serves
projections. Job state lives in `store/`, never in dask futures.
"""

from workers.backend import Backend

__all__ = ["Backend"]
