"""Tuning a stored model's rank and pre-image on the noisy input alone (`tune_model`): the estimate (T1) of
`kpca.images.tuning` over `model_candidates`, the model's kernel width being its own.

A stored model's /denoise and /denoise-image (`workers.image_jobs`) call it; `kpca.images.tuning.tune_patches`
tunes the one-call path's own models, kernel width included.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from kpca.images.denoising import Candidate, leading
from kpca.images.tuning import DRAWS, SHORTLIST, Tuned, psnr_of, recorrupted_risks


def model_candidates(model, fixed: Mapping | None = None) -> list[Candidate]:
    """Candidates for a stored model, whose kernel width is its own: ranks ``r / 4``, ``r / 2`` and
    r (its r components) for the fixed point after one step, Kwok-Tsang and the learned map, and at
    rank r the fixed point after 5 steps and the gradient pre-image (each where the kernel allows it),
    less what ``fixed`` (``n_components``, ``method``, ``options``) settles. ValueError naming the
    field for a value the model cannot take."""
    from kpca.preimage.fixed_point import FIXED_POINT_KERNELS
    from kpca.preimage.kwok_tsang import KWOK_TSANG_KERNELS

    fixed = dict(fixed or {})
    r = model.n_components
    if fixed.get("n_components"):
        if int(fixed["n_components"]) > r:
            raise ValueError(f"n_components: the model has {r} components; ask for at most {r}")
        ranks = [int(fixed["n_components"])]
    else:
        ranks = sorted({max(1, r // 4), max(1, r // 2), r})
    kernel = model.kernel.type
    options: dict[str, list[dict]] = {"fixed-point": [{"n_iter": 1}, {"n_iter": 5}], "kwok-tsang": [{}],
                                      "gradient": [{"n_iter": 5}], "learned": [{}]}
    full_rank_only = ({"n_iter": 5}, "gradient")  # the costlier pre-images, tried at rank r only
    allowed = [m for m in options if not (m == "fixed-point" and kernel not in FIXED_POINT_KERNELS)
               and not (m in ("kwok-tsang", "gradient") and kernel not in KWOK_TSANG_KERNELS)]
    if fixed.get("method"):
        if fixed["method"] not in allowed:
            raise ValueError(f"method: {fixed['method']!r} cannot be tuned for a {kernel} model; choose one of "
                             f"{tuple(allowed)}")
        allowed = [fixed["method"]]
    given = dict(fixed.get("options") or {})
    top = max(ranks)
    return [Candidate(rank, method, {**option, **given}) for method in allowed for option in options[method]
            for rank in ranks
            if rank == top or len(ranks) == 1 or not (option in full_rank_only or method in full_rank_only)]


def tune_model(model, inputs, apply: Callable, fixed: Mapping | None = None, noise: float | None = None,
               noise_of: Callable[[np.ndarray], float] | None = None,
               report: Callable[[int, int], None] | None = None, seed: int = 0, draws: int = DRAWS) -> Tuned:
    """Rank and pre-image of a stored model (its kernel width fixed) by the least estimated risk (T1)
    over `model_candidates`, reading nothing but the noisy input: every candidate estimated on the
    first draw of z, the `SHORTLIST` of least risk there on the other ``draws - 1`` as well, and the
    choice the shortlisted candidate of least risk averaged over all the draws (as `tune_patches`).

    Parameters
    ----------
    model : kpca.model.KernelModel
    inputs : list of ndarray
        The noisy input, or windows of it (`tuning_windows`): images or arrays of rows.
    apply : callable
        ``apply(model, method, options, y) -> f(y)``: one input denoised through a model (for an
        image, its patches' pre-images averaged back; for rows, the pre-images).
    fixed : mapping, optional
        Explicit ``n_components``, ``method``, ``options``: kept as given.
    noise : float, optional
        The noise level; else ``noise_of(inputs[0])``.
    report : callable, optional
        ``report(done, total)`` after each candidate.
    seed : int
        Of the draws z of (T1) (input w draws from ``seed + w``).
    draws : int
        Draws of z whose estimates the shortlist's choice averages (`DRAWS`).

    Returns
    -------
    Tuned whose ``settings`` is the chosen `Candidate`; each row of ``risks`` says over how many
    ``draws`` it was averaged. Cost: every candidate's pre-images of the inputs once, and the
    shortlist's ``draws - 1`` times more.
    """
    estimated = noise is None
    if noise is None:
        if noise_of is None:
            raise TypeError("tune_model needs noise or noise_of")
        noise = float(noise_of(inputs[0]))
    else:
        noise = float(noise)
    candidates = model_candidates(model, fixed)
    draws = max(1, int(draws))
    shortlisted = min(SHORTLIST, len(candidates)) if draws > 1 else 0
    total = (len(candidates) + shortlisted * (draws - 1)) * len(inputs)
    done = [0]

    def evaluate_all(chosen):
        def evaluate(y1, _s1):
            outputs = {}
            for c in chosen:
                outputs[c.key()] = apply(leading(model, c.n_components), c.method, c.options, y1)
                done[0] += 1
                if report is not None:
                    report(done[0], total)
            return outputs
        return evaluate

    def risks_of(chosen, first: int, count: int) -> tuple[dict, int]:
        """Per candidate, its risk (T1) over the inputs averaged over draws ``first .. first + count - 1``."""
        sums: dict[tuple, float] = {}
        pixels = 0
        for w, y in enumerate(inputs):
            risks, size = recorrupted_risks(evaluate_all(chosen), y, noise, seed=seed + w, draws=first + count,
                                            first=first)
            pixels += size
            for key, risk in risks.items():
                sums[key] = sums.get(key, 0.0) + risk * size
        return {key: value / pixels for key, value in sums.items()}, pixels

    screened, pixels = risks_of(candidates, 0, 1)
    by_key = {c.key(): c for c in candidates}
    used = dict.fromkeys(screened, 1)
    if shortlisted:
        shortlist = sorted(screened, key=lambda key: screened[key])[:shortlisted]
        confirmed, _ = risks_of([by_key[key] for key in shortlist], 1, draws - 1)
        for key in shortlist:
            screened[key] = (screened[key] + (draws - 1) * confirmed[key]) / draws
            used[key] = draws
    table = [{"n_components": key[0], "method": key[1], "options": dict(key[2]), "risk": risk,
              "psnr_db": psnr_of(risk), "draws": used[key]} for key, risk in screened.items()]
    best = min((row for row in table if row["draws"] == max(used.values())), key=lambda row: row["risk"])
    chosen = by_key[(best["n_components"], best["method"], tuple(sorted(best["options"].items())))]
    return Tuned(chosen, noise, estimated, sorted(table, key=lambda row: row["risk"]), pixels,
                 {**best, "rule": "least risk", "draws": best["draws"]})
