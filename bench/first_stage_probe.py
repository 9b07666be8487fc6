"""Would linear PCA of larger patches, as one more first stage, lift the service over linear PCA, and does
(T1) pick it? A probe (issue 27).

For each case of bench/denoise_quality.py (its images, 128 and 256 centre crops, noise 0.05, 0.1, 0.2,
its seeds, clipping and 16-bit pixels) it compares two pipelines, each a first stage followed by the
second stage ``auto`` chooses for it (`kpca.images.second_stage.second_stage_risks`, its ``chosen``):

* ``current``: the service's first stage (`workers.image_jobs.denoise_with_own_models` with
  ``second_stage="off"``, cached as bench/second_stage_probe.py caches it);
* ``linear-PxP``: linear PCA of the P x P patches (stride 1), its rank by `kpca.images.tuning.linear_rank`
  (the rule of the service's ``linear`` candidate and of the bench's baseline), for each ``--patches``.

Each pipeline's PSNR is scored against linear PCA of the 7 x 7 patches (rank by `linear_rank`: the
bench's baseline), alone (``alone_db``, the first stage without its second) and after its second stage
(``final_db``), with its estimated risk (T1, the tuning's draws and windows, of the first stage followed
by its chosen stage) and the standard error of the difference of that estimate to ``current``'s (16 x 16
blocks of the per-pixel losses, as `kpca.images.tuning.choose`). ``whole_image_risk`` is the first stage's own
(T1) over the whole image, averaged over `kpca.images.tuning.DRAWS` draws: what `kpca.images.tuning.choose` would read
if linear PCA of larger patches were one more ``linear`` row.

Rules (``rules``): ``margin=M``: the ``linear-PxP`` pipeline of least estimated risk replaces
``current`` where its risk is lower by more than M standard errors (0: the least estimated risk);
``oracle``: the pipeline of highest true PSNR (the clean image reads it: a ceiling, not a rule). The
noise level is the service's own estimate; only the scores read the clean image.

    python bench/first_stage_probe.py --cache /tmp/stage-cache [--images cell,gravel] [--patches 9,11,15]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # as on the service's workers
    os.environ.setdefault(_variable, "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bench._common import save  # noqa: E402
from bench.denoise_quality import PATCH, STRIDE, add_case_arguments  # noqa: E402
from bench.wiener_probe import first_stage_cases, psnr  # noqa: E402
from kpca.images.denoising import LINEAR, PatchSettings, linear_pca_candidates, linear_pca_denoise  # noqa: E402
from kpca.images.second_stage import apply_second_stage, second_stage_risks  # noqa: E402
from kpca.images.tuning import DRAWS, block_means, linear_rank, recorrupted_risks  # noqa: E402

MARGINS = (0.0, 1.0, 2.0)


def whole_image_risk(unit, patch, noise, rank) -> float:
    """(T1) of linear PCA of ``patch`` x ``patch`` patches at ``rank`` over the whole image, `DRAWS` draws."""
    risks, _ = recorrupted_risks(lambda y1, _s1: linear_pca_candidates(y1, patch, STRIDE, [rank]), unit, noise,
                                 draws=DRAWS)
    return float(risks[rank])


def pipeline(unit, clean, base, settings, first, noise) -> tuple[dict, dict]:
    """One first stage followed by its ``auto`` second stage: its row and its per-pixel losses."""
    t0 = time.perf_counter()
    risks = second_stage_risks(unit, settings, noise, keep_losses=True)
    losses = risks.pop("losses")
    stage = risks["chosen"]
    final = apply_second_stage(unit, first, settings, noise, stage)
    name = stage or "first"
    row = {"rank": settings.n_components, "stage": stage, "alone_db": psnr(clean, first) - base,
           "final_db": psnr(clean, final) - base, "estimated_risk": risks[name], "draws": risks["draws"],
           "seconds": time.perf_counter() - t0}
    return row, {w: loss / risks["draws"] for w, loss in losses[name].items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_case_arguments(ap)
    ap.add_argument("--patches", default="9,11,15", help="patch sides of the linear PCA first stages")
    ap.add_argument("--cache", default="", help="folder of the service's first-stage outputs")
    ap.add_argument("--name", default="first_stage_probe", help="name of the JSON result")
    args = ap.parse_args()
    cache = Path(args.cache) if args.cache else None
    patches = [int(p) for p in args.patches.split(",")]
    data_dir = tempfile.mkdtemp(prefix="first-stage-probe-")
    cases = []
    for name, size, level, clean, unit, first, noise, settings, chosen in first_stage_cases(args, cache, data_dir):
        rank7 = linear_rank(unit, PATCH, STRIDE, noise)
        base = psnr(clean, linear_pca_denoise(unit, PATCH, STRIDE, rank7))
        rows, losses = {}, {}
        rows["current"], losses["current"] = pipeline(unit, clean, base, settings, first, noise)
        rows["current"]["first_stage"] = f"{chosen['method']}, r = {chosen['n_components']}"
        for patch in patches:
            t0 = time.perf_counter()
            rank = linear_rank(unit, patch, STRIDE, noise)
            linear = replace_linear(settings, patch, rank)
            key = f"linear-{patch}x{patch}"
            rows[key], losses[key] = pipeline(unit, clean, base, linear,
                                              linear_pca_denoise(unit, patch, STRIDE, rank), noise)
            rows[key]["whole_image_risk"] = whole_image_risk(unit, patch, noise, rank)
            blocks = np.concatenate([block_means(losses["current"][w] - losses[key][w]) for w in losses[key]])
            rows[key]["standard_error"] = float(np.std(blocks, ddof=1) / np.sqrt(blocks.size))
            rows[key]["seconds"] = time.perf_counter() - t0
        rules = {}
        others = [k for k in rows if k != "current"]
        best = min(others, key=lambda k: rows[k]["estimated_risk"])
        for margin in MARGINS:
            gap = rows["current"]["estimated_risk"] - rows[best]["estimated_risk"]
            pick = best if gap > margin * rows[best]["standard_error"] else "current"
            rules[f"margin={margin:g}"] = {"pipeline": pick, "final_db": rows[pick]["final_db"]}
        oracle = max(rows, key=lambda k: rows[k]["final_db"])
        rules["oracle"] = {"pipeline": oracle, "final_db": rows[oracle]["final_db"]}
        cases.append({"image": name, "size": size, "noise": level, "noise_estimate": noise,
                      "linear_rank_7x7": rank7,
                      "linear_7x7_whole_image_risk": whole_image_risk(unit, PATCH, noise, rank7),
                      "psnr_db": {"linear_pca": base}, "pipelines": rows, "rules": rules})
        print(name, size, level, " | ".join(
            f"{k} r{v['rank']} {v['stage']} {v['alone_db']:+.2f}/{v['final_db']:+.2f} est {v['estimated_risk']:.3g}"
            for k, v in rows.items()), {k: f"{v['pipeline']} {v['final_db']:+.2f}" for k, v in rules.items()},
            flush=True)
    summary = {}
    current = np.array([c["pipelines"]["current"]["final_db"] for c in cases])
    for rule in cases[0]["rules"]:
        gains = np.array([c["rules"][rule]["final_db"] for c in cases])
        summary[rule] = {"cases_at_least_0.5_db_over_linear": int(np.sum(gains >= 0.5)), "cases": len(cases),
                         "mean_over_linear_db": float(gains.mean()), "worst_over_linear_db": float(gains.min()),
                         "cases_more_than_0.1_db_below_current": int(np.sum(gains < current - 0.1)),
                         "cases_more_than_0.1_db_above_current": int(np.sum(gains > current + 0.1))}
    summary["current"] = {"cases_at_least_0.5_db_over_linear": int(np.sum(current >= 0.5)), "cases": len(cases),
                          "mean_over_linear_db": float(current.mean()), "worst_over_linear_db": float(current.min())}
    save(args.name, {"patch": PATCH, "stride": STRIDE, "patches": patches, "margins": list(MARGINS),
                     "cases": cases, "summary": summary})


def replace_linear(settings: PatchSettings, patch: int, rank: int) -> PatchSettings:
    """``settings`` (its stride and tile) as linear PCA of ``patch`` x ``patch`` patches at ``rank``."""
    return PatchSettings(patch=patch, stride=settings.stride, width=None, n_components=rank, method=LINEAR,
                         options={}, tile=settings.tile)


if __name__ == "__main__":
    main()
