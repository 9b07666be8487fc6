"""Where the one-call denoising path spends its time (issue 55): stages in seconds, at 128 x 128 and 256 x 256.

The path is the worker function the route ``POST /v1/denoise-image`` calls with its defaults
(`workers.image_jobs.denoise_with_own_models`), on bench/denoise_quality.py's camera crops with noise 0.1
(the same 16-bit pixels, `noisy_cases`). It runs once as the route runs it (the total and the steps it
times itself; its tiles on the cores it may use); then its stages run again one by one, each under
``cProfile`` with the tiles in one thread (where the profiler sees them), and must give the same image bit
for bit: the noise estimate, the tuning's candidates (`kpca.images.tuning.tune_patches`), the
second stage's choice (`kpca.images.second_stage.choose_second_stage`), the final first stage and the
final second stage. Inside each stage, the cumulative seconds of the functions that do the work (`WORK`):
the tiles' kernel PCA fits (`kpca.images.denoising.fit_patch_model`), the pre-images by method, linear
PCA's candidates and the Wiener stage.

With ``--bm3d`` (the ``bm3d`` package installed by hand: it is not a
dependency, its licence is non-commercial) BM3D's time on the same pixels, given the noise level the
service estimates, runs in the same process, and the ratio is printed. Writes
bench/results/denoise_profile.json (``--name`` picks another name: a before/after pair).

    .venv/bin/python bench/denoise_profile.py [--sizes 128,256] [--bm3d] [--name denoise_profile_before]

BLAS runs on one thread, as on the service's workers.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # as on the service's workers
    os.environ.setdefault(_variable, "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402
from skimage.metrics import peak_signal_noise_ratio  # noqa: E402

from bench._common import save  # noqa: E402
from bench.denoise_quality import noisy_cases  # noqa: E402
from kpca._threads import tile_threads  # noqa: E402
from kpca.images.denoising import PatchSettings, denoise_image  # noqa: E402
from kpca.images.noise_level import noise_level  # noqa: E402
from kpca.images.patches import from_unit, to_unit  # noqa: E402
from kpca.images.second_stage import apply_second_stage, choose_second_stage  # noqa: E402
from kpca.images.tuning import tune_patches  # noqa: E402
from workers.image_jobs import denoise_with_own_models  # noqa: E402

IMAGE, LEVEL = "camera", 0.1
#: work -> (module file suffix, function name) whose cumulative time it is, within each stage
WORK = {
    "fits": ("kpca/images/denoising.py", "fit_patch_model"),
    "projections": ("kpca/images/tile_preimages.py", "__init__"),
    "preimages/fixed-point": ("kpca/images/denoising.py", "_fixed_point_step"),
    "preimages/fixed-point-shared": ("kpca/images/tile_preimages.py", "_fixed_point_step"),
    "preimages/fixed-point-iterated": ("kpca/preimage/fixed_point.py", "fixed_point"),
    "preimages/kwok-tsang": ("kpca/preimage/kwok_tsang.py", "kwok_tsang"),
    "preimages/gradient": ("kpca/preimage/gradient.py", "batched_descent"),
    "preimages/learned": ("kpca/preimage/learned.py", "fit"),
    "linear": ("kpca/images/denoising.py", "linear_pca_candidates"),
    "wiener": ("kpca/images/wiener.py", "wiener_stage"),
}


def cumulative(stats: pstats.Stats, suffix: str, name: str) -> float:
    """Seconds spent in ``name`` of the module ending in ``suffix``, its callees included (0 if never called)."""
    return float(sum(entry[3] for (path, _line, function), entry in stats.stats.items()  # type: ignore[attr-defined]
                     if function == name and path.replace(os.sep, "/").endswith(suffix)))


def profiled(call):
    """``(result, seconds, work)``: ``call()`` run under cProfile, and the seconds of each `WORK` item in it."""
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    with tile_threads(1):  # the tiles in this thread, where the profiler sees them
        result = call()
    profiler.disable()
    seconds = time.perf_counter() - started
    stats = pstats.Stats(profiler)
    work = {name: round(t, 3) for name, where in WORK.items() if (t := cumulative(stats, *where)) > 0}
    return result, seconds, work


def profile_case(size: int, data_dir: str) -> tuple[dict, np.ndarray, np.ndarray, float]:
    """The path on the camera crop of ``size`` at noise 0.1: ``(case, clean, pixels, noise)``.

    The worker function runs once as the route calls it, in a process that has run it before (`warm_up`): its
    total and its own steps; then its stages
    run again one by one, as it runs them, each under cProfile: noise estimate, tuning's candidates
    (`kpca.images.tuning.tune_patches`), the second stage's choice, the final first stage, the second
    stage. The stages' output must equal the worker's, bit for bit (checked), so the table is of the
    path the route runs."""
    _, _, _, clean, pixels = next(noisy_cases([IMAGE], [size], [LEVEL]))
    started = time.perf_counter()
    out, info = denoise_with_own_models(data_dir, pixels)
    total = time.perf_counter() - started

    unit, unit_info = to_unit(pixels)
    base = PatchSettings()
    stages = {}
    noise, stages["noise"], _ = profiled(lambda: noise_level(unit))
    tuned, seconds, work = profiled(lambda: tune_patches(unit, base, {}, noise))
    stages["candidates"] = {"seconds": seconds, **work}
    tuned, seconds, work = profiled(lambda: choose_second_stage(unit, tuned))
    stages["second stage choice"] = {"seconds": seconds, **work}
    first, seconds, work = profiled(lambda: denoise_image(unit, tuned.settings, noise))
    stages["final first stage"] = {"seconds": seconds, **work}
    stage = (tuned.second_stage or {}).get("stage")
    final, seconds, work = profiled(lambda: apply_second_stage(unit, first, tuned.settings, noise, stage))
    stages["final second stage"] = {"seconds": seconds, **work}
    if not np.array_equal(from_unit(final, unit_info), out):
        raise SystemExit("the stages run one by one did not give the worker's image: the table would not be its")
    case = {"size": size, "noise": LEVEL, "seconds": round(total, 3),
            "steps": {step["step"]: round(step["seconds"], 3) for step in info["steps"]},
            "stages": {name: ({k: round(v, 3) for k, v in value.items()} if isinstance(value, dict)
                              else round(value, 3)) for name, value in stages.items()},
            "psnr_db": float(peak_signal_noise_ratio(clean, np.clip(out / 65535.0, 0, 1), data_range=1.0)),
            "chosen": info["chosen"], "candidates": info.get("candidates")}
    return case, clean, pixels, info["noise"]


def bm3d_case(clean: np.ndarray, pixels: np.ndarray, noise: float) -> dict:
    """BM3D on the same pixels with the service's noise estimate: seconds and PSNR."""
    import bm3d

    unit = pixels / 65535.0
    started = time.perf_counter()
    out = bm3d.bm3d(unit, noise)
    seconds = time.perf_counter() - started
    return {"seconds": round(seconds, 3),
            "psnr_db": float(peak_signal_noise_ratio(clean, np.clip(out, 0, 1), data_range=1.0))}


