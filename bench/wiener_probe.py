"""Does an empirical Wiener second stage (`kpca.images.wiener.wiener_stage`) close issue 27's gap? A probe.

For moon, cell, gravel and camera, centre crops of 128 x 128, Gaussian noise 0.05, 0.1 and 0.2 added
and clipped to [0, 1] with bench/denoise_quality.py's seeds and 16-bit pixels: PSNR (dB, against the
clean crop) of linear PCA of the 7 x 7 patches (rank by `kpca.images.tuning.linear_rank`, as the bench), the
service's first stage (`workers.image_jobs.denoise_with_own_models` as the bench calls it, with
``second_stage=False``: the service before issue 27's second stage), and the Wiener stage on
the noisy image with the service's output, or linear PCA's, as pilot: per patch and coefficient
("patch") or per component ("component"), one basis for the whole image ("global") or one per 32 x 32
tile ("tile32"); and "gated": the service's output followed by `kpca.images.second_stage`'s Wiener stage where
its recorrupted risk estimate is lower than the first stage's alone (`second_stage_risks`), else the
service's output. The noise level is the service's own estimate (`kpca.images.noise_level.noise_level`); only
the scores read the clean image.

``--cache DIR`` keeps the service's outputs (the slow part) in DIR as ``{image}_{size}_{level}.npz``
(``service``, ``noise``, ``chosen``), reused when there. ``--wired`` also runs the service as the route
does now (first stage, then the gated second stage): column "service_wired", which should be "gated".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # as on the service's workers
    os.environ.setdefault(_variable, "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from skimage.metrics import peak_signal_noise_ratio  # noqa: E402

from bench._common import save  # noqa: E402
from bench.denoise_quality import PATCH, STRIDE, noisy_cases  # noqa: E402
from kpca.images.denoising import PatchSettings, linear_pca_denoise  # noqa: E402
from kpca.images.second_stage import SHRINK, WIENER_TILE, second_stage_risks  # noqa: E402
from kpca.images.tuning import linear_rank  # noqa: E402
from kpca.images.wiener import wiener_stage  # noqa: E402
from workers.image_jobs import denoise_with_own_models  # noqa: E402

PROBE_IMAGES = ("moon", "cell", "gravel", "camera")
VARIANTS = {f"{shrink}/{where}": (shrink, tile) for shrink in ("patch", "component")
            for where, tile in (("global", None), ("tile32", 32))}


def psnr(clean, estimate) -> float:
    return float(peak_signal_noise_ratio(clean, np.clip(estimate, 0.0, 1.0), data_range=1.0))


def service_output(pixels, cache: Path | None, key: str, data_dir: str):
    """The service's first stage alone for ``pixels``: ``(output in [0, 1], noise estimate, chosen)``, kept
    in and read back from ``cache/{key}.npz`` when ``cache`` is given (made if missing)."""
    path = cache / f"{key}.npz" if cache else None
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
    if path is not None and path.exists():
        saved = np.load(path)
        return saved["service"], float(saved["noise"]), json.loads(str(saved["chosen"]))
    out, info = denoise_with_own_models(data_dir, pixels, second_stage=False)  # the first stage alone
    result = (out / 65535.0, float(info["noise"]), info["chosen"])
    if path is not None:
        np.savez(path, service=result[0], noise=result[1], chosen=json.dumps(result[2], default=str))
    return result


def first_stage_cases(args, cache: Path | None, data_dir: str):
    """bench/denoise_quality.py's cases (``args.images``, ``args.sizes``, ``args.levels``) with the service's
    first stage (`service_output`): ``(name, size, level, clean, unit pixels, first stage, noise estimate,
    its PatchSettings, chosen)`` each."""
    from kpca.images.denoising import PatchSettings

    for name, size, level, clean, pixels in noisy_cases(args.images.split(","), map(int, args.sizes.split(",")),
                                                        map(float, args.levels.split(","))):
        first, noise, chosen = service_output(pixels, cache, f"{name}_{size}_{level}", data_dir)
        settings = PatchSettings(**{k: chosen[k] for k in ("patch", "stride", "width", "n_components", "method",
                                                            "options", "tile")})
        yield name, size, level, clean, pixels / 65535.0, first, noise, settings, chosen


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", default=",".join(PROBE_IMAGES))
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--levels", default="0.05,0.1,0.2")
    ap.add_argument("--cache", default="", help="folder of the service's outputs")
    ap.add_argument("--wired", action="store_true", help="also run the service with its second stage")
    ap.add_argument("--name", default="wiener_probe", help="name of the JSON result")
    args = ap.parse_args()
    cache = Path(args.cache) if args.cache else None
    data_dir = tempfile.mkdtemp(prefix="wiener-probe-")
    cases = []
    for name, _, level, clean, pixels in noisy_cases(args.images.split(","), [args.size],
                                                     map(float, args.levels.split(","))):
        unit = pixels / 65535.0
        service, noise, chosen = service_output(pixels, cache, f"{name}_{args.size}_{level}", data_dir)
        rank = linear_rank(unit, PATCH, STRIDE, noise)
        linear = linear_pca_denoise(unit, PATCH, STRIDE, rank)
        row = {"image": name, "size": args.size, "noise": level, "noise_estimate": noise,
               "chosen": f"{chosen['method']}, r = {chosen['n_components']}", "linear_rank": rank,
               "psnr_db": {"noisy": psnr(clean, unit), "linear_pca": psnr(clean, linear),
                           "service": psnr(clean, service)}}
        for pilot_name, pilot in (("service", service), ("linear", linear)):
            for variant, (shrink, tile) in VARIANTS.items():
                out = wiener_stage(unit, pilot, PATCH, STRIDE, noise, shrink=shrink, tile=tile)
                row["psnr_db"][f"wiener[{pilot_name}]/{variant}"] = psnr(clean, out)
        # the gate of `kpca.images.second_stage.choose_second_stage`: (T1) of the chosen first stage alone and
        # followed by the Wiener stage, the tuning's draws; "gated" is what the wired service answers
        settings = PatchSettings(**{k: chosen[k] for k in ("patch", "stride", "width", "n_components", "method",
                                                            "options", "tile")})
        risks = second_stage_risks(unit, settings, noise)
        keep = risks["wiener"] < risks["first"]
        row["gate"] = {**risks, "kept": bool(keep)}
        wired = wiener_stage(unit, service, PATCH, STRIDE, noise, shrink=SHRINK, tile=WIENER_TILE)
        row["psnr_db"]["gated"] = psnr(clean, wired) if keep else row["psnr_db"]["service"]
        if args.wired:  # the service as the route runs it now: "gated" should be this
            out, info = denoise_with_own_models(data_dir, pixels)
            row["psnr_db"]["service_wired"] = psnr(clean, out / 65535.0)
            row["wired_second_stage"] = info["chosen"]["second_stage"]
        row["minus_service_db"] = {k: v - row["psnr_db"]["service"] for k, v in row["psnr_db"].items()}
        cases.append(row)
        print(name, level, {k: round(v, 2) for k, v in row["minus_service_db"].items()}, flush=True)
    columns = [k for k in cases[0]["psnr_db"] if k.startswith("wiener") or k in ("gated", "service_wired")]
    summary = {}
    for column in columns:
        gains = np.array([c["minus_service_db"][column] for c in cases])
        summary[column] = {"mean_gain_over_service_db": float(gains.mean()),
                           "cases_at_least_0.3_db_better": int(np.sum(gains >= 0.3)),
                           "worst_gain_db": float(gains.min()),
                           "cases_at_least_0.5_db_over_linear": int(sum(
                               c["psnr_db"][column] - c["psnr_db"]["linear_pca"] >= 0.5 for c in cases))}
    save(args.name, {"patch": PATCH, "stride": STRIDE, "size": args.size, "cases": cases, "summary": summary})


if __name__ == "__main__":
    main()
