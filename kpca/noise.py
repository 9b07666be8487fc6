"""Corruptions for denoising experiments (seed 003 §6): Gaussian and speckle noise.

Both take the random generator explicitly (a ``numpy.random.Generator``;
never a global seed) and return a new array; the input is not modified.

* Gaussian: ``x + eps`` with ``eps ~ N(0, sigma^2 I)``, seed 003 uses sigma in
  {0.02, 0.04, 0.06} on data divided by the norm of its largest row (§6), not
  on pixels in [0, 1] (`bench/akpca.py` converts);
* speckle: every entry independently set to 0 with probability ``p``
  (seed 003's "speckle", after its reference [4]; p in {0.2, 0.3, 0.4}).
"""

from __future__ import annotations

import math

import numpy as np


def _check_rng(rng) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng: expected a numpy.random.Generator, got {type(rng).__name__}")
    return rng


def gaussian_noise(
    X: np.ndarray,
    sigma: float,
    rng: np.random.Generator,
    clip: tuple[float, float] | None = None,
) -> np.ndarray:
    """Additive white Gaussian noise, ``X + N(0, sigma^2)`` entry-wise.

    Parameters
    ----------
    X : ndarray of any shape
    sigma : float
        Standard deviation, ``>= 0``; 0 returns a (floating) copy of X.
    rng : numpy.random.Generator
    clip : (lo, hi), optional
        Clip the result to ``[lo, hi]`` (e.g. ``(0, 1)`` for images); no
        clipping by default, so that the noise is exactly Gaussian.

    Returns
    -------
    ndarray of X's shape; X's dtype if floating, else float64.
    """
    _check_rng(rng)
    if not (math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"sigma: must be finite and >= 0, got {sigma}")
    X = np.asarray(X)
    dtype = X.dtype if np.issubdtype(X.dtype, np.floating) else np.float64
    noisy = (X + rng.normal(0.0, sigma, size=X.shape)).astype(dtype, copy=False)
    if clip is not None:
        lo, hi = clip
        if not lo <= hi:
            raise ValueError(f"clip: lower bound {lo} exceeds upper bound {hi}")
        np.clip(noisy, lo, hi, out=noisy)
    return noisy


def speckle_noise(X: np.ndarray, p: float, rng: np.random.Generator) -> np.ndarray:
    """Each entry set to 0 independently with probability ``p`` (seed 003 §6).

    For a colour image of shape (H, W, C) the channels of a pixel are
    dropped independently; to drop whole pixels, corrupt a mask of ones of
    shape (H, W, 1) and multiply the image by it.

    Parameters
    ----------
    X : ndarray of any shape
    p : float
        Drop probability, ``0 <= p <= 1``.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray, a copy of X (same dtype) with the dropped entries zeroed.
    """
    _check_rng(rng)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p: must lie in [0, 1], got {p}")
    X = np.asarray(X)
    noisy = X.copy()
    noisy[rng.random(X.shape) < p] = 0
    return noisy
