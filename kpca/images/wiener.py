"""An empirical Wiener second stage for patch denoising (BM3D's second step; Zhang et al. 2010,
"LPG-PCA", second stage).

Given the noisy image y, a first-stage estimate p of the clean image (the *pilot*) and the noise level
s, the patches of p give a basis and the signal's energy along it; the patches of y are shrunk in that
basis by the Wiener gain and averaged back into an image:

    U, lambda   eigenvectors and eigenvalues of the covariance of p's patches (centred on their mean m)
    c_p = U^T (P_p - m),   c_y = U^T (P_y - m)                                          (W1)
    c = w * c_y,   w = c_p^2 / (c_p^2 + s^2)   ("patch": per patch and coefficient)     (W2)
                   w_k = lambda_k / (lambda_k + s^2)   ("component": per component)
    each patch m + U c, overlapping patches averaged.

The gain is the Wiener filter of a coefficient whose signal energy is the pilot's: it keeps the noisy
coefficient where the pilot says there is signal and removes it where there is none, so it undoes the
first stage's bias where the pilot is right about the basis and the energies. With ``tile`` the basis
is that of each tile's patches (a local basis, as the first stage's models are per tile). Pure numpy;
nothing here reads a clean image: the pilot is an estimate made from y.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kpca.images.patch_bands import PatchSum, band_moments, band_patches, band_ranges, map_ordered, tile_parts
from kpca.images.patches import patch_grid

SHRINKS = ("patch", "component")  # (W2): per patch and coefficient, or per principal component


def wiener_gains(pilot_coefficients: np.ndarray, eigenvalues: np.ndarray, noise: float, shrink: str) -> np.ndarray:
    """The gains w of (W2) for pilot coefficients c_p (m, n) and the pilot's eigenvalues (n,): shape
    (m, n) for ``shrink="patch"``, (n,) for ``"component"``. At ``noise == 0`` every gain is 1. O(m n)."""
    if shrink not in SHRINKS:
        raise ValueError(f"shrink: {shrink!r} is not one of {SHRINKS}")
    s2 = float(noise) ** 2
    energy = pilot_coefficients**2 if shrink == "patch" else np.maximum(eigenvalues, 0.0)
    if s2 == 0.0:
        return np.ones_like(energy)
    return energy / (energy + s2)


def _shrink_block(Py: np.ndarray, Pp: np.ndarray, noises: list[float], shrink: str) -> list[np.ndarray]:
    """(W1)-(W2) on one set of patches: the noisy patches Py (m, n) shrunk in the basis of the pilot's
    patches Pp (m, n), one answer per noise level of ``noises`` (basis and coefficients shared). O(m n^2)."""
    mean = Pp.mean(axis=0)
    centred = Pp - mean
    eigenvalues, U = np.linalg.eigh(centred.T @ centred / max(len(Pp), 1))
    c_p = centred @ U
    c_y = (Py - mean) @ U
    return [(c_y * wiener_gains(c_p, eigenvalues, noise, shrink)) @ U.T + mean for noise in noises]


def wiener_stage(noisy: np.ndarray, pilot: np.ndarray, patch: int, stride: int, noise: float,
                 shrink: str = "patch", tile: int | None = None,
                 report: Callable[[int, int], None] | None = None, dtype=np.float64) -> np.ndarray:
    """The noisy image's patches shrunk by the empirical Wiener gain of the pilot's (module note),
    overlaps averaged.

    Parameters
    ----------
    noisy : ndarray of shape (H, W)
        y, pixels on the noise's scale.
    pilot : ndarray of shape (H, W)
        p, a first-stage estimate of the clean image from y.
    patch, stride : int
        Patches as the first stage's (`kpca.images.patches.extract_patches`).
    noise : float
        s, the noise level of y (0: y is returned, every gain being 1).
    shrink : {"patch", "component"}
        (W2) per patch and coefficient, or per principal component.
    tile : int, optional
        One basis per tile of about ``tile`` x ``tile`` pixels (`kpca.images.patch_bands.tile_parts`);
        None: one basis for the whole image.
    report : callable, optional
        ``report(done, total)`` after each band of patches shrunk (one basis for the image).
    dtype : numpy dtype
        Of the shrinkage's products (`wiener_stages`).

    Returns the image, of y's shape. Cost O(N n^2) for N patches of n values; memory of a band of
    patches (`kpca.images.patch_bands`), not of all N.
    """
    return wiener_stages(noisy, pilot, patch, stride, [noise], shrink, tile, report, dtype)[0]


def wiener_stages(noisy: np.ndarray, pilot: np.ndarray, patch: int, stride: int, noises: list[float],
                  shrink: str = "patch", tile: int | None = None,
                  report: Callable[[int, int], None] | None = None, dtype=np.float64) -> list[np.ndarray]:
    """`wiener_stage` at each noise level of ``noises``, sharing the patches, the basis and the
    coefficients: one image per level. With one basis for the whole image (``tile`` None) the patches are
    read in bands (`kpca.images.patch_bands.band_ranges`) three times (mean, covariance, shrinkage;
    ``report(done, total)`` after each band of the shrinkage). ``dtype``: of the shrinkage's products (W1)-(W2)
    with one basis (the mean, covariance and basis stay float64, and the patches are averaged in float64):
    float32 halves their cost, and its rounding is below what the second stage needs
    (`kpca.images.second_stage.WIENER_DTYPE`). Cost O(N n^2) plus O(N n) per level."""
    y = np.asarray(noisy, dtype=np.float64)
    p = np.asarray(pilot, dtype=np.float64)
    if y.shape != p.shape or y.ndim != 2:
        raise ValueError(f"pilot: shape {p.shape} must be the noisy image's {y.shape}, (H, W)")
    noises = [float(noise) for noise in noises]
    grid = patch_grid(y.shape, patch, stride)
    sums = [PatchSum(grid) for _ in noises]
    if tile is None:
        bands = band_ranges(grid)  # each band on the caller's cores (`map_ordered`), added in order
        mean, gram = band_moments(p, grid, bands)
        eigenvalues, U = np.linalg.eigh(gram / grid.n_patches)
        basis = U.astype(dtype)

        def shrunk_band(k: int) -> list[np.ndarray]:
            c_p = (band_patches(p, grid, bands[k]) - mean).astype(dtype) @ basis
            c_y = (band_patches(y, grid, bands[k]) - mean).astype(dtype) @ basis
            return [(c_y * wiener_gains(c_p, eigenvalues, noise, shrink)) @ basis.T + mean for noise in noises]

        for k, outs in enumerate(map_ordered(shrunk_band, len(bands))):
            for total, out in zip(sums, outs):
                total.add(out, bands[k])
            if report is not None:
                report(k + 1, len(bands))
        return [total.image() for total in sums]
    row_parts, col_parts = tile_parts(grid, tile)
    for band in row_parts:
        outs = [np.empty((len(band), len(grid.cols), grid.n_features)) for _ in noises]
        for cols in col_parts:
            part = slice(cols.start, cols.stop)
            shrunk = _shrink_block(band_patches(y, grid, band, part), band_patches(p, grid, band, part), noises,
                                   shrink)
            for out, block in zip(outs, shrunk):
                out[:, part] = block.reshape(len(band), len(cols), -1)
        for total, out in zip(sums, outs):
            total.add(out.reshape(-1, grid.n_features), band)
    return [total.image() for total in sums]


__all__ = ["SHRINKS", "wiener_gains", "wiener_stage", "wiener_stages"]
