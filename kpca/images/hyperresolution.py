"""Hyperresolution with data consistency: an upscaled image that, downsampled the way the input was
made, gives the input back.

Seed 002 §4.2 scales a low-resolution image up by pixel replication, cuts it into patches, replaces
each by the pre-image of its projection onto kernel principal components learned from
high-resolution patches, and averages the overlaps. Nothing ties the result to the observation:
its block means drift from the input's pixels. Here the input y (h x w) is taken to be the block
mean of the unknown image u (fh x fw) over ``f x f`` blocks, ``y = D u``. The set of images
consistent with y is the affine set ``{u : D u = y}``, and the orthogonal projection onto it is

    P(u) = u + U (y - D u),                                                          (H1)

with U pixel replication: ``U = f^2 D^T`` and ``D U = I``, so U is D's pseudo-inverse and (H1) the
least change of u that satisfies ``D P(u) = y`` exactly. `hyperresolve` alternates the patch
reconstruction R and (H1) (iterative back-projection, Irani & Peleg 1991, with R as the prior):

    u_0 = U y,   u_{k+1} = P(R(u_k)),                                                (H2)

so every iterate, and the answer, reproduces the input to rounding. With the constraint off it
returns ``R(U y)``, seed 002's answer. ``u_0`` may also be the cubic-spline interpolation of y,
projected by (H1): a smoother start than replication's blocks.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kpca.images.patches import assemble_patches, downscale_mean, extract_patches, upscale_replicate


def back_project(upscaled: np.ndarray, low: np.ndarray, factor: int) -> np.ndarray:
    """(H1): the image nearest ``upscaled`` (fh, fw[, C]) whose ``factor x factor`` block means are
    ``low`` (h, w[, C]). ValueError naming ``upscaled`` for a shape that is not ``factor`` times
    ``low``'s. Cost O(f^2 h w C)."""
    upscaled = np.asarray(upscaled, dtype=np.float64)
    low = np.asarray(low, dtype=np.float64)
    factor = int(factor)
    expected = (low.shape[0] * factor, low.shape[1] * factor) + low.shape[2:]
    if upscaled.shape != expected:
        raise ValueError(f"upscaled: expected shape {expected} ({factor} times the input's), got {upscaled.shape}")
    return upscaled + upscale_replicate(low - downscale_mean(upscaled, factor), factor)


def patch_reconstruction(reconstruct_rows: Callable[[np.ndarray], np.ndarray], patch: int,
                         stride: int) -> Callable[[np.ndarray], np.ndarray]:
    """R of (H2) for a patch model: cut the image into ``patch x patch`` patches on a grid of step
    ``stride``, replace them by ``reconstruct_rows(patches)`` (pre-images), average the overlaps."""

    def reconstruct(image: np.ndarray) -> np.ndarray:
        patches, grid = extract_patches(image, patch, stride)
        return assemble_patches(np.asarray(reconstruct_rows(patches), dtype=np.float64), grid)

    return reconstruct


def spline_upscale(low: np.ndarray, factor: int) -> np.ndarray:
    """Cubic-spline interpolation of ``low`` (h, w[, C]) to (fh, fw[, C]), pixels taken as squares
    (``scipy.ndimage.zoom`` with ``grid_mode``), edges repeated. Cost O(f^2 h w C)."""
    import scipy.ndimage

    low = np.asarray(low, dtype=np.float64)
    zoom = (factor, factor) + (1,) * (low.ndim - 2)
    return scipy.ndimage.zoom(low, zoom, order=3, mode="nearest", grid_mode=True)


STARTS = {"replicate": upscale_replicate, "spline": spline_upscale}


def hyperresolve(low: np.ndarray, factor: int, reconstruct: Callable[[np.ndarray], np.ndarray],
                 constrained: bool = True, iterations: int = 3, start: str = "replicate",
                 report: Callable[[int, int], None] | None = None) -> np.ndarray:
    """An image ``factor`` times larger than ``low`` by (H2).

    Parameters
    ----------
    low : ndarray of shape (h, w) or (h, w, C)
        The observation, taken to be block means over ``factor x factor`` blocks.
    factor : int
        At least 1.
    reconstruct : callable
        R: an image of shape (fh, fw[, C]) to an image of the same shape
        (`patch_reconstruction` for a patch model).
    constrained : bool, default True
        Apply (H1) after every reconstruction (the answer then reproduces ``low``); False: seed 002's
        ``R(U y)``, one reconstruction.
    iterations : int, default 3
        Reconstructions of (H2) when constrained.
    start : {"replicate", "spline"}
        ``u_0``: pixel replication ``U y`` (seed 002) or cubic-spline interpolation (`spline_upscale`),
        back-projected when constrained.
    report : callable, optional
        ``report(done, total)`` after each reconstruction.

    Returns
    -------
    ndarray of shape (fh, fw[, C]), float64. Cost: ``iterations`` reconstructions plus O(f^2 h w C).
    """
    factor = int(factor)
    if factor < 1:
        raise ValueError(f"factor: must be an integer >= 1, got {factor}")
    low = np.asarray(low, dtype=np.float64)
    if start not in STARTS:
        raise ValueError(f"start: {start!r} is not one of {tuple(STARTS)}")
    image = STARTS[start](low, factor)
    if constrained and start != "replicate":
        image = back_project(image, low, factor)
    rounds = max(1, int(iterations)) if constrained else 1
    for k in range(rounds):
        image = reconstruct(image)
        if constrained:
            image = back_project(image, low, factor)
        if report is not None:
            report(k + 1, rounds)
    return image