def warm_up(data_dir: str, bm3d: bool) -> None:
    """One call of each timed path on a 64 x 64 crop, untimed: the jitted functions loaded from numba's cache
    (and BM3D's own start), as in a worker that has served a request, so that the first case's time is not
    the process's start."""
    _, _, _, clean, pixels = next(noisy_cases([IMAGE], [64], [LEVEL]))
    _, info = denoise_with_own_models(data_dir, pixels)
    if bm3d:
        bm3d_case(clean, pixels, info["noise"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="128,256")
    ap.add_argument("--bm3d", action="store_true", help="time BM3D on the same pixels (installed by hand)")
    ap.add_argument("--name", default="denoise_profile")
    args = ap.parse_args()
    cases = []
    with tempfile.TemporaryDirectory() as data_dir:
        warm_up(data_dir, args.bm3d)
        for size in (int(s) for s in args.sizes.split(",")):
            case, clean, pixels, noise = profile_case(size, data_dir)
            if args.bm3d:
                case["bm3d"] = bm3d_case(clean, pixels, noise)
                case["ratio_to_bm3d"] = round(case["seconds"] / case["bm3d"]["seconds"], 2)
            cases.append(case)
            print({k: case[k] for k in ("size", "seconds", "steps", "stages", "psnr_db")}
                  | ({"bm3d": case["bm3d"], "ratio": case["ratio_to_bm3d"]} if args.bm3d else {}), flush=True)
    save(args.name, {"image": IMAGE, "cases": cases})


if __name__ == "__main__":
    main()
