"""The noise level of a noisy image (or of noisy rows), estimated from the input alone.

Method (Chen, Zhu & Heng, "An efficient statistical method for image noise level estimation",
ICCV 2015). Write every ``p x p`` patch of the image as a vector of ``d = p^2`` values and let
``lambda_1 >= ... >= lambda_d`` be the eigenvalues of their covariance. For white Gaussian noise of
standard deviation s added to an image whose patches lie close to a low-dimensional subspace, the
trailing eigenvalues are the noise's, all about ``s^2``, and they follow a distribution whose mean
equals its median. The estimate is

    s^2 = mean(lambda_i, ..., lambda_d)                                              (N1)

for the first (largest) tail ``i .. d`` whose mean is at most its median, i.e. with at least as many
of its eigenvalues above the mean as below it: the leading eigenvalues carry the image and pull the mean
up, and are dropped until the tail looks like noise alone. For rows (`noise_level_rows`) the rows
themselves are the vectors. An image whose patches fill every direction (pure texture) gives an
estimate above the true noise; an image clipped to [0, 1] where it is saturated gives one below.
"""

from __future__ import annotations

import numpy as np

PATCH = 7  # side of the patches of (N1)
MAX_PATCHES = 20_000  # patches used at most (a fixed-seed sample beyond)


def _tail_variance(eigenvalues: np.ndarray) -> float:
    """(N1) on eigenvalues sorted in decreasing order: the mean of the first tail whose mean is at
    most its median. O(d^2) for d eigenvalues (d is a patch's size)."""
    values = np.maximum(np.asarray(eigenvalues, dtype=np.float64), 0.0)
    for start in range(values.size):
        tail = values[start:]
        mean = float(tail.mean())
        if np.count_nonzero(tail > mean) >= np.count_nonzero(tail < mean):
            return mean
    return float(values[-1])


def noise_level_rows(rows, max_rows: int = MAX_PATCHES, seed: int = 0) -> float:
    """Standard deviation of white noise on the rows of ``rows`` (m, d), by (N1) on their covariance.

    Needs ``m > d`` rows, ``d >= 2`` (ValueError naming ``rows`` otherwise); at most ``max_rows`` rows
    are used (a fixed-seed sample). Cost O(m d^2 + d^3).
    """
    X = np.asarray(rows, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] < 2 or X.shape[0] <= X.shape[1]:
        raise ValueError(f"rows: the noise level needs more rows than columns (and 2 columns or more), got "
                         f"shape {X.shape}")
    if not np.isfinite(X).all():
        raise ValueError("rows: values must be finite")
    if X.shape[0] > max_rows:
        X = X[np.sort(np.random.default_rng(seed).choice(X.shape[0], max_rows, replace=False))]
    X = X - X.mean(axis=0)
    eigenvalues = np.linalg.eigvalsh(X.T @ X / (X.shape[0] - 1))[::-1]
    return float(np.sqrt(_tail_variance(eigenvalues)))


def noise_level(image, patch: int = PATCH) -> float:
    """Standard deviation of white Gaussian noise on an image, by (N1) over its ``patch x patch``
    patches (every position; a fixed-seed sample of `MAX_PATCHES` beyond).

    Parameters
    ----------
    image : ndarray of shape (H, W) or (H, W, C)
        Values on the scale the noise is wanted on (pixels in [0, 1]: the noise in the same unit).
        The channels of a colour image are treated as separate grey images.
    patch : int, default 7
        Smaller patches are used on an image too small for as many patches as a patch has values.

    Returns
    -------
    float, the estimate s (0 for an image without noise or variation). ValueError naming ``image``
    when it has fewer than ``patch^2 + 1`` patches. Cost O(m patch^4) for m patches (at most `MAX_PATCHES`,
    the only ones copied).
    """
    image = np.asarray(image, dtype=np.float64)
    if image.ndim == 3:
        image = np.concatenate([image[:, :, c] for c in range(image.shape[2])], axis=1)
    if image.ndim != 2:
        raise ValueError(f"image: expected shape (H, W) or (H, W, C), got {image.shape}")
    H, W = image.shape
    while patch > 2 and (H - patch + 1) * (W - patch + 1) <= patch * patch:  # a small image: smaller patches
        patch -= 1
    if H < patch or W < patch or (H - patch + 1) * (W - patch + 1) <= patch * patch:
        raise ValueError(f"image: {H}x{W} is too small to estimate its noise from {patch}x{patch} patches")
    windows = np.lib.stride_tricks.sliding_window_view(image, (patch, patch))  # a view: nothing copied yet
    count, across = windows.shape[0] * windows.shape[1], windows.shape[1]
    if count > MAX_PATCHES:  # `noise_level_rows`' sample, drawn before any patch is copied
        chosen = np.sort(np.random.default_rng(0).choice(count, MAX_PATCHES, replace=False))
        return noise_level_rows(windows[chosen // across, chosen % across].reshape(-1, patch * patch))
    return noise_level_rows(windows.reshape(-1, patch * patch))
