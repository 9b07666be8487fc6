"""The work a serving request asks of the workers, estimated before it runs, against ``max_serving_work``.

Work is counted in kernel-value terms: input rows x model points x features (one kernel row per input
row, what a projection costs), times each start and iteration a pre-image method may take at most
(`kpca.preimage.work_per_row`: ``restarts`` x ``n_iter`` for fixed point, ``max_iter`` for gradient
descent). A request over the limit is a 413 naming the option that multiplies it most (or ``rows``)
and the limit, before anything is sent to the workers. A tuned request (``tune=auto``) is counted as the
tuning runs it (`kpca.images.model_tuning.tuned_work`: its candidates on the tuning windows or rows, then
the chosen one), not as the untuned default's fixed point of 3 restarts of 100 steps, which it never runs.
"""

from __future__ import annotations

from kpca.images.model_tuning import candidates_for, image_tuning_rows, tuned_work
from kpca.preimage import work_per_row
from service.errors import ApiError

__all__ = ["check_serving_work", "check_tuned_work", "image_tuning_rows", "serving_work"]


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


def check_serving_work(n_rows: int, n_points: int, n_features: int, limit: int | None, method: str | None = None,
                       options: dict | None = None, rows_field: str = "rows") -> int:
    """The request's work (`serving_work`), or a 413 ``too_large`` when it is over ``limit``
    (``max_serving_work``; None: a request the limit does not bound, a background image job): on the option
    of largest value (``options.n_iter``) when the method has such factors, else on ``rows_field``, the
    message giving every factor and the limit. Cost O(options)."""
    work, factors = serving_work(n_rows, n_points, n_features, method, options)
    if limit is None or work <= limit:
        return work
    field = f"options.{max(factors, key=factors.__getitem__)}" if factors else rows_field
    terms = [f"{n_rows} {rows_field}", f"{n_points} model points", f"{n_features} features"]
    terms += [f"options.{name} {value}" for name, value in factors.items()]
    raise ApiError(413, "too_large", f"{' x '.join(terms)} = {work} units of work, over the limit of {limit} per "
                   f"request (KPCA_MAX_SERVING_WORK); lower {field}" + (" or send fewer rows" if factors else "")
                   + ", or split the request", field)


def check_tuned_work(tuning_rows: int, served_rows: int, n_points: int, n_features: int, limit: int | None,
                     n_components: int, kernel: str, fixed: dict, rows_field: str = "rows",
                     offers_background: bool = False) -> int:
    """The work of a tuned request (``tune=auto``) on a model of ``n_components`` components and kernel type
    ``kernel`` (`kpca.images.model_tuning.tuned_work` of its candidates, less what ``fixed`` settles, on
    ``tuning_rows`` rows, then ``served_rows``), times ``n_points`` and ``n_features``; a 413 ``too_large`` on
    ``rows_field`` over ``limit`` (None: not bounded, as `check_serving_work`), naming the figures (and, with
    ``offers_background``, that a background job is not bounded so: a route that has one). ValueError (a method
    or rank the model cannot take)
    from `kpca.images.model_tuning.candidates_for`. Cost O(candidates)."""
    rows = tuned_work(candidates_for(n_components, kernel, fixed), tuning_rows, served_rows)
    work = rows * int(n_points) * int(n_features)
    if limit is None or work <= limit:
        return work
    raise ApiError(413, "too_large", f"tuning and serving {served_rows} {rows_field} through {n_points} model points "
                   f"x {n_features} features takes {rows} kernel rows = {work} units of work, over the limit of "
                   f"{limit} per request (KPCA_MAX_SERVING_WORK); lower {rows_field}, give method and n_components "
                   "(fewer candidates), use tune=off" + (", or send it as a background job (background=true&job=NAME)"
                                                        if offers_background else ""), rows_field)

