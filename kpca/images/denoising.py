"""Denoising an image through kernel PCA models of its own patches, one model per tile.

Seed 000 §5.2 (after Kim et al.) splits an image into four sub-images, fits one kernel PCA model to
the ``11 x 11`` patches of each, replaces every noisy patch by the pre-image of its projection and
averages the overlaps. `denoise_image` does the same with tiles of about ``tile`` pixels (four
quadrants are ``tile = H / 2``): smaller tiles give models of patches that are alike, as the search
window of non-local means does. Each tile's model is the exact kernel PCA (`kpca.fitting.prepare_fit`,
solver ``exact``) of at most ``max_rows`` of its patches (a fixed-seed sample), Gaussian kernel of
width

    sigma = width * s * sqrt(2 n)                                                    (D1)

with s the noise level and n the values of a patch: ``s sqrt(2 n)`` is the typical distance between
two noisy copies of the same clean patch, so ``width`` is free of the noise level and patch size.

Pre-images (`PATCH_METHODS`): ``fixed-point`` (Mika et al.'s iteration, started at the noisy patch
and stopped after ``n_iter`` steps, which regularises as early stopping does; one step is Mika et
al.'s weighted mean of the training patches, ``sum_i gamma_i k(x, x_i) x_i / sum_i gamma_i k(x, x_i)``),
``kwok-tsang`` (closed form), ``gradient`` (steepest descent on rho from the Kwok-Tsang start, seed 002 §4.2,
`kpca.preimage.gradient.batched_descent`) and ``learned`` (`kpca.preimage.LearnedInverse`, fitted
per tile). `denoise_candidates` serves a grid of ranks and methods from one fit per tile; the tuner
(`kpca.images.tuning`) picks among them.

``linear`` (`LINEAR`) is the limit of a wide kernel with one model for the whole image: linear PCA of
all the image's patches (`linear_pca_denoise`), no kernel width and no tiles. It is the baseline the
tuner must not fall below, so it is one of its candidates: on smooth images (a cell, the moon) one
model of every patch of the image beats a model per tile, whatever its kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from kpca._dense import unlocked_eigh
from kpca._threads import tile_threads
from kpca.fitting import FitRequest, prepare_fit
from kpca.images.patch_bands import PatchSum, band_moments, band_patches, band_ranges, map_ordered, tile_parts
from kpca.images.patches import patch_grid
from kpca.images.tile_preimages import TilePreimages, leading
from kpca.kernels import KernelSpec
from kpca.model import KernelModel
from kpca.preimage import LearnedInverse, fixed_point, kwok_tsang
from kpca.preimage._objective import kernel_moments
from kpca.preimage.gradient import batched_descent
from kpca.rows import KernelRows
from kpca.solvers import served_model

KERNEL_METHODS = ("fixed-point", "kwok-tsang", "gradient", "learned")  # pre-images of a tile's kernel model
LINEAR = "linear"  # linear PCA of all the image's patches (module note)
PATCH_METHODS = (*KERNEL_METHODS, LINEAR)
#: patches a tile's model is fitted on, at most (a fixed-seed sample of its patches; every patch is denoised): fewer
#: than 1200, the bound before, kept bench/denoise_quality.py's quality in less time (docs/denoising.md)
MAX_ROWS = 512


@dataclass(frozen=True)
class PatchSettings:
    """How `denoise_image` denoises: patches, tiles, kernel width, rank and pre-image.

    Attributes
    ----------
    patch, stride : int
        Side of the square patches and their grid step, in pixels.
    width : float or None
        ``sigma / (s sqrt(2 n))`` (D1); ``sigma`` is computed from it and the noise level. None for
        ``linear``, which has no kernel.
    n_components : int
        r, per tile's model.
    method : str
        One of `PATCH_METHODS`.
    options : dict
        The method's options: ``n_iter`` (fixed-point, gradient), ``n_neighbors`` (Kwok-Tsang start).
    tile : int or None
        Tile side in pixels (None: one model for the whole image).
    """

    patch: int = 7
    stride: int = 1
    width: float | None = 0.5
    n_components: int = 8
    method: str = "fixed-point"
    options: dict = field(default_factory=dict)
    tile: int | None = 32

    def sigma(self, noise: float) -> float | None:
        """The kernel width (D1) for noise level ``noise``; at least 1e-6 (a noiseless image); None for
        ``linear`` or no width."""
        if self.method == LINEAR or self.width is None:
            return None
        return max(float(self.width) * float(noise) * float(np.sqrt(2.0 * self.patch * self.patch)), 1e-6)

    def width_for(self, sigma: float, noise: float) -> float:
        """The width (D1) that gives kernel width ``sigma`` at noise level ``noise`` (> 0)."""
        return float(sigma) / (max(float(noise), 1e-12) * float(np.sqrt(2.0 * self.patch * self.patch)))

    def to_dict(self) -> dict:
        return {"patch": self.patch, "stride": self.stride, "width": self.width, "n_components": self.n_components,
                "method": self.method, "options": dict(self.options), "tile": self.tile}


def fit_patch_model(X: np.ndarray, sigma: float, n_components: int) -> KernelModel:
    """The exact kernel PCA model (Gaussian kernel of width ``sigma``) of the rows of X (l, n), through
    `kpca.fitting.prepare_fit`. ``n_components`` is capped at ``l - 1``. Cost O(l^2 n + l^3)."""
    rows = KernelRows(np.ascontiguousarray(X, dtype=np.float64), KernelSpec("gaussian", sigma=float(sigma)))
    r = int(min(n_components, X.shape[0] - 1))
    prepared = prepare_fit(rows, FitRequest("exact", r, exact_limit=max(X.shape[0], 1)))
    state, _ = prepared.run(rows)
    return served_model(state, rows)


def preimages(model: KernelModel, P: np.ndarray, method: str, options: dict | None = None,
              stop=None) -> np.ndarray:
    """Pre-images of the projections of the patches P (m, n) by one of `PATCH_METHODS` (module note).

    Every method is a deterministic function of P: no restarts, no random starts, no tolerance tests
    (a fixed number of steps), so that the tuner's finite differences (`kpca.images.tuning`) see a smooth map
    where the method is smooth. ``stop``: asked between the iterations of a fixed point of more than one
    step (`kpca.preimage.fixed_point`). Cost: the method's (one pass over the tile's rows per step).
    """
    options = dict(options or {})
    neighbours = int(options.get("n_neighbors", 10))
    if method == "fixed-point":
        n_iter = int(options.get("n_iter", 1))
        if n_iter == 1:
            return model.map_blocks(model.check_points(P), lambda B: _fixed_point_step(model, B), P.shape[1])
        return fixed_point(model, P, n_iter=n_iter, tol=0.0, restarts=1, n_neighbors=neighbours, init=P, stop=stop)
    if method == "kwok-tsang":
        return kwok_tsang(model, P, n_neighbors=neighbours)
    if method == "gradient":
        return batched_descent(model, P, n_iter=int(options.get("n_iter", 10)), n_neighbors=neighbours)
    if method == "learned":
        return LearnedInverse.fit(model, n_samples=MAX_ROWS, rng=np.random.default_rng(0))(P)
    raise ValueError(f"method: {method!r} is not a patch pre-image method; choose one of {KERNEL_METHODS}")


def _fixed_point_step(model: KernelModel, B: np.ndarray) -> np.ndarray:
    """One step of Mika et al.'s iteration from the points themselves, ``z = v / u`` at ``z = x``
    (`kpca.preimage._objective`: ``u = sum_i gamma_i f'_i``, ``v = sum_i gamma_i f'_i x_i``), for a
    block B (b, n); a point whose ``|u|`` vanishes (``<= 1e-12 sum_i |gamma_i f'_i|``) keeps x. One pass
    over the model's rows for the projection and one for the step."""
    target = model.target(B)
    _, u, v, scale = kernel_moments(model.rows, B, target.gamma)
    moving = np.abs(u) > 1e-12 * scale
    out = B.copy()
    out[moving] = v[moving] / u[moving, None]
    return out


def corner_span(corners: np.ndarray, part: range, fine: np.ndarray) -> range:
    """The indices of the ``fine`` corners (sorted) in the span of a tile's ``part`` of ``corners``: from its
    first corner up to the next part's first (the last corner included for the last part). With ``fine``
    equal to ``corners`` it is ``part``. O(log len(fine))."""
    low = corners[part.start]
    high = corners[part.stop] if part.stop < len(corners) else fine[-1] + 1
    return range(int(np.searchsorted(fine, low)), int(np.searchsorted(fine, high)))


def training_rows(indices: np.ndarray, max_rows: int, seed: int) -> np.ndarray:
    """At most ``max_rows`` of ``indices``, a fixed-seed sample (sorted), all of them if fewer."""
    if indices.size <= max_rows:
        return indices
    return np.sort(np.random.default_rng(seed).choice(indices, max_rows, replace=False))


@dataclass(frozen=True)
class Candidate:
    """One (rank, method, options) that `denoise_candidates` serves from a fit at one width."""

    n_components: int
    method: str
    options: dict = field(default_factory=dict)

    def key(self) -> tuple:
        return (self.n_components, self.method, tuple(sorted(self.options.items())))

    def to_dict(self) -> dict:
        return {"n_components": self.n_components, "method": self.method, "options": dict(self.options)}


def denoise_candidates(image: np.ndarray, settings: PatchSettings, noise: float, candidates: Iterable[Candidate],
                       max_rows: int = MAX_ROWS, report: Callable[[int, int], None] | None = None,
                       seed: int = 0, threads: int | None = None,
                       fit_stride: int | None = None) -> dict[tuple, np.ndarray]:
    """The image denoised by every candidate (rank, method) at ``settings``' patches, tiles and width,
    sharing one fit per tile (at the largest rank). Returns ``{candidate.key(): image}``.

    Parameters
    ----------
    image : ndarray of shape (H, W), floating (grey; pixels on the noise's scale)
    settings : PatchSettings
        Its patch, stride, width and tile are used; rank and method come from ``candidates``.
    noise : float
        The noise level s of (D1).
    candidates : iterable of Candidate
    max_rows : int
        Patches each tile's model is fitted on, at most.
    report : callable, optional
        ``report(done, total)`` after each tile.
    seed : int
        Chooses each tile's training sample (tile k uses ``seed + k``).
    threads : int, optional
        Tiles denoised at once (`kpca.images.patch_bands.map_ordered`; default the cores the caller may
        use). The result does not depend on it.
    fit_stride : int, optional
        Each tile's model is fitted on a sample of the tile's patches at this stride (default
        ``settings.stride``: of the patches it denoises). A coarser ``settings.stride`` with ``fit_stride``
        1 denoises a quarter of the patches (stride 2) through the models a stride-1 request fits: the
        tuner's probe (`kpca.images.tuning.TUNING_STRIDE`).

    Cost per tile of b patches and l = min(b, max_rows) training rows: the fit O(l^2 n + l^3), each
    candidate's pre-images O(b l n) per step.
    """
    candidates = list(candidates)
    image = np.asarray(image, dtype=np.float64)
    grid = patch_grid(image.shape, settings.patch, settings.stride)
    row_parts, col_parts = tile_parts(grid, settings.tile)
    sums = {c.key(): PatchSum(grid) for c in candidates}
    r_max = max(c.n_components for c in candidates)
    sigma = settings.sigma(noise)
    assert sigma is not None, "a kernel candidate's settings give a width (LINEAR has linear_pca_candidates)"
    per_band = len(col_parts)
    fitted = grid if fit_stride in (None, settings.stride) else patch_grid(image.shape, settings.patch, fit_stride)

    def tile(k: int) -> dict[tuple, np.ndarray]:
        """Tile k's candidates: one fit (at the largest rank) and the projections they share."""
        band, cols = row_parts[k // per_band], col_parts[k % per_band]
        patches = band_patches(image, grid, band, slice(cols.start, cols.stop))
        # the tiles share the cores: each one's kernel tiles run in its own thread, and its fit's eigenpairs by LAPACK
        # without Python's lock (ARPACK's loop holds it, and two tiles' fits would take turns)
        with tile_threads(1), unlocked_eigh():
            if fitted is grid:  # the model's rows are among the patches denoised
                training = training_rows(np.arange(len(patches)), max_rows, seed + k)
                model = fit_patch_model(patches[training], sigma, r_max)
                shared = TilePreimages(model, patches, training)
            else:  # the model's rows are the tile's patches on the fitting grid
                rows, span = corner_span(grid.rows, band, fitted.rows), corner_span(grid.cols, cols, fitted.cols)
                pool = band_patches(image, fitted, rows, slice(span.start, span.stop))
                model = fit_patch_model(pool[training_rows(np.arange(len(pool)), max_rows, seed + k)], sigma, r_max)
                shared = TilePreimages(model, patches, training_components=model.AK.T)
            return {c.key(): shared.preimages(c.n_components, c.method, c.options, n_samples=max_rows)
                    for c in candidates}

    count = len(row_parts) * per_band
    band_outputs: dict[tuple, np.ndarray] = {}
    for k, tile_outputs in enumerate(map_ordered(tile, count, threads)):  # a band of tiles, then its sum
        band, cols = row_parts[k // per_band], col_parts[k % per_band]
        for key, out in tile_outputs.items():
            if key not in band_outputs:
                band_outputs[key] = np.empty((len(band), len(grid.cols), grid.n_features))
            band_outputs[key][:, cols.start:cols.stop] = out.reshape(len(band), len(cols), -1)
        if k % per_band == per_band - 1:
            for key, out in band_outputs.items():
                sums[key].add(out.reshape(-1, grid.n_features), band)
            band_outputs = {}
        if report is not None:
            report(k + 1, count)
    return {key: total.image() for key, total in sums.items()}


def denoise_image(image: np.ndarray, settings: PatchSettings, noise: float, max_rows: int = MAX_ROWS,
                  report: Callable[[int, int], None] | None = None, fit_stride: int | None = None) -> np.ndarray:
    """The image denoised with ``settings`` (module note): shape and scale of ``image``, grey (H, W)
    or colour (H, W, C), each channel on its own; ``fit_stride``: of the patches the tiles' models are
    fitted on (`denoise_candidates`). Cost: `denoise_candidates` with one candidate."""
    image = np.asarray(image, dtype=np.float64)
    if image.ndim == 3:
        return np.stack([denoise_image(image[:, :, c], settings, noise, max_rows, report, fit_stride)
                         for c in range(image.shape[2])], axis=-1)
    if settings.method == LINEAR:
        return linear_pca_denoise(image, settings.patch, settings.stride, settings.n_components, report)
    one = Candidate(settings.n_components, settings.method, dict(settings.options))
    return denoise_candidates(image, settings, noise, [one], max_rows, report, fit_stride=fit_stride)[one.key()]


def linear_pca_denoise(image: np.ndarray, patch: int, stride: int, n_components: int,
                       report: Callable[[int, int], None] | None = None) -> np.ndarray:
    """Linear PCA of the patches of ``image`` (H, W): each patch replaced by its projection onto the
    leading ``n_components`` principal directions plus the mean, overlaps averaged: the method
    ``linear`` and the tuner's baseline. Cost O(m n^2) for m patches of n values."""
    return linear_pca_candidates(image, patch, stride, [n_components], report)[int(n_components)]


def linear_pca_candidates(image: np.ndarray, patch: int, stride: int, ranks: Iterable[int],
                          report: Callable[[int, int], None] | None = None) -> dict[int, np.ndarray]:
    """`linear_pca_denoise` at every rank of ``ranks`` from one eigendecomposition of the patches'
    covariance (n x n, not an SVD of the m x n patches): ``{rank: image}``. The patches are read in bands
    (`kpca.images.patch_bands`) three times: mean, covariance, projections (``report(done, total)`` after
    each band of the projections). Cost O(m n^2) once, then O(m n r) per rank; memory of a band of patches and an
    image per rank."""
    image = np.asarray(image, dtype=np.float64)
    grid = patch_grid(image.shape, patch, stride)
    bands = band_ranges(grid)
    mean, gram = band_moments(image, grid, bands)
    _, vectors = np.linalg.eigh(gram)
    directions = vectors[:, ::-1].T  # principal directions, leading first
    sums = {int(rank): PatchSum(grid) for rank in ranks}

    def projected(k: int) -> dict[int, np.ndarray]:
        centred = band_patches(image, grid, bands[k]) - mean
        return {rank: centred @ directions[:rank].T @ directions[:rank] + mean for rank in sums}

    for k, outs in enumerate(map_ordered(projected, len(bands))):
        for rank, total in sums.items():
            total.add(outs[rank], bands[k])
        if report is not None:
            report(k + 1, len(bands))
    return {rank: total.image() for rank, total in sums.items()}


__all__ = ["PATCH_METHODS", "KERNEL_METHODS", "LINEAR", "PatchSettings", "Candidate", "fit_patch_model", "leading",
           "preimages", "denoise_candidates", "denoise_image", "linear_pca_denoise",
           "linear_pca_candidates"]
