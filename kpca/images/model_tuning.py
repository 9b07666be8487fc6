"""Tuning a stored model's rank and pre-image on the noisy input alone (`tune_model`): the estimate (T1) of
`kpca.images.tuning` over `model_candidates`, the model's kernel width being its own.

A stored model's /denoise and /denoise-image (`workers.image_jobs`) call it; `kpca.images.tuning.tune_patches`
tunes the one-call path's own models, kernel width included.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from kpca.images.denoising import Candidate, leading
from kpca.images.tuning import DRAWS, SHORTLIST, Tuned, psnr_of, recorrupted_risks, tuning_windows

MODEL_TUNING_TILE = 32  # windows of 64 x 64 pixels for the tuning of a stored model on a large image
LEARNED_SAMPLES = 1200  # training rows a learned map is fitted on, at most (`kpca.images.denoising.MAX_ROWS`)


def model_candidates(model, fixed: Mapping | None = None) -> list[Candidate]:
    """Candidates for a stored model, whose kernel width is its own: ranks ``r / 4``, ``r / 2`` and
    r (its r components) for the fixed point after one step, Kwok-Tsang and the learned map, and at
    rank r the fixed point after 5 steps and the gradient pre-image (each where the kernel allows it),
    less what ``fixed`` (``n_components``, ``method``, ``options``) settles. ValueError naming the
    field for a value the model cannot take."""
    return candidates_for(model.n_components, model.kernel.type, fixed)


def candidates_for(n_components: int, kernel: str, fixed: Mapping | None = None) -> list[Candidate]:
    """`model_candidates` of a model of ``n_components`` components and kernel type ``kernel`` (what a stored
    model's record says, before the model is loaded). O(candidates)."""
    from kpca.preimage.fixed_point import FIXED_POINT_KERNELS
    from kpca.preimage.kwok_tsang import KWOK_TSANG_KERNELS

    fixed = dict(fixed or {})
    r = int(n_components)
    if fixed.get("n_components"):
        if int(fixed["n_components"]) > r:
            raise ValueError(f"n_components: the model has {r} components; ask for at most {r}")
        ranks = [int(fixed["n_components"])]
    else:
        ranks = sorted({max(1, r // 4), max(1, r // 2), r})
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


def tune_model(model, inputs, apply: Callable | None, fixed: Mapping | None = None, noise: float | None = None,
               noise_of: Callable[[np.ndarray], float] | None = None,
               report: Callable[[int, int], None] | None = None, seed: int = 0, draws: int = DRAWS,
               prepare: Callable[[np.ndarray], Callable[[Candidate], np.ndarray]] | None = None,
               keep_outputs: bool = False) -> Tuned:
    """Rank and pre-image of a stored model (its kernel width fixed) by the least estimated risk (T1)
    over `model_candidates`, reading nothing but the noisy input: every candidate estimated on the
    first draw of z, the `SHORTLIST` of least risk there on the other ``draws - 1`` as well, and the
    choice the shortlisted candidate of least risk averaged over all the draws (as `tune_patches`).

    Parameters
    ----------
    model : kpca.model.KernelModel
    inputs : list of ndarray
        The noisy input, or windows of it (`tuning_windows`): images or arrays of rows.
    apply : callable or None
        ``apply(model, method, options, y) -> f(y)``: one input denoised through a model (for an
        image, its patches' pre-images averaged back; for rows, the pre-images). Not called with ``prepare``.
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
    prepare : callable, optional
        ``prepare(y) -> serve`` with ``serve(candidate) -> f(y)``: what the candidates share for one input
        and draw (its projections, `kpca.images.tile_preimages.TilePreimages`), prepared once; ``apply`` is
        then not called.
    keep_outputs : bool
        Keep the candidates' outputs (for the second stage's estimate: ``first_outputs``); memory
        O(candidates x inputs), so for images' windows, not for large arrays of rows.

    Returns
    -------
    Tuned whose ``settings`` is the chosen `Candidate`; each row of ``risks`` says over how many
    ``draws`` it was averaged; ``first_outputs`` the chosen candidate's outputs (``[draw][input]``), for the
    second stage's estimate (`kpca.images.second_stage.stage_risks`). Cost: every candidate's pre-images of
    the inputs once, and the shortlist's ``draws - 1`` times more (`tuned_work`).
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

    kept: dict[tuple, dict[int, list]] = {}  # candidate key -> draw -> its outputs per input (`Tuned.first_outputs`)

    def evaluate_all(chosen, w: int, first: int):
        drawn = [first]

        def evaluate(y1, _s1):
            if prepare is not None:
                serve = prepare(y1)
            else:
                def serve(c):
                    return apply(leading(model, c.n_components), c.method, c.options, y1)
            outputs = {}
            for c in chosen:
                outputs[c.key()] = serve(c)
                if keep_outputs:
                    kept.setdefault(c.key(), {}).setdefault(drawn[0], [None] * len(inputs))[w] = outputs[c.key()]
                done[0] += 1
                if report is not None:
                    report(done[0], total)
            drawn[0] += 1
            return outputs
        return evaluate

    def risks_of(chosen, first: int, count: int) -> tuple[dict, int]:
        """Per candidate, its risk (T1) over the inputs averaged over draws ``first .. first + count - 1``."""
        sums: dict[tuple, float] = {}
        pixels = 0
        for w, y in enumerate(inputs):
            risks, size = recorrupted_risks(evaluate_all(chosen, w, first), y, noise, seed=seed + w,
                                            draws=first + count, first=first)
            pixels += size
            for key, risk in risks.items():
                sums[key] = sums.get(key, 0.0) + risk * size
        return {key: value / pixels for key, value in sums.items()}, pixels

    screened, pixels = risks_of(candidates, 0, 1)
    by_key = {c.key(): c for c in candidates}
    used = dict.fromkeys(screened, 1)
    if shortlisted:
        shortlist = sorted(screened, key=lambda key: screened[key])[:shortlisted]
        for key in set(kept) - set(shortlist):  # only the shortlist can be chosen
            del kept[key]
        confirmed, _ = risks_of([by_key[key] for key in shortlist], 1, draws - 1)
        for key in shortlist:
            screened[key] = (screened[key] + (draws - 1) * confirmed[key]) / draws
            used[key] = draws
    table = [{"n_components": key[0], "method": key[1], "options": dict(key[2]), "risk": risk,
              "psnr_db": psnr_of(risk), "draws": used[key]} for key, risk in screened.items()]
    best = min((row for row in table if row["draws"] == max(used.values())), key=lambda row: row["risk"])
    chosen = by_key[(best["n_components"], best["method"], tuple(sorted(best["options"].items())))]
    by_draw = kept.get(chosen.key(), {})
    return Tuned(chosen, noise, estimated, sorted(table, key=lambda row: row["risk"]), pixels,
                 {**best, "rule": "least risk", "draws": best["draws"]},
                 first_outputs=[by_draw.get(d) for d in range(draws)] if keep_outputs else None, seed=seed)


def candidate_passes(candidate: Candidate) -> int:
    """Kernel passes per input row that ``candidate``'s pre-images take beyond what every candidate shares
    (`kpca.images.tile_preimages.TilePreimages`: the projections, and the kernel slopes of the fixed point's
    one step): fixed point of k > 1 steps k + 1, the gradient pre-image of k steps k + 3 (its start's two
    points, its first gradient), none for one fixed-point step, Kwok-Tsang and the learned map. O(1)."""
    steps = int(candidate.options.get("n_iter", 1 if candidate.method == "fixed-point" else 10))
    if candidate.method == "fixed-point":
        return 0 if steps == 1 else steps + 1
    if candidate.method == "gradient":
        return steps + 3
    return 0


def _shared_passes(candidates: list[Candidate]) -> int:
    """The passes every input's candidates share: the projections, and the slopes where a fixed point of one
    step is among them."""
    one_step = any(c.method == "fixed-point" and candidate_passes(c) == 0 for c in candidates)
    return 1 + int(one_step)


def tuned_work(candidates: list[Candidate], tuning_rows: int, served_rows: int, draws: int = DRAWS,
               shortlist: int = SHORTLIST) -> int:
    """Rows of kernel passes (times model points and features: the service's units of work,
    `service.serving_work`) of a tuned request: every candidate on ``tuning_rows`` rows (the tuning windows'
    patches, or the rows) for the first draw, at most the `SHORTLIST` costliest on the other ``draws - 1``,
    the learned maps' samples, and the chosen candidate (at most the costliest) on the ``served_rows``. The
    second stage reads the tuning's outputs (`tune_model`'s ``keep_outputs``). An upper bound of what
    `tune_model` and the answer run; O(candidates)."""
    costs = sorted(candidate_passes(c) for c in candidates)
    screening = _shared_passes(candidates) + sum(costs)
    confirming = (max(0, int(draws) - 1) * (_shared_passes(candidates) + sum(costs[-shortlist:]))) if shortlist else 0
    learned = LEARNED_SAMPLES * len({c.n_components for c in candidates if c.method == "learned"})
    served = int(served_rows) * (_shared_passes(candidates) + (costs[-1] if costs else 0))
    return int(tuning_rows) * (screening + confirming) + learned + served


def image_tuning_rows(height: int, width: int, patch: int, stride: int) -> int:
    """Patches of a stored model's tuning windows on an image of ``height x width`` (`tuning_windows` with
    `MODEL_TUNING_TILE`, windows narrower than a patch left out), as `workers.image_jobs` tunes. O(windows)."""
    total = 0
    for rows, cols in tuning_windows((height, width), MODEL_TUNING_TILE):
        h, w = rows.stop - rows.start, cols.stop - cols.start
        if min(h, w) >= patch:
            total += ((h - patch) // stride + 1) * ((w - patch) // stride + 1)
    return total
