"""Hyperresolution of held-out face images from a kernel PCA model of other faces' patches, with and
without the data-consistency constraint, against replication, bicubic interpolation and linear PCA
(issue 27; seed 002 §4.2).

The class: the first 100 images of scikit-image's bundled ``lfw_subset`` are faces (25 x 25, cropped
to 24 x 24), frontal and roughly aligned at one scale by the LFW pipeline, so patches of one face
look like patches of another at the same place. A fixed-seed split: 80 faces (and their mirror
images) train, 20 other images are upscaled. It is fair to every method: each sees the same block-mean
low-resolution input (``x2``: 12 x 12, ``x4``: 6 x 6); interpolation needs no training; the two
patch models (linear PCA and kernel PCA of 5 x 5 patches) learn from the same training patches; the
kernel width, rank and pre-image, and linear PCA's rank, are chosen on the training faces alone (a
validation split of them, downsampled the same way), never on the held-out faces.

Rows, each with MSE (pixels in [0, 1]), SSIM and seconds, at x2 and x4: ``replication``, ``bicubic``,
``bicubic+constraint`` (bicubic back-projected, `kpca.images.hyperresolution.back_project`), ``linear_pca`` and
``linear_pca+constraint`` (the same (H2) iteration with the linear reconstruction), ``kernel`` (seed
002: reconstruct the replicated image once) and ``kernel+constraint`` ((H2) from the back-projected
cubic-spline start, the service's default). Both constrained patch paths start from the same spline.
Goal: the kernel path with the constraint below bicubic's MSE at x2. Writes
bench/results/hyperresolution.json.

    python bench/hyperresolution.py
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # as on the service's workers
    os.environ.setdefault(_variable, "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402
from skimage.metrics import structural_similarity  # noqa: E402
from skimage.transform import resize  # noqa: E402

from bench._common import save  # noqa: E402
from kpca.images.hyperresolution import back_project, hyperresolve, patch_reconstruction  # noqa: E402
from kpca.images.patches import downscale_mean, extract_patches, upscale_replicate  # noqa: E402
from kpca.images.denoising import fit_patch_model, preimages  # noqa: E402
from kpca.preimage import LearnedInverse  # noqa: E402

SIDE, PATCH, STRIDE = 24, 5, 1
N_FACES, N_TEST = 100, 20
MAX_ROWS = 2000
FACTORS = (2, 4)
ITERATIONS = 5


def faces(seed: int = 0):
    from skimage.data import lfw_subset

    images = lfw_subset()[:N_FACES, :SIDE, :SIDE].astype(np.float64)
    order = np.random.default_rng(seed).permutation(N_FACES)
    train, test = images[order[N_TEST:]], images[order[:N_TEST]]
    return np.concatenate([train, train[:, :, ::-1]]), test


def training_patches(images: np.ndarray, seed: int) -> np.ndarray:
    rows = np.concatenate([extract_patches(im, PATCH, STRIDE)[0] for im in images])
    pick = np.random.default_rng(seed).choice(len(rows), min(MAX_ROWS, len(rows)), replace=False)
    return rows[np.sort(pick)]


def linear_reconstruction(rows: np.ndarray, r: int):
    mean = rows.mean(axis=0)
    V = np.linalg.svd(rows - mean, full_matrices=False)[2][:r]
    return lambda P: (P - mean) @ V.T @ V + mean


def upscale_all(method, lows, factor):
    return np.stack([method(low, factor) for low in lows])


def score(truth, estimates, seconds) -> dict:
    mse = float(np.mean((truth - estimates) ** 2))
    ssim = float(np.mean([structural_similarity(t, np.clip(e, 0, 1), data_range=1.0, win_size=7)
                          for t, e in zip(truth, estimates)]))
    return {"mse": mse, "ssim": ssim, "seconds": seconds}


def kernel_path(rows, sigma, r, method, options, constrained):
    model = fit_patch_model(rows, sigma, r)
    if method == "learned":  # the map is fitted once per model, as the service's workers keep it
        inverse = LearnedInverse.fit(model, n_samples=MAX_ROWS, rng=np.random.default_rng(0))
        reconstruct = patch_reconstruction(inverse, PATCH, STRIDE)
    else:
        reconstruct = patch_reconstruction(lambda P: preimages(model, P, method, options), PATCH, STRIDE)
    start = "spline" if constrained else "replicate"  # the service's: seed 002's replication when unconstrained
    return lambda low, f: hyperresolve(low, f, reconstruct, constrained, ITERATIONS, start=start)


def choose_kernel(train: np.ndarray, factor: int, seed: int) -> dict:
    """Kernel width (times the median patch distance), rank and pre-image by the constrained MSE on a
    validation split of the training faces (their other faces train): the held-out faces are not seen."""
    from kpca.kernels import median_distance

    order = np.random.default_rng(seed + 1).permutation(len(train) // 2)
    valid_idx = order[:12]
    fit_idx = np.setdiff1d(np.arange(len(train)), np.concatenate([valid_idx, valid_idx + len(train) // 2]))
    rows = training_patches(train[fit_idx], seed)
    median = median_distance(rows[:1000])
    valid = train[valid_idx]
    lows = np.stack([downscale_mean(v, factor) for v in valid])
    best = None
    for scale in (0.25, 0.5, 1.0):
        for r in (16, 48):
            for method, options in (("fixed-point", {"n_iter": 3}), ("learned", {})):
                up = kernel_path(rows, scale * median, r, method, options, True)
                mse = float(np.mean((upscale_all(up, lows, factor) - valid) ** 2))
                if best is None or mse < best["validation_mse"]:
                    best = {"sigma_scale": scale, "n_components": r, "method": method, "options": options,
                            "validation_mse": mse}
    best["sigma"] = best["sigma_scale"] * median_distance(training_patches(train, seed)[:1000])
    return best


def choose_linear(train: np.ndarray, factor: int, seed: int) -> int:
    """Linear PCA's rank by the same validation split and constrained MSE as `choose_kernel`."""
    order = np.random.default_rng(seed + 1).permutation(len(train) // 2)
    valid_idx = order[:12]
    fit_idx = np.setdiff1d(np.arange(len(train)), np.concatenate([valid_idx, valid_idx + len(train) // 2]))
    rows = training_patches(train[fit_idx], seed)
    valid = train[valid_idx]
    lows = np.stack([downscale_mean(v, factor) for v in valid])
    errors = {}
    for r in (2, 4, 8, 12, 16, 20):
        linear = patch_reconstruction(linear_reconstruction(rows, r), PATCH, STRIDE)
        out = upscale_all(lambda low, f: hyperresolve(low, f, linear, True, ITERATIONS, start="spline"), lows, factor)
        errors[r] = float(np.mean((out - valid) ** 2))
    return min(errors, key=errors.get)


def main():
    start = time.perf_counter()
    train, test = faces()
    rows = training_patches(train, 0)
    results = {}
    for factor in FACTORS:
        lows = np.stack([downscale_mean(t, factor) for t in test])
        chosen = choose_kernel(train, factor, factor)
        linear_rank = choose_linear(train, factor, factor)
        linear = patch_reconstruction(linear_reconstruction(rows, linear_rank), PATCH, STRIDE)
        methods = {
            "replication": lambda low, f: upscale_replicate(low, f),
            "bicubic": lambda low, f: resize(low, (low.shape[0] * f, low.shape[1] * f), order=3, mode="edge",
                                             anti_aliasing=False),
            "bicubic+constraint": lambda low, f: back_project(
                resize(low, (low.shape[0] * f, low.shape[1] * f), order=3, mode="edge", anti_aliasing=False), low, f),
            "linear_pca": lambda low, f: hyperresolve(low, f, linear, False),
            "linear_pca+constraint": lambda low, f: hyperresolve(low, f, linear, True, ITERATIONS, start="spline"),
            "kernel": kernel_path(rows, chosen["sigma"], chosen["n_components"], chosen["method"], chosen["options"],
                                  False),
            "kernel+constraint": kernel_path(rows, chosen["sigma"], chosen["n_components"], chosen["method"],
                                             chosen["options"], True),
        }
        table = {}
        for name, method in methods.items():
            t0 = time.perf_counter()
            out = upscale_all(method, lows, factor)
            table[name] = score(test, out, time.perf_counter() - t0)
            table[name]["max_block_mean_error"] = float(np.max(np.abs(
                np.stack([downscale_mean(o, factor) for o in out]) - lows)))
        bicubic = table["bicubic"]["mse"]
        for row in table.values():
            row["mse_over_bicubic"] = row["mse"] / bicubic
        results[f"x{factor}"] = {"chosen": chosen, "linear_rank": linear_rank, "table": table}
        print(factor, {k: round(v["mse_over_bicubic"], 3) for k, v in table.items()}, flush=True)
    doc = {"data": "skimage lfw_subset faces 0-99, 24 x 24; 80 train (+ mirrors), 20 held out",
           "patch": PATCH, "stride": STRIDE, "training_rows": MAX_ROWS, "iterations": ITERATIONS,
           "results": results,
           "goal_x2_kernel_constraint_below_bicubic": bool(results["x2"]["table"]["kernel+constraint"]["mse"]
                                                           < results["x2"]["table"]["bicubic"]["mse"]),
           "seconds": time.perf_counter() - start}
    save("hyperresolution", doc)


if __name__ == "__main__":
    main()
