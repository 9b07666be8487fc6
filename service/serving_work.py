"""The work a serving request asks of the workers, estimated before it runs, against ``max_serving_work``.

Work is counted in kernel-value terms: input rows x model points x features (one kernel row per input
row, what a projection costs), times each start and iteration a pre-image method may take at most
(`kpca.preimage.work_per_row`: ``restarts`` x ``n_iter`` for fixed point, ``max_iter`` for gradient
descent). A request over the limit is a 413 naming the option that multiplies it most (or ``rows``)
and the limit, before anything is sent to the workers.
"""

from __future__ import annotations

from kpca.preimage import work_per_row
from service.errors import ApiError


def serving_work(n_rows: int, n_points: int, n_features: int, method: str | None = None,
                 options: dict | None = None) -> tuple[int, dict[str, int]]:
    """``(work, factors)`` of serving ``n_rows`` rows through a model of ``n_points`` points (training
    rows or centres) of ``n_features`` features: a projection (``method`` None) or the pre-image
    method ``method`` (resolved, not "auto") with ``options``. Cost O(options)."""
    factors = work_per_row(method, options or {}) if method else {}
    work = int(n_rows) * int(n_points) * int(n_features)
    for value in factors.values():
        work *= value
    return work, factors


def check_serving_work(n_rows: int, n_points: int, n_features: int, limit: int, method: str | None = None,
                       options: dict | None = None, rows_field: str = "rows") -> int:
    """The request's work (`serving_work`), or a 413 ``too_large`` when it is over ``limit``
    (``max_serving_work``): on the option of largest value (``options.n_iter``) when the method has
    such factors, else on ``rows_field``, the message giving every factor and the limit. Cost O(options)."""
    work, factors = serving_work(n_rows, n_points, n_features, method, options)
    if work <= limit:
        return work
    field = f"options.{max(factors, key=factors.__getitem__)}" if factors else rows_field
    terms = [f"{n_rows} {rows_field}", f"{n_points} model points", f"{n_features} features"]
    terms += [f"options.{name} {value}" for name, value in factors.items()]
    raise ApiError(413, "too_large", f"{' x '.join(terms)} = {work} units of work, over the limit of {limit} per "
                   f"request (KPCA_MAX_SERVING_WORK); lower {field}" + (" or send fewer rows" if factors else "")
                   + ", or split the request", field)
