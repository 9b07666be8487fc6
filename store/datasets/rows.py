"""Validation and conversion of one uploaded chunk of rows.

Cast rule (for ``.npy`` uploads of any bool, integer or float dtype, and for
JSON or CSV rows, which arrive as float64):

* values are converted with numpy ``astype(dtype)`` to the data set's dtype
  (float32 or float64): floats round to nearest (ties to even), so float64
  -> float32 keeps about 7 significant digits; bools become 0.0 / 1.0;
* integers (signed or unsigned, up to 64 bits) are represented exactly up to
  2**24 in float32 and 2**53 in float64; larger magnitudes round to the
  nearest representable float (``2**53 + 1`` becomes ``2**53`` in float64,
  ``2**64 - 1`` becomes ``2**64``); no integer overflows either dtype, so
  they are never refused;
* floats (float16 to long double) whose magnitude exceeds the largest finite
  value of the target dtype (``|x| > 3.4028235e38`` for float32, or beyond
  float64 for long double) overflow to inf and the chunk is refused
  (`Invalid` on ``"rows"``, HTTP 422), naming the first such row;
* NaN and inf are refused the same way (``"row i contains NaN or inf"``);
* anything else (complex, strings, objects, structured dtypes) is refused.

Byte-identical results of this conversion are what makes a re-upload a no-op.
"""

from __future__ import annotations

import numpy as np

from store.errors import Invalid

ACCEPTED_KINDS = "biuf"
"""numpy dtype kinds accepted in uploads: bool, signed and unsigned integer, float."""


def prepare_rows(rows: object, n_features: int, dtype: str) -> np.ndarray:
    """Check an uploaded chunk and convert it to the data set's dtype.

    Conversion rule: values are converted with ``numpy.ndarray.astype(dtype)``
    (round to nearest); bools become 0/1; integers are exact up to 2**24 in
    float32 and 2**53 in float64. After conversion every value must be finite,
    so a float64 value too large for float32 is refused like an inf.

    Parameters
    ----------
    rows : array_like
        ndarray of shape (n_rows, n_features), or of shape (n_features,) for
        a single row; nested lists are converted with `numpy.asarray`.
    n_features : int
        Columns the data set expects.
    dtype : {"float32", "float64"}
        Dtype of the data set.

    Returns
    -------
    ndarray of shape (n_rows, n_features)
        C-contiguous array of ``dtype``.

    Raises
    ------
    Invalid
        Field ``"rows"``: not rectangular, not 1-D/2-D, wrong number of
        columns, no rows, unsupported dtype (object, complex, strings, ...),
        or a row holding NaN or inf (the first such row is named, counting
        from 0 within the chunk).

    Notes
    -----
    Cost: one pass to convert and one to check finiteness; memory one copy of
    the chunk in ``dtype`` plus a boolean mask.
    """
    if not isinstance(rows, np.ndarray):
        try:
            rows = np.asarray(rows)
        except (ValueError, TypeError):
            raise Invalid("rows", "rows must be a rectangular array of numbers") from None
    if rows.ndim == 1:
        if rows.shape[0] != n_features:
            raise Invalid("rows", f"expected {n_features} columns, got {rows.shape[0]}")
        rows = rows.reshape(1, n_features)
    elif rows.ndim != 2:
        raise Invalid(
            "rows", f"expected a 2-D array of shape (n_rows, {n_features}), got a {rows.ndim}-D array"
        )
    if rows.shape[1] != n_features:
        raise Invalid("rows", f"expected {n_features} columns, got {rows.shape[1]}")
    if rows.shape[0] == 0:
        raise Invalid("rows", "empty chunk")
    if rows.dtype.kind not in ACCEPTED_KINDS:
        raise Invalid(
            "rows", f"unsupported dtype {rows.dtype}; send float, integer or bool values"
        )
    return convert_finite(rows, dtype, "rows")


def convert_finite(rows: np.ndarray, dtype, field: str, first_row: int = 0) -> np.ndarray:
    """``rows`` as a C-contiguous array of ``dtype``, or Invalid(field) naming the
    first row (counted from ``first_row``) holding NaN or inf, or values that
    overflow ``dtype``. Cost: one conversion pass and one finiteness pass."""
    with np.errstate(over="ignore", invalid="ignore"):
        converted = np.ascontiguousarray(rows.astype(dtype))
    finite_rows = np.isfinite(converted).all(axis=1)
    if not finite_rows.all():
        bad = int(np.argmin(finite_rows))
        if rows.dtype.kind == "f" and np.isfinite(rows[bad]).all():
            raise Invalid(field, f"row {first_row + bad} contains values too large for {dtype} "
                                 "(they overflow to inf)")
        raise Invalid(field, f"row {first_row + bad} contains NaN or inf")
    return converted
