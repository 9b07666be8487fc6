"""Choosing a denoiser's parameters from the noisy input alone: an unbiased estimate of its error.

Let y = x + e be the noisy input (N values), e white Gaussian of standard deviation s, and f a
denoiser. Draw z, white Gaussian of the same s, and a factor alpha, and form the two recorrupted
images ``y1 = y + alpha z`` and ``y2 = y - z / alpha``. Their noises ``e + alpha z`` and
``e - z / alpha`` are jointly Gaussian with covariance ``s^2 - s^2 = 0``, hence independent, so

    R(f) = ||f(y1) - y2||^2 / N - s^2 (1 + 1 / alpha^2)                              (T1)

has expectation ``E ||f(y1) - x||^2 / N``: the mean squared error of f on an image whose noise has
standard deviation ``s1 = s sqrt(1 + alpha^2)`` (Pang et al., "Recorrupted-to-Recorrupted", CVPR
2021). It needs no clean image and, unlike Stein's unbiased risk estimate, no derivative of f: it
holds for the discontinuous maps that the Kwok-Tsang pre-image (a choice of nearest neighbours) and
a monotone descent (accepted and refused steps) are. The denoiser is the whole path, the fit of
each tile's model to the noisy patches included, so the estimate does not favour models that fit
the noise. Kernel widths are relative to the noise (D1 of `kpca.images.denoising`), so a width tuned
at s1 is used at s. All candidates share the same draws z (common random numbers): their estimates
differ by ``2 <f_a(y1) - f_b(y1), e - z / alpha> / N`` of noise, small where they differ little.
(T1) is averaged over draws of z (`recorruptions`): each draw is unbiased, and the part of the
estimate's noise that comes from z falls as one over the root of the draws. `tune_patches` makes
`DRAWS` draws: every candidate is estimated on the first (screening); the `PATCH_SHORTLIST` kernel candidates
of least risk there are estimated again on the others, and the choice is among them and ``linear`` by
their risks averaged over all the draws. (Reading the other draws only, independent of the screening,
left too few: brick 128 at noise 0.1 kept linear PCA where the kernel is 2 dB better.)

The candidates are estimated as a coarser probe of themselves (`probe_settings`): each denoises the patches at
stride `TUNING_STRIDE` (2: a quarter of the pre-images of stride 1, and still every pixel in about a dozen
patches of 7 x 7) through tile models fitted, as the request's are, on a sample of the tile's patches at the
request's stride. The probe ranks the candidates as the request's stride would at a third of the cost: a
model fitted on the probe's own patches (half the rows) ranked small kernel widths too low
(docs/denoising.md). The chosen candidate then runs at the request's stride.

s is the estimate of `kpca.images.noise_level` (nothing else about the input is known). On an image larger
than `TUNING_PIXELS` the kernel candidates' risk is estimated on windows of it (`tuning_windows`),
each a multiple of the tile size; z is drawn for the whole image, so that ``linear`` (linear PCA of all
the image's patches, no tiles) is run on the whole of y1, as it will be on y. Its rank is chosen by its
risk over the whole image (`linear_rank`, the rule of bench/denoise_quality.py's linear baseline: a
rank chosen on the windows alone was 0.63 dB worse on gravel 256 at noise 0.05), and that rank's risk
is read on the windows, with the same draws, to compare it with the tiled kernel candidates'.

Choosing (`choose`): the least estimated risk, except that ``linear`` is kept unless a kernel
candidate's risk is lower by more than `MARGIN` standard errors of the difference (as the
one-standard-error rule of cross-validation keeps the simpler model; with one draw z differences of
about one standard error were reversed by the truth, brick at noise 0.2 in bench/denoise_quality.py).
The standard error is that of the mean over blocks of 16 x 16 pixels of the difference of the two
candidates' losses averaged over the draws (neighbouring pixels' losses are correlated, single pixels
would understate it). So the tuned answer is not worse than linear PCA of the same patches by
more than the estimate's own noise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from kpca.images.denoising import LINEAR, Candidate, PatchSettings, denoise_candidates, linear_pca_candidates
from kpca.images.noise_level import noise_level

ALPHA = 0.5  # (T1)'s alpha
DRAWS = 2  # draws of z whose estimates (T1) are averaged (docs/denoising.md: three kept the same answers)
SHORTLIST = 3  # a stored model's candidates of least risk on the first draw, estimated again on the others
PATCH_SHORTLIST = 2  # `tune_patches`' kernel candidates of least risk on the first draw, estimated again
TUNING_PIXELS = 128 * 128  # pixels the kernel candidates' risk is estimated on, at most
#: the stride of the patches the candidates denoise while their risk is estimated (at least the request's; a
#: quarter of the pre-images of stride 1), through tile models fitted on the request's patches (`probe_settings`)
TUNING_STRIDE = 2
BLOCK = 16  # side of the blocks of pixels whose mean losses give the standard error of `choose`
MARGIN = 2.0  # standard errors by which a kernel candidate must beat linear PCA to be chosen
#: method -> (kernel widths (D1), ranks, options) tried: where each method has done well on natural images;
#: the fixed point at wide kernels is close to linear PCA of the tile (one step of a wide Gaussian's
#: iteration is the projection plus the mean), which smooth images want
GRID = {
    "fixed-point": ((0.5, 0.75, 1.6, 4.0), (1, 2, 4, 8), {"n_iter": 1}),
    "kwok-tsang": ((0.75, 1.6), (8, 16), {"n_neighbors": 10}),
    "gradient": ((1.6,), (8,), {"n_iter": 5, "n_neighbors": 10}),
    "learned": ((1.6,), (4, 8), {}),
    LINEAR: ((None,), (1, 2, 4, 6, 8, 12, 16, 24, 32), {}),  # no kernel width: the wide-kernel limit, untiled
}
#: what is tried when no method is asked for: `GRID` less what bench/denoise_quality.py's cases never chose or
#: gained little by (docs/denoising.md): the gradient descent (Kwok-Tsang's start, which it refines, is kept), the
#: fixed point at the wide kernels, where ``linear`` wins, Kwok-Tsang at rank 16, the learned map at rank 4 and
#: the width 0.75 (the fixed point and Kwok-Tsang there); two kernel widths to fit per tile and draw, every tile's
#: model of rank 8
SWEEP = {
    "fixed-point": ((0.5,), *GRID["fixed-point"][1:]),
    "kwok-tsang": ((1.6,), (8,), GRID["kwok-tsang"][2]),
    "learned": (GRID["learned"][0], (8,), GRID["learned"][2]),
    LINEAR: GRID[LINEAR],
}


def probe_settings(base: PatchSettings) -> PatchSettings:
    """``base`` at the stride its candidates are estimated at: `TUNING_STRIDE` or the request's, if coarser (at
    most the patch side). O(1)."""
    return replace(base, stride=min(max(base.stride, TUNING_STRIDE), base.patch))


def recorruptions(noisy: np.ndarray, noise: float, seed: int = 0, draws: int = 1, alpha: float = ALPHA):
    """The ``draws`` pairs ``(y1, y2)`` of (T1) for the noisy image: z drawn in turn from one generator of
    ``seed`` (the first draw is the same whatever ``draws`` is). A generator; O(draws N)."""
    y = np.asarray(noisy, dtype=np.float64)
    rng = np.random.default_rng(seed)
    for _ in range(int(draws)):
        z = rng.normal(0.0, float(noise), y.shape)
        yield y + alpha * z, y - z / alpha


def recorrupted_levels(noise: float, alpha: float = ALPHA) -> tuple[float, float]:
    """``(s1, offset)`` of (T1) for noise level s: y1's noise level ``s sqrt(1 + alpha^2)`` and the
    ``s^2 (1 + 1/alpha^2)`` taken from each squared error against y2. O(1)."""
    return float(noise) * float(np.sqrt(1.0 + alpha * alpha)), float(noise) ** 2 * (1.0 + 1.0 / alpha**2)


def recorrupted_risks(evaluate: Callable[[np.ndarray, float], Mapping], noisy: np.ndarray, noise: float,
                      seed: int = 0, alpha: float = ALPHA, draws: int = 1, first: int = 0) -> tuple[dict, int]:
    """(T1) for every output of ``evaluate``, averaged over draws ``first .. draws - 1`` of z (all ``draws``
    by default): ``({key: risk}, N)``.

    Parameters
    ----------
    evaluate : callable
        ``evaluate(y1, s1) -> {key: f_key(y1)}``, each output of y1's shape; ``s1`` is the noise
        level of y1, ``s sqrt(1 + alpha^2)``. Called once per draw.
    noisy : ndarray
    noise : float
        s of (T1).
    seed : int
        Of the draws z (`recorruptions`).
    alpha : float
    draws : int
        Draws of z averaged: each is unbiased, their mean has a smaller variance.
    first : int
        Draws before it are skipped (drawn, not evaluated): a second look at the same sequence of draws.

    Returns the risk estimates (mean squared error per value, on the scale of y) and N.
    """
    y = np.asarray(noisy, dtype=np.float64)
    s1, offset = recorrupted_levels(noise, alpha)
    sums: dict = {}
    for k, (y1, target) in enumerate(recorruptions(y, noise, seed, draws, alpha)):
        if k < first:
            continue
        for key, out in evaluate(y1, s1).items():
            sums[key] = sums.get(key, 0.0) + float(np.mean((out - target) ** 2)) - offset
    return {key: total / (int(draws) - int(first)) for key, total in sums.items()}, y.size


def linear_rank(noisy: np.ndarray, patch: int, stride: int, noise: float, ranks=None, seed: int = 0,
                draws: int | None = None) -> int:
    """The rank of ``linear`` (linear PCA of all the patches, `linear_pca_denoise`) with the least risk
    (T1) over the whole image, averaged over `DRAWS` draws: the rule `tune_patches` chooses linear PCA's
    rank by, and bench/denoise_quality.py's linear baseline. ``ranks``: `GRID`'s, capped at a patch's
    values. Cost: per draw one SVD of the patches and one projection per rank."""
    ranks = [r for r in (ranks or GRID[LINEAR][1]) if r <= patch * patch] or [1]
    risks, _ = recorrupted_risks(lambda y1, _s1: linear_pca_candidates(y1, patch, stride, ranks), noisy, noise,
                                 seed=seed, draws=DRAWS if draws is None else draws)
    return int(min(ranks, key=lambda r: risks[r]))


def tuning_windows(shape: tuple, tile: int | None, pixels: int = TUNING_PIXELS) -> list[tuple[slice, slice]]:
    """Windows of an image of ``shape`` on which the risk is estimated: the whole image when it has at
    most ``pixels`` pixels, else squares of side ``2 tile`` (128 without tiles) spread evenly over it,
    as many as fit in ``pixels``: each centred in its cell of an even grid over the image (a stratified
    sample of it; before issue 55's probe they touched the image's edges and corners, which over-sampled its
    border). Deterministic. O(windows)."""
    H, W = shape[:2]
    if H * W <= pixels:
        return [(slice(0, H), slice(0, W))]
    side = min(2 * tile if tile else 128, H, W)
    count = max(1, pixels // (side * side))
    per_axis = max(1, int(np.ceil(np.sqrt(count))))
    tops = ((np.arange(per_axis) + 0.5) * H / per_axis - side / 2).clip(0, H - side).round().astype(int)
    lefts = ((np.arange(per_axis) + 0.5) * W / per_axis - side / 2).clip(0, W - side).round().astype(int)
    spots = [(t, left) for t in tops for left in lefts]
    picks = np.linspace(0, len(spots) - 1, min(count, len(spots))).round().astype(int)
    return [(slice(spots[i][0], spots[i][0] + side), slice(spots[i][1], spots[i][1] + side)) for i in picks]


@dataclass
class Tuned:
    """What `tune_patches` chose and why.

    Attributes
    ----------
    settings : PatchSettings
        The candidate chosen by `choose` (explicit values kept).
    noise : float
        The noise level used (estimated or given).
    noise_estimated : bool
    risks : list of dict
        Every candidate tried, least estimated risk first: width (None for ``linear``), n_components,
        method, options, ``risk`` (estimated mean squared error, (T1)) and ``psnr_db``, the PSNR it
        implies for pixels in [0, 1]. With one draw z the estimates share an error of order
        ``s^2 (1 + 1 / alpha^2) sqrt(2 / N)``, larger than the risk itself on a smooth image: their
        differences, not their values, are what the choice reads.
    pixels : int
        Pixels the risks were estimated on.
    chosen : dict or None
        The row of ``risks`` chosen, with ``standard_error`` (of its difference to the best ``linear``
        row; None when there is no such pair) and ``rule``: ``"least risk"`` or ``"linear within the
        margin"`` (`MARGIN` standard errors).
    second_stage : dict or None
        Set by `kpca.images.second_stage.choose_second_stage`: ``stage`` (a Wiener variant or None) and the risks.
    first_outputs : list or None
        The chosen candidate's outputs on the tuning windows, per draw of z (``[draw][window]``), as the tuning
        computed them (`tune_patches`; None where a draw was not computed): the second stage's estimate reads
        them instead of running the first stage again.
    seed : int
        Of the draws z (`recorruptions`) the risks were estimated with.
    stride : int or None
        Of the patches the candidates denoised while their risks were estimated (`probe_settings`; None: the
        settings'), the stride of ``first_outputs`` too.
    """

    settings: PatchSettings | Candidate  # a Candidate from `tune_model` (a stored model's rank and pre-image)
    noise: float
    noise_estimated: bool
    risks: list = field(default_factory=list)
    pixels: int = 0
    chosen: dict | None = None
    second_stage: dict | None = None
    first_outputs: list | None = field(default=None, repr=False)
    seed: int = 0  # of the draws z the risks were estimated with
    stride: int | None = None  # of the patches the risks were estimated with (`probe_settings`)

    def summary(self) -> dict:
        """What was chosen, the noise level and the chosen row's estimate, as one flat dict. O(candidates)."""
        row = self.chosen or (min(self.risks, key=lambda r: r["risk"]) if self.risks else None)
        return {"noise": self.noise, "noise_estimated": self.noise_estimated, **self.settings.to_dict(),
                "estimated_psnr_db": None if row is None else row["psnr_db"], "candidates": len(self.risks),
                "tuning_pixels": self.pixels, "rule": None if row is None else row.get("rule"),
                "second_stage": (self.second_stage or {}).get("stage")}


def psnr_of(risk: float) -> float:
    """The PSNR (dB) of pixels in [0, 1] whose mean squared error is ``risk`` (inf at 0). O(1)."""
    return float(10.0 * np.log10(1.0 / risk)) if risk > 0 else float("inf")


def candidate_grid(fixed: Mapping) -> dict[float | None, list[Candidate]]:
    """The candidates by kernel width (None: ``linear``): of `SWEEP`, or of `GRID` for a method asked for
    by name, keeping only those that agree with the explicit values in ``fixed`` (``width``,
    ``n_components``, ``method``, ``options``): an explicit value always wins; an explicit width leaves
    ``linear`` out. ValueError naming the field if nothing is left (a method the grid does not know, a
    width for ``linear``)."""
    grid = GRID if fixed.get("method") else SWEEP
    methods = [fixed["method"]] if fixed.get("method") else list(SWEEP)
    by_width: dict[float | None, list[Candidate]] = {}
    for method in methods:
        if method not in grid:
            raise ValueError(f"method: {method!r} cannot be tuned; choose one of {tuple(GRID)}")
        widths, grid_ranks, options = grid[method]
        ranks = [int(fixed["n_components"])] if fixed.get("n_components") else list(grid_ranks)
        if fixed.get("width") is not None:
            if method == LINEAR and fixed.get("method") == LINEAR:
                raise ValueError("sigma: method 'linear' has no kernel width; leave sigma out")
            if method == LINEAR:
                continue
            widths = (float(fixed["width"]),)
        options = {**options, **dict(fixed.get("options") or {})}
        for width in widths:
            key = None if width is None else float(width)
            by_width.setdefault(key, []).extend(Candidate(r, method, options) for r in ranks)
    return by_width


def block_means(loss: np.ndarray, block: int = BLOCK) -> np.ndarray:
    """Means of ``loss`` (h, w) over blocks of ``block`` x ``block`` (edges left out; the whole array as
    one block when smaller). O(h w)."""
    h, w = (loss.shape[0] // block) * block, (loss.shape[1] // block) * block
    if h == 0 or w == 0:
        return np.array([float(np.mean(loss))])
    return loss[:h, :w].reshape(h // block, block, w // block, block).mean(axis=(1, 3)).ravel()


def choose(table: list[dict], losses: Mapping[tuple, list[np.ndarray]], margin: float = MARGIN,
           draws: int = 1) -> dict:
    """The row of ``table`` chosen (module note): the least risk, unless the best ``linear`` row's risk
    is within ``margin`` standard errors of it. The best ``linear`` row is the one of least
    ``whole_image_risk`` where the rows have one (`linear_rank`'s rule), else of least ``risk``.
    ``losses[key]`` are each row's per-pixel losses (averaged over ``draws`` draws of z), one array per
    window, keyed by ``(width, n_components, method, options)``. Returns a copy of the row with
    ``standard_error``, ``rule`` and ``draws``. O(pixels)."""
    def key(row):
        return (row["width"], row["n_components"], row["method"], tuple(sorted(row["options"].items())))

    best = min(table, key=lambda row: row["risk"])
    linear = [row for row in table if row["method"] == LINEAR]
    if not linear:
        return {**best, "standard_error": None, "rule": "least risk", "draws": draws}
    lin = min(linear, key=lambda row: row.get("whole_image_risk", row["risk"]))
    kernel = [row for row in table if row["method"] != LINEAR]
    if not kernel:
        return {**lin, "standard_error": None, "rule": "least risk", "draws": draws}
    best = min(kernel, key=lambda row: row["risk"])
    blocks = np.concatenate([block_means(a - b) for a, b in zip(losses[key(lin)], losses[key(best)])])
    error = float(np.std(blocks, ddof=1) / np.sqrt(blocks.size)) if blocks.size > 1 else 0.0
    if lin["risk"] <= best["risk"]:
        return {**lin, "standard_error": error, "rule": "least risk", "draws": draws}
    if lin["risk"] - best["risk"] <= margin * error:
        return {**lin, "standard_error": error, "rule": "linear within the margin", "draws": draws}
    return {**best, "standard_error": error, "rule": "least risk", "draws": draws}


def tune_patches(noisy: np.ndarray, base: PatchSettings, fixed: Mapping | None = None, noise: float | None = None,
                 report: Callable[[int, int], None] | None = None, seed: int = 0, draws: int = DRAWS) -> Tuned:
    """Kernel width, rank and pre-image method for `kpca.images.denoising.denoise_image` (or ``linear``)
    chosen by `choose` from the estimated risks (T1) of `candidate_grid`, reading nothing but the noisy
    image.

    Parameters
    ----------
    noisy : ndarray of shape (H, W) (grey; a colour image is tuned on its mean over channels)
    base : PatchSettings
        Patch, stride and tile to tune for.
    fixed : mapping, optional
        Explicit ``width``, ``n_components``, ``method``, ``options``: kept as given.
    noise : float, optional
        The noise level; estimated from ``noisy`` when None (`kpca.images.noise_level.noise_level`).
    report : callable, optional
        ``report(done, total)`` after each window of each kernel width and draw, and after each draw of
        ``linear``.
    seed : int
        Of the draws z of (T1) (`recorruptions`) and the tiles' samples.
    draws : int
        Draws of z whose estimates are averaged (`DRAWS`).

    Returns
    -------
    Tuned. Cost: per draw and kernel width of the grid one run of `denoise_candidates` on the tuning
    windows, at the probe's stride (`probe_settings`); ``linear``: per draw one eigendecomposition of the
    image's patches' covariance and one projection per rank, at the probe's stride.
    """
    image = np.asarray(noisy, dtype=np.float64)
    if image.ndim == 3:
        image = image.mean(axis=2)
    fixed = dict(fixed or {})
    estimated = noise is None
    noise = noise_level(image) if noise is None else float(noise)
    grid = candidate_grid(fixed)
    if None in grid and not fixed.get("n_components"):  # linear ranks past a patch's values repeat the last
        grid[None] = [c for c in grid[None] if c.n_components <= base.patch**2] or grid[None][:1]
    windows = tuning_windows(image.shape, base.tile)
    kernel_widths = [w for w in grid if w is not None]
    confirming = min(PATCH_SHORTLIST, len(kernel_widths)) * (draws - 1)  # at most: the shortlist's widths, later draws
    total = (len(kernel_widths) + confirming) * len(windows) + (draws if None in grid else 0)
    done = [0]

    def tick():
        done[0] += 1
        if report is not None:
            report(done[0], total)

    def step(_done, _total):
        if _done == _total:
            tick()

    probe = probe_settings(base)
    pairs = list(recorruptions(image, noise, seed, draws))
    s1, offset = recorrupted_levels(noise)
    pixels = sum((r.stop - r.start) * (c.stop - c.start) for r, c in windows)

    # candidate key -> draw -> its outputs on the windows, for the second stage's estimate (`Tuned.first_outputs`)
    kept: dict[tuple, dict[int, list]] = {}

    def keep(key, draw: int, window: int, value) -> None:
        kept.setdefault(key, {}).setdefault(draw, [None] * len(windows))[window] = value

    def kernel_losses(by_width, draw_pairs, first_draw: int) -> dict[tuple, list[np.ndarray]]:
        """Per candidate, per window, the per-pixel loss (T1) averaged over ``draw_pairs`` (draws
        ``first_draw ..``); every output kept (`keep`)."""
        out: dict[tuple, list[np.ndarray]] = {}
        for width, candidates in by_width.items():
            settings = replace(probe, width=width)
            for w, (rows, cols) in enumerate(windows):
                sums: dict[tuple, np.ndarray] = {}
                for d, (y1, target) in enumerate(draw_pairs):
                    outputs = denoise_candidates(y1[rows, cols], settings, s1, candidates, report=step, seed=seed,
                                                 fit_stride=base.stride)
                    for key, value in outputs.items():
                        keep((width, *key), first_draw + d, w, value)
                        sums[key] = sums.get(key, 0.0) + ((value - target[rows, cols]) ** 2 - offset) / len(draw_pairs)
                for key, mean_loss in sums.items():
                    out.setdefault((width, *key), []).append(mean_loss)
        return out

    def row_of(key, parts, used, **extra) -> dict:
        risk = float(sum(np.sum(a) for a in parts)) / pixels
        return {"width": key[0], "n_components": key[1], "method": key[2], "options": dict(key[3]), "risk": risk,
                "psnr_db": psnr_of(risk), "draws": used, **extra}

    # linear: the whole image's per-pixel loss summed over the draws, and each draw's mean loss
    linear_sums: dict[tuple, np.ndarray] = {}
    linear_means: dict[tuple, list[float]] = {}
    if None in grid:  # linear: one model of all of y1's patches, its rank chosen on the whole image
        ranks = [c.n_components for c in grid[None]]
        for d, (y1, target) in enumerate(pairs):
            outs = linear_pca_candidates(y1, base.patch, probe.stride, ranks)
            for c in grid[None]:
                loss = (outs[c.n_components] - target) ** 2 - offset
                linear_sums[(None, *c.key())] = linear_sums[(None, *c.key())] + loss if d else loss
                linear_means.setdefault((None, *c.key()), []).append(float(np.mean(loss)))
                for w, (rows, cols) in enumerate(windows):
                    keep((None, *c.key()), d, w, outs[c.n_components][rows, cols])
            del outs
            tick()  # a draw of linear PCA of the whole image

    def linear_losses() -> dict[tuple, list[np.ndarray]]:
        return {key: [(total / len(pairs))[rows, cols] for rows, cols in windows]
                for key, total in linear_sums.items()}

    screened = kernel_losses({w: grid[w] for w in kernel_widths}, pairs[:1], 0)  # every candidate, the first draw
    shortlist = sorted(screened, key=lambda key: sum(np.sum(a) for a in screened[key]))[:PATCH_SHORTLIST]
    confirmed = {}
    if len(pairs) > 1 and shortlist:  # the shortlist again, on the other draws
        by_width: dict[float, list[Candidate]] = {}
        for width, r, method, options in shortlist:
            by_width.setdefault(width, []).append(Candidate(r, method, dict(options)))
        confirmed = kernel_losses(by_width, pairs[1:], 1)
    table, final, averaged = [], [], linear_losses()
    for key, means in linear_means.items():
        whole_risk = float(np.mean(means))
        table.append(row_of(key, averaged[key], len(pairs), whole_image_risk=whole_risk))
        final.append(table[-1])
    for key, parts in screened.items():
        if key in confirmed:
            averaged[key] = [(a + (len(pairs) - 1) * b) / len(pairs) for a, b in zip(parts, confirmed[key])]
            table.append(row_of(key, averaged[key], len(pairs), confirmed_risk=row_of(key, confirmed[key], 0)["risk"]))
            final.append(table[-1])
        else:
            averaged[key] = parts
            table.append(row_of(key, parts, 1))
    row = choose(final if confirmed else table, averaged, draws=len(pairs))
    while done[0] < total:
        tick()
    chosen = replace(base, width=row["width"], n_components=row["n_components"], method=row["method"],
                     options=row["options"])
    by_draw = kept.get((row["width"], row["n_components"], row["method"], tuple(sorted(row["options"].items()))), {})
    first_outputs = [by_draw.get(d) for d in range(len(pairs))]
    return Tuned(chosen, noise, estimated, sorted(table, key=lambda r: r["risk"]), pixels, row,
                 first_outputs=first_outputs, seed=seed, stride=probe.stride)
