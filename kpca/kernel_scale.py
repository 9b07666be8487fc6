"""Kernel parameters against the scale of the data: values that overflow or underflow refused up front.

A dot-product kernel's largest value on data whose rows have norms at most
``R`` is reached at ``<x, y> = R^2`` (Cauchy-Schwarz): for the polynomial
kernel ``(gamma R^2 + offset)^degree``. A fit multiplies kernel values by
coefficients and sums them over the ``l`` rows, and normalises with
squares, so the largest kernel value must satisfy ``k_max^2 * l`` finite in
the working dtype, and ``k_max^2`` must not underflow (then every kernel
value is 0 and there is nothing to fit). `check_kernel_scale` says so with
a `ParamError` naming the parameter to change, before a fit is accepted.

Radial kernels' values lie in [0, 1] whatever the scale; their width is
checked on its own (`kpca.kernels`).
"""

from __future__ import annotations

import math

import numpy as np

from kpca.kernels import KernelSpec
from kpca.params import ParamError

#: Rows read from each of the start, middle and end of a data set by `sample_max_sq_norm`.
SAMPLE_ROWS = 1024


def sample_max_sq_norm(rows, n_rows: int, sample_rows: int = SAMPLE_ROWS) -> float:
    """The largest squared row norm over up to three windows of ``sample_rows`` rows (start, middle, end).

    Parameters
    ----------
    rows : row source of shape (n_rows, n_features), ``rows[a:b]`` an ndarray
    n_rows : int

    Returns
    -------
    float : max over the sampled rows of ``||x||^2``, in float64 (inf if it overflows).

    Notes
    -----
    A bound from a sample, not from every row: cheap (at most 3 windows read,
    O(sample_rows * n_features)) and exact for sets of up to 3 windows.
    """
    starts = sorted({0, max(0, n_rows // 2 - sample_rows // 2), max(0, n_rows - sample_rows)})
    largest = 0.0
    with np.errstate(over="ignore"):
        for start in starts:
            block = np.asarray(rows[start:min(n_rows, start + sample_rows)], dtype=np.float64)
            if block.size:
                largest = max(largest, float(np.einsum("ij,ij->i", block, block).max()))
    return largest


def check_kernel_scale(spec: KernelSpec, max_sq_norm: float, dtype, n_rows: int) -> None:
    """Refuse a dot-product kernel whose values overflow or underflow on rows of squared norm up to
    ``max_sq_norm``, computed in ``dtype`` over ``n_rows`` rows.

    Raises
    ------
    ParamError
        On ``kernel.gamma`` (polynomial, tanh: the scale of the inner
        product), saying which way to change it.

    Notes
    -----
    Pure; works in logarithms, so nothing it computes overflows. Cost O(1).
    """
    if spec.type not in ("polynomial", "tanh") or spec.unresolved:
        return
    info = np.finfo(np.dtype(dtype))
    gamma = float(spec.gamma)
    if spec.type == "tanh":
        if not math.isfinite(gamma * max_sq_norm) or gamma * max_sq_norm > float(info.max):
            raise ParamError("kernel.gamma", f"{gamma!r} is too large for this data (rows of norm up to "
                             f"{math.sqrt(max_sq_norm):.3g}): gamma <x, y> overflows {info.dtype}")
        return
    degree, offset = int(spec.degree), float(spec.offset)
    log_top = math.log(float(info.max) / max(1, n_rows)) / 2  # k_max^2 * l must stay finite
    log_bottom = math.log(float(info.tiny)) / 2  # k_max^2 must not underflow
    log_gamma_t = math.log(gamma) + math.log(max_sq_norm) if max_sq_norm > 0 else -math.inf
    log_base = max(log_gamma_t, math.log(offset) if offset > 0 else -math.inf)
    if offset > 0 and log_gamma_t > -math.inf:
        log_base = log_base + math.log1p(math.exp(min(log_gamma_t, math.log(offset)) - log_base))
    log_k_max = degree * log_base
    scale = f"rows of norm up to {math.sqrt(max_sq_norm):.3g}" if math.isfinite(max_sq_norm) else "these rows"
    if log_k_max > log_top:
        raise ParamError("kernel.gamma", f"{gamma!r} is too large for this data: with {scale}, degree {degree} "
                         f"and offset {offset:g}, (gamma <x, y> + offset)^degree reaches about "
                         f"1e{log_k_max / math.log(10):.0f}, beyond what {info.dtype} sums over {n_rows} rows "
                         "hold; use a smaller gamma (about 1 / the largest squared norm) or degree")
    if log_k_max < log_bottom:
        raise ParamError("kernel.gamma", f"{gamma!r} is too small for this data: with {scale}, degree {degree} "
                         f"and offset {offset:g}, every kernel value is below about 1e{log_k_max / math.log(10):.0f}"
                         f" and underflows {info.dtype} to 0; use a larger gamma or an offset > 0")
