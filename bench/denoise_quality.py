"""Denoising quality of the one-call path (``POST /v1/denoise-image`` with its defaults) against linear
PCA and the field's anchors, on scikit-image's bundled grey images (issue 27).

For each image, centre crops of 128 x 128 and 256 x 256, Gaussian noise of standard deviation 0.05,
0.1 and 0.2 added to pixels in [0, 1] and clipped to [0, 1] (what a PNG holds), sent as 16-bit pixels
through the worker function the route calls (`workers.image_jobs.denoise_with_own_models`, so the
defaults are the route's). Rows of the table, each with PSNR (dB), SSIM and seconds:

* ``noisy``;
* ``linear_pca``: linear PCA of the same patches (7 x 7, stride 1), the rank chosen by the same rule
  as the service's (`kpca.images.tuning.linear_rank`: the least recorrupted risk estimate over the whole image,
  averaged over `kpca.images.tuning.DRAWS` draws, over ranks 1-32);
* ``service``: the service with its defaults (tune=auto: noise estimated, width, rank and pre-image
  tuned on the noisy image alone; ``linear``, linear PCA of all the patches, is one of its candidates,
  kept unless a kernel candidate beats it by two standard errors of the estimate; then the Wiener
  second stage where its risk estimate is lower, ``chosen["second_stage"]``, `kpca.images.second_stage`);
* ``tuned/<method>``: each pre-image method with its own tuned width and rank (the best row of that
  method in the service's tuning table, or, for a method its default sweep leaves out, that method tuned
  alone as a request naming it would be), first stage alone;
* ``nl_means``: scikit-image's non-local means, h = 0.8 sigma with sigma from its own estimate
  (`skimage.restoration.estimate_sigma`), 5 x 5 patches, 13 x 13 search (its documented recipe);
* ``tv_chambolle``: total variation (Chambolle), weight chosen by the same rule as linear PCA's rank.

Goals: the service at least 0.5 dB above linear PCA on every image and level, and within 0.5 dB of
non-local means on average. Writes bench/results/denoise_quality.json and a picture of one row
(noisy | linear PCA | service | non-local means) to bench/results/denoise_quality.png and
docs/denoising_row.png.

    python bench/denoise_quality.py [--images camera,moon] [--sizes 128] [--levels 0.1] [--name part1]
    python bench/denoise_quality.py --merge part1,part2,part3    # parts run side by side, one table

BLAS runs on one thread, as on the service's workers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # as on the service's workers
    os.environ.setdefault(_variable, "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402
from skimage import data  # noqa: E402
from skimage.metrics import peak_signal_noise_ratio, structural_similarity  # noqa: E402
from skimage.restoration import denoise_nl_means, denoise_tv_chambolle, estimate_sigma  # noqa: E402

from bench._common import ROOT, output_path, save  # noqa: E402
from kpca.images.denoising import PatchSettings, denoise_image, linear_pca_denoise  # noqa: E402
from kpca.images.tuning import DRAWS, linear_rank, recorrupted_risks, tune_patches  # noqa: E402
from workers.image_jobs import denoise_with_own_models  # noqa: E402

IMAGES = ("camera", "moon", "coins", "brick", "gravel", "cell")
SIZES = (128, 256)
LEVELS = (0.05, 0.1, 0.2)
PATCH, STRIDE = 7, 1


def crop(name: str, size: int) -> np.ndarray:
    image = getattr(data, name)().astype(np.float64) / 255.0
    H, W = image.shape
    return image[(H - size) // 2 : (H - size) // 2 + size, (W - size) // 2 : (W - size) // 2 + size]


def case_seed(name: str, size: int, level: float) -> int:
    """The noise seed of the case (image ``name``, crop ``size``, noise ``level``): every script that
    scores these cases draws the same noise."""
    return 1000 * IMAGES.index(name) + size + int(100 * level)


def noisy_pixels(clean: np.ndarray, level: float, seed: int) -> np.ndarray:
    """``clean`` with Gaussian noise ``level`` (seeded), clipped to [0, 1], as 16-bit pixels (a PNG's)."""
    noisy = np.clip(clean + np.random.default_rng(seed).normal(0.0, level, clean.shape), 0.0, 1.0)
    return np.rint(noisy * 65535).astype(np.uint16)


def noisy_cases(images, sizes, levels):
    """``(name, size, level, clean, pixels)`` of every case, images outermost: the clean crop and its noisy
    16-bit pixels (`noisy_pixels` with `case_seed`). A generator."""
    sizes, levels = list(sizes), list(levels)  # each read once per image
    for name in images:
        for size in sizes:
            for level in levels:
                clean = crop(name, size)
                yield name, size, level, clean, noisy_pixels(clean, level, case_seed(name, size, level))


def scores(clean, estimate, seconds) -> dict:
    estimate = np.clip(estimate, 0.0, 1.0)
    return {"psnr_db": float(peak_signal_noise_ratio(clean, estimate, data_range=1.0)),
            "ssim": float(structural_similarity(clean, estimate, data_range=1.0)), "seconds": seconds}


def by_rule(noisy, noise, make, values):
    """The value of ``values`` whose ``make(y, value)`` has the least recorrupted risk: the rule the
    service tunes by, for the baselines that have one parameter."""
    risks, _ = recorrupted_risks(lambda y1, _s1: {v: make(y1, v) for v in values}, noisy, noise, draws=DRAWS)
    return min(risks, key=risks.get)


def method_settings(unit: np.ndarray, info: dict, method: str) -> dict:
    """``method``'s best row of the service's tuning table (width, rank, options); for a method the
    service's default sweep leaves out (`kpca.images.tuning.SWEEP`), that method tuned alone, as a request
    naming it is (``{"method": method}``), on the service's noise estimate."""
    row = next((row for row in info["risks"] if row["method"] == method), None)
    if row is not None:
        return row
    base = PatchSettings(patch=PATCH, stride=STRIDE, tile=info["chosen"]["tile"])
    tuned = tune_patches(unit, base, {"method": method}, noise=info["noise"])
    return {"width": tuned.settings.width, "n_components": tuned.settings.n_components,
            "options": dict(tuned.settings.options)}


def run_case(clean: np.ndarray, level: float, seed: int, data_dir: str) -> tuple[dict, dict]:
    pixels = noisy_pixels(clean, level, seed)
    unit = pixels / 65535.0
    rows, pictures = {"noisy": scores(clean, unit, 0.0)}, {"noisy": unit}

    t0 = time.perf_counter()
    out, info = denoise_with_own_models(data_dir, pixels)
    rows["service"] = {**scores(clean, out / 65535.0, time.perf_counter() - t0), "chosen": info["chosen"],
                       "noise_estimate": info["noise"], "steps": info["steps"],
                       "estimated_psnr_db": next(row["psnr_db"] for row in info["risks"] if all(
                           row[k] == info["chosen"][k] for k in ("width", "n_components", "method")))}
    pictures["service"] = out / 65535.0
    noise = info["noise"]

    t0 = time.perf_counter()
    r = linear_rank(unit, PATCH, STRIDE, noise)
    pictures["linear_pca"] = linear_pca_denoise(unit, PATCH, STRIDE, r)
    rows["linear_pca"] = {**scores(clean, pictures["linear_pca"], time.perf_counter() - t0), "n_components": r}

    chosen_method = info["chosen"]["method"]
    for method in ("fixed-point", "kwok-tsang", "gradient", "learned"):
        best = method_settings(unit, info, method)
        settings = PatchSettings(patch=PATCH, stride=STRIDE, width=best["width"], n_components=best["n_components"],
                                 method=method, options=best["options"])
        if method == chosen_method and not info["chosen"].get("second_stage"):  # else the first stage alone
            rows[f"tuned/{method}"] = {**rows["service"], "settings": settings.to_dict()}
            continue
        t0 = time.perf_counter()
        result = denoise_image(unit, settings, noise)
        rows[f"tuned/{method}"] = {**scores(clean, result, time.perf_counter() - t0), "settings": settings.to_dict()}

    t0 = time.perf_counter()
    sigma = float(estimate_sigma(unit))
    pictures["nl_means"] = denoise_nl_means(unit, h=0.8 * sigma, sigma=sigma, fast_mode=True, patch_size=5,
                                            patch_distance=6)
    rows["nl_means"] = {**scores(clean, pictures["nl_means"], time.perf_counter() - t0), "sigma_estimate": sigma}

    t0 = time.perf_counter()
    weight = by_rule(unit, noise, lambda y, w: denoise_tv_chambolle(y, weight=w), (0.02, 0.04, 0.06, 0.1, 0.15, 0.2, 0.3))
    rows["tv_chambolle"] = {**scores(clean, denoise_tv_chambolle(unit, weight=weight), time.perf_counter() - t0),
                            "weight": weight}
    return rows, pictures


def picture(pictures: dict, title: str, paths) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = (("noisy", "noisy"), ("linear_pca", "linear PCA"), ("service", "the service's defaults"),
             ("nl_means", "non-local means"))
    fig, axes = plt.subplots(1, 4, figsize=(12, 3.6))
    for ax, (key, label) in zip(axes, names):
        ax.imshow(np.clip(pictures[key][0], 0, 1), cmap="gray", vmin=0, vmax=1)
        ax.set_title(f"{label}\n{pictures[key][1]:.2f} dB", fontsize=9)
        ax.axis("off")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    for path in paths:
        fig.savefig(path, dpi=100)
    plt.close(fig)


def add_case_arguments(ap: argparse.ArgumentParser) -> None:
    """``--images``, ``--sizes`` and ``--levels``: which of the table's cases to run (all by default), as
    `noisy_cases` and `bench.wiener_probe.first_stage_cases` read them."""
    ap.add_argument("--images", default=",".join(IMAGES))
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--levels", default=",".join(map(str, LEVELS)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_case_arguments(ap)
    ap.add_argument("--picture", default="camera,128,0.1", help="image,size,level of the row drawn")
    ap.add_argument("--name", default="denoise_quality", help="name of the JSON result")
    ap.add_argument("--merge", default="", help="comma-separated part names to merge into denoise_quality.json")
    args = ap.parse_args()
    if args.merge:
        return merge(args.merge.split(","))
    import tempfile

    data_dir = tempfile.mkdtemp(prefix="denoise-quality-")
    cases, start = [], time.perf_counter()
    shown = args.picture.split(",")
    for name in args.images.split(","):
        for size in map(int, args.sizes.split(",")):
            for level in map(float, args.levels.split(",")):
                clean = crop(name, size)
                rows, pictures = run_case(clean, level, seed=case_seed(name, size, level), data_dir=data_dir)
                case = {"image": name, "size": size, "noise": level, "rows": rows,
                        "service_minus_linear_db": rows["service"]["psnr_db"] - rows["linear_pca"]["psnr_db"],
                        "service_minus_nl_means_db": rows["service"]["psnr_db"] - rows["nl_means"]["psnr_db"]}
                cases.append(case)
                print({k: case[k] for k in ("image", "size", "noise", "service_minus_linear_db",
                                            "service_minus_nl_means_db")}, flush=True)
                if [name, str(size), str(level)] == shown:
                    chose = rows["service"]["chosen"]
                    title = (f"{name} {size}x{size}, Gaussian noise {level}; the service chose {chose['method']}, "
                             f"{chose['n_components']} components")
                    picture({k: (pictures[k], rows[k]["psnr_db"]) for k in pictures}, title,
                            [output_path(f"{args.name}.png"), ROOT / "docs" / "denoising_row.png"])
    save(args.name, summarise(cases, time.perf_counter() - start))


def summarise(cases: list, seconds: float) -> dict:
    """The result document: every case, and the figures against the goals."""
    linear = [c["service_minus_linear_db"] for c in cases]
    nlm = [c["service_minus_nl_means_db"] for c in cases]
    mean = {key: float(np.mean([c["rows"][key]["psnr_db"] for c in cases])) for key in cases[0]["rows"]}
    return {"patch": PATCH, "stride": STRIDE, "cases": cases, "mean_psnr_db": mean,
           "summary": {"cases": len(cases), "min_service_minus_linear_db": min(linear),
                       "cases_service_at_least_0.5_db_above_linear": int(sum(v >= 0.5 for v in linear)),
                       "mean_service_minus_nl_means_db": float(np.mean(nlm)),
                       "goal_linear_met": bool(min(linear) >= 0.5), "goal_nl_means_met": bool(np.mean(nlm) >= -0.5)},
            "seconds": seconds}


def merge(parts: list[str]) -> None:
    """denoise_quality.json from the parts' results, run side by side (``--name``)."""
    from bench._common import results_dir

    docs = [json.loads((results_dir() / f"{part}.json").read_text()) for part in parts]
    save("denoise_quality", summarise([c for d in docs for c in d["cases"]], sum(d["seconds"] for d in docs)))


if __name__ == "__main__":
    main()
