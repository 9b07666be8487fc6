"""Which second stage after the tuned first stage, and does (T1) pick it? A probe (issue 27).

For each case of bench/denoise_quality.py (its images, 128 and 256 centre crops, noise 0.05, 0.1, 0.2,
its seeds, clipping and 16-bit pixels): PSNR (dB, against the clean crop) of linear PCA of the 7 x 7
patches (rank by `kpca.images.tuning.linear_rank`, as the bench), the service's first stage
(`workers.image_jobs.denoise_with_own_models` with ``second_stage="off"``), every Wiener variant of
`kpca.images.second_stage.variants` on it (patch side, one or two passes, gain noise factor), and the rules:

* ``single``: the single Wiener stage where its estimated risk (T1) is lower than the first stage's
  alone (the rule before the variants);
* ``auto``: `kpca.images.second_stage.second_stage_risks`' choice (the variant of least risk where it beats
  ``single``'s choice by more than `kpca.images.second_stage.MARGIN` standard errors), as the route answers;
* ``margin=M``: the same rule with M standard errors (0: the least estimated risk).

Each variant's estimated risk (T1, the tuning's draws and windows) is reported with its true PSNR, and
the seconds of the estimate and of applying the chosen stage. The noise level is the service's own
estimate; only the scores read the clean image.

``--cache DIR`` keeps the service's first-stage outputs (the slow part) in DIR as
``{image}_{size}_{level}.npz`` (bench/wiener_probe.py's format), reused when there.

    python bench/second_stage_probe.py --cache /tmp/stage-cache [--images cell,gravel] [--sizes 128]
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
from kpca.images.denoising import linear_pca_denoise  # noqa: E402
from kpca.images.second_stage import (MARGIN, WIENER, apply_second_stage, choose_variant, second_stage_risks,  # noqa: E402
                               variants)
from kpca.images.tuning import linear_rank  # noqa: E402

MARGINS = (0.0, 1.0, 2.0, 3.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_case_arguments(ap)
    ap.add_argument("--cache", default="", help="folder of the service's first-stage outputs")
    ap.add_argument("--name", default="second_stage_probe", help="name of the JSON result")
    args = ap.parse_args()
    cache = Path(args.cache) if args.cache else None
    data_dir = tempfile.mkdtemp(prefix="stage-probe-")
    cases = []
    for name, size, level, clean, unit, first, noise, settings, chosen in first_stage_cases(args, cache, data_dir):
        linear = linear_pca_denoise(unit, PATCH, STRIDE, linear_rank(unit, PATCH, STRIDE, noise))
        base = psnr(clean, linear)
        t0 = time.perf_counter()
        risks = second_stage_risks(unit, settings, noise, keep_losses=True)
        estimate_s = time.perf_counter() - t0
        losses = risks.pop("losses")
        gains = {"first": psnr(clean, first) - base}
        for variant in variants(settings.patch):
            gains[variant] = psnr(clean, apply_second_stage(unit, first, settings, noise, variant)) - base
        t0 = time.perf_counter()
        apply_second_stage(unit, first, settings, noise, risks["chosen"])
        apply_s = time.perf_counter() - t0
        scored = {k: v for k, v in risks.items() if k in gains}
        single = WIENER if risks[WIENER] < risks["first"] else "first"
        rules = {"single": single, "auto": risks["chosen"] or "first"}
        for margin in MARGINS:
            rules[f"margin={margin:g}"] = choose_variant(scored, losses, risks["draws"], margin)["chosen"] \
                or "first"
        row = {"image": name, "size": size, "noise": level, "noise_estimate": noise,
               "first_stage": f"{chosen['method']}, r = {chosen['n_components']}",
               "psnr_db": {"noisy": psnr(clean, unit), "linear_pca": base,
                           "first_stage": base + gains["first"]},
               "minus_linear_db": gains, "estimated_risk": scored, "standard_error": risks["standard_error"],
               "rules": {k: {"stage": v, "minus_linear_db": gains[v]} for k, v in rules.items()},
               "seconds": {"estimate": estimate_s, "apply_chosen": apply_s}}
        cases.append(row)
        print(name, size, level, {k: f"{v['stage']} {v['minus_linear_db']:+.2f}"
                                  for k, v in row["rules"].items()}, f"{estimate_s:.1f}s + {apply_s:.1f}s",
              flush=True)
    summary = {}
    for rule in cases[0]["rules"]:
        gains = np.array([c["rules"][rule]["minus_linear_db"] for c in cases])
        single = np.array([c["rules"]["single"]["minus_linear_db"] for c in cases])
        summary[rule] = {"cases_at_least_0.5_db_over_linear": int(np.sum(gains >= 0.5)), "cases": len(cases),
                         "mean_over_linear_db": float(gains.mean()), "worst_over_linear_db": float(gains.min()),
                         "worst_minus_single_db": float((gains - single).min()),
                         "cases_more_than_0.1_db_below_single": int(np.sum(gains < single - 0.1))}
    save(args.name, {"patch": PATCH, "stride": STRIDE, "margin": MARGIN, "cases": cases, "summary": summary})


if __name__ == "__main__":
    main()
