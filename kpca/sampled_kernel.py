"""What a sample of the rows says of their kernel matrix before a fit: how far K' is below the kernel's
own scale (`kernel_spread`, which ``kernel_precision: auto`` decides by) and how far from positive
semi-definite an indefinite kernel is on them (`negative_share`). Both from a fixed-seed sample of m rows
(`kpca.rows.KernelRows.sample`) in float64 local coordinates: O(m^2 n), and O(m^3) for the eigenvalues.
"""

from __future__ import annotations

import numpy as np

from kpca._dense import eigvalsh
from kpca.kernels import kernel_block

SAMPLE_ROWS = 512  # rows sampled


def _sample_kernel(rows, size: int, seed: int) -> np.ndarray:
    """The raw kernel matrix (m, m) of a fixed-seed sample of the rows, float64, local coordinates."""
    points = rows.to_local(rows.sample(size, seed), np.float64)
    return kernel_block(points, points, rows.kernel.require_resolved())


def kernel_spread(rows, size: int = SAMPLE_ROWS, seed: int = 0) -> float:
    """How far K' is below the kernel's own scale: ``max |K| / (trace(K') / m)`` over a sample of m rows
    (the kernel resolved first); inf where the sample's K' has no positive trace. Float32 tiles resolve a
    K' whose entries are within about 1e-7 times this spread of their own size
    (`kpca.solvers._kha.auto_precision`): a kernel far wider than the data's distances, or a dot-product
    kernel on rows far from the origin, has a large one. Kept on ``rows`` after the first call."""
    if getattr(rows, "_spread", None) is None:
        K = _sample_kernel(rows, size, seed)
        trace = float(np.trace(K) - K.sum() / K.shape[0]) / K.shape[0]  # trace(K') / m
        rows._spread = float(np.abs(K).max() / trace) if trace > 0 else float("inf")
    return rows._spread


def negative_share(rows, size: int = SAMPLE_ROWS, seed: int = 0) -> float:
    """``-lambda_min / lambda_max`` of K' over a sample of m rows, or 0 where it has no negative
    eigenvalue beyond rounding: how far from positive semi-definite an indefinite kernel
    (`kpca.kernels.Kernel.definite` False: tanh) is on these rows."""
    K = _sample_kernel(rows, size, seed)
    K = K - K.mean(axis=0)[None, :] - K.mean(axis=1)[:, None] + K.mean()
    values = eigvalsh(0.5 * (K + K.T))
    top = max(float(values[-1]), np.finfo(np.float64).tiny)
    return max(0.0, -float(values[0]) / top - 1e-12 * K.shape[0])
