"""BM3D on bench/denoise_quality.py's cases: how far the field's best-known classical denoiser gets
against the same goal (issue 27), beside the service's recorded figures.

BM3D (Dabov, Foi, Katkovnik & Egiazarian, IEEE TIP 2007; the implementation of Mäkinen, Azzari &
Foi, the ``bm3d`` package of Tampere University) is not a dependency of kpca-stream and is never
installed by it: its licence allows non-commercial, informational use only. To run this script,
install it yourself into the environment (``.venv/bin/pip install bm3d``) and accept its terms.

For every case of bench/denoise_quality.py (the same crops, noise seeds and 16-bit pixels,
`noisy_cases`): linear PCA of the 7 x 7 patches by the bench's rule (`kpca.images.tuning.linear_rank`), BM3D
given the noise level the service estimates (`kpca.images.noise_level.noise_level`, what the service knows)
and BM3D given the true level (what it does not); PSNR in dB against the clean crop. The service's
PSNR is read from the recorded table (``--table``, default bench/results/denoise_quality.json), whose
linear PCA figure must equal this run's (checked to 0.01 dB: the same case, the same baseline). Goal
of issue 27, scored for both: at least 0.5 dB above linear PCA on every image and level.

Time (issue 55): in the same run and process, each case is also denoised by the one-call route's worker
function with its defaults (`workers.image_jobs.denoise_with_own_models`, as bench/denoise_quality.py calls
it; its PSNR must equal the table's to 0.01 dB), and its seconds are set against BM3D's on the same pixels
(``time_ratio``: the service's mean seconds over BM3D's, per crop size). ``--no-service-time`` leaves it out.
Writes bench/results/bm3d_anchor.json.

    .venv/bin/pip install bm3d   # not a dependency; non-commercial licence
    .venv/bin/python bench/bm3d_anchor.py [--table bench/results/denoise_quality.json]

BLAS runs on one thread, as on the service's workers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # as on the service's workers
    os.environ.setdefault(_variable, "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402
from skimage.metrics import peak_signal_noise_ratio  # noqa: E402

from bench._common import ROOT, save  # noqa: E402
from bench.denoise_quality import IMAGES, LEVELS, PATCH, SIZES, STRIDE, noisy_cases  # noqa: E402
from kpca.images.noise_level import noise_level  # noqa: E402
from kpca.images.denoising import linear_pca_denoise  # noqa: E402
from kpca.images.tuning import linear_rank  # noqa: E402
from workers.image_jobs import denoise_with_own_models  # noqa: E402

GOAL_DB = 0.5


def psnr(clean: np.ndarray, estimate: np.ndarray) -> float:
    return float(peak_signal_noise_ratio(clean, np.clip(estimate, 0.0, 1.0), data_range=1.0))


def recorded_cases(path: Path) -> dict:
    """The recorded table's cases by (image, size, noise): the service's and linear PCA's PSNR."""
    cases = json.loads(path.read_text())["cases"]
    return {(c["image"], c["size"], c["noise"]): {"service": c["rows"]["service"]["psnr_db"],
                                                  "linear_pca": c["rows"]["linear_pca"]["psnr_db"]}
            for c in cases}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", type=Path, default=ROOT / "bench" / "results" / "denoise_quality.json")
    ap.add_argument("--service-time", action=argparse.BooleanOptionalAction, default=True,
                    help="time the service's defaults on each case, beside BM3D")
    args = ap.parse_args()
    data_dir = tempfile.mkdtemp(prefix="kpca-bm3d-anchor-")
    try:
        import bm3d
    except ImportError:
        sys.exit("bench/bm3d_anchor.py needs the bm3d package, which kpca-stream does not install (its licence "
                 "is non-commercial): .venv/bin/pip install bm3d, then run this again")
    recorded = recorded_cases(args.table)

    rows = []
    for name, size, level, clean, pixels in noisy_cases(IMAGES, SIZES, LEVELS):
        unit = pixels / 65535.0
        noise = noise_level(unit)
        linear = psnr(clean, linear_pca_denoise(unit, PATCH, STRIDE, linear_rank(unit, PATCH, STRIDE, noise)))
        started = time.perf_counter()
        estimated = psnr(clean, bm3d.bm3d(unit, noise))
        seconds = time.perf_counter() - started
        true = psnr(clean, bm3d.bm3d(unit, level))
        table = recorded[(name, size, level)]
        timed = {}
        if args.service_time:
            started = time.perf_counter()
            out, _ = denoise_with_own_models(data_dir, pixels)
            timed = {"service_seconds": time.perf_counter() - started, "service_db_here": psnr(clean, out / 65535.0)}
            if abs(timed["service_db_here"] - table["service"]) > 0.01:
                sys.exit(f"{name} {size} at {level}: the service {timed['service_db_here']:.2f} dB here, "
                         f"{table['service']:.2f} dB in {args.table}: the table is not of this code")
        if abs(table["linear_pca"] - linear) > 0.01:
            sys.exit(f"{name} {size} at {level}: linear PCA {linear:.2f} dB here, {table['linear_pca']:.2f} dB in "
                     f"{args.table}: not the same case or baseline")
        rows.append({"image": name, "size": size, "noise": level, "noise_estimate": noise,
                     "linear_pca_db": linear, "service_db": table["service"], "bm3d_db": estimated,
                     "bm3d_true_noise_db": true, "bm3d_seconds": seconds,
                     "service_minus_linear_db": table["service"] - linear, "bm3d_minus_linear_db": estimated - linear,
                     "service_minus_bm3d_db": table["service"] - estimated, **timed})
        print(f"{name} {size} {level}: service {table['service'] - linear:+.2f}, BM3D {estimated - linear:+.2f} "
              f"(true noise {true - linear:+.2f}) dB over linear PCA", file=sys.stderr, flush=True)

    def summary(key: str) -> dict:
        gains = np.array([row[key] for row in rows])
        return {"mean_db": float(gains.mean()), "cases_at_goal": int(np.sum(gains >= GOAL_DB)),
                "short": [f"{r['image']} {r['size']} at {r['noise']}: {r[key]:+.2f} dB" for r in rows if r[key] < GOAL_DB]}

    time_ratio = {str(size): float(np.mean([r["service_seconds"] for r in rows if r["size"] == size])
                                   / np.mean([r["bm3d_seconds"] for r in rows if r["size"] == size]))
                  for size in SIZES} if args.service_time else None
    save("bm3d_anchor", {
        "table": str(args.table.relative_to(ROOT) if args.table.is_relative_to(ROOT) else args.table),
        "bm3d_version": version("bm3d"),
        "goal_db": GOAL_DB, "cases": rows,
        "service_over_linear": summary("service_minus_linear_db"),
        "bm3d_over_linear": summary("bm3d_minus_linear_db"),
        "service_minus_bm3d_mean_db": float(np.mean([r["service_minus_bm3d_db"] for r in rows])),
        "service_at_or_above_bm3d": int(sum(r["service_minus_bm3d_db"] >= 0 for r in rows)),
        "time_ratio": time_ratio,
    })


if __name__ == "__main__":
    main()
