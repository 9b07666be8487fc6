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

import numpy as np

from kpca.images.denoising import tile_blocks
from kpca.images.patches import assemble_patches, extract_patches

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


def _shrink_block(Py: np.ndarray, Pp: np.ndarray, noise: float, shrink: str) -> np.ndarray:
    """(W1)-(W2) on one set of patches: the noisy patches Py (m, n) shrunk in the basis of the pilot's
    patches Pp (m, n). O(m n^2)."""
    mean = Pp.mean(axis=0)
    centred = Pp - mean
    eigenvalues, U = np.linalg.eigh(centred.T @ centred / max(len(Pp), 1))
    c_p = centred @ U
    c_y = (Py - mean) @ U
    return (c_y * wiener_gains(c_p, eigenvalues, noise, shrink)) @ U.T + mean


def wiener_stage(noisy: np.ndarray, pilot: np.ndarray, patch: int, stride: int, noise: float,
                 shrink: str = "patch", tile: int | None = None) -> np.ndarray:
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
        One basis per tile of about ``tile`` x ``tile`` pixels (`kpca.images.denoising.tile_blocks`);
        None: one basis for the whole image.

    Returns the image, of y's shape. Cost O(N n^2) for N patches of n values.
    """
    y = np.asarray(noisy, dtype=np.float64)
    p = np.asarray(pilot, dtype=np.float64)
    if y.shape != p.shape or y.ndim != 2:
        raise ValueError(f"pilot: shape {p.shape} must be the noisy image's {y.shape}, (H, W)")
    Py, grid = extract_patches(y, patch, stride)
    Pp, _ = extract_patches(p, patch, stride)
    out = np.empty_like(Py)
    for indices in tile_blocks(grid, tile):
        out[indices] = _shrink_block(Py[indices], Pp[indices], noise, shrink)
    return assemble_patches(out, grid)


__all__ = ["SHRINKS", "wiener_gains", "wiener_stage"]
