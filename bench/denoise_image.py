"""Multipatch image denoising (seed 000 §5.2) on scikit-image's `camera`.

The 512 x 512 camera image is reduced to 256 x 256 (block mean), Gaussian
noise is added, and the image is split into four 128 x 128 sub-images. For
each, 11 x 11 patches on a 2-pixel grid (``--stride``: 3600 vectors of 121
values) train KHA-SMD (Gaussian kernel, r = 20); every noisy patch is replaced by the
pre-image of its projection and overlaps are averaged. Reported per setting:
SNR (dB) of the noisy input, of linear PCA with the same r, of KHA-SMD after
10 and 50 passes for each pre-image method, and the excess reconstruction
error (eq. 22) of the KHA-SMD fits. Writes bench/results/denoise_image_sigma{S}.json
and PNGs (clean, noisy, linear PCA, best kernel result); prints the JSON (`bench._common.save`).

    python bench/denoise_image.py [--noise 0.1] [--sigma 1.0] [--r 20] [--methods fixed-point,kwok-tsang,learned]
    python bench/denoise_image.py --stride 4 --passes 2,5    # a quick run: 900 patches per sub-image
    python bench/denoise_image.py --sweep    # what closes the gap to linear PCA: kernel width, r, pre-image

``--sweep`` uses the exact kernel PCA on one sub-image (top left) for a grid
of kernel widths and ranks and writes bench/results/denoise_image_sweep.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
from skimage import data  # noqa: E402

from bench._common import output_path, save, start_iterative  # noqa: E402
from kpca.defaults import default_block_size  # noqa: E402
from kpca.driver import run_passes  # noqa: E402
from kpca.images.patches import (  # noqa: E402
    assemble_patches, downscale_mean, extract_patches, snr_db, split_quadrants)
from kpca.kernels import KernelSpec  # noqa: E402
from kpca.metrics import excess_error, minimal_error  # noqa: E402
from kpca.model import KernelModel  # noqa: E402
from kpca.noise import gaussian_noise  # noqa: E402
from kpca.preimage import LearnedInverse, reconstruct  # noqa: E402
from kpca.rows import KernelRows  # noqa: E402

PATCH, STRIDE = 11, 2


def linear_pca_denoise(P, r):
    mean = P.mean(axis=0)
    U, S, Vt = np.linalg.svd(P - mean, full_matrices=False)
    return (P - mean) @ Vt[:r].T @ Vt[:r] + mean


def join_quadrants(parts, shape) -> np.ndarray:
    """Inverse of `kpca.images.patches.split_quadrants`: the image of the given shape from its four parts.

    Parameters
    ----------
    parts : sequence of four ndarrays
        Top-left, top-right, bottom-left, bottom-right, as from `split_quadrants`.
    shape : tuple of int
        Shape (H, W) or (H, W, C) of the original image.

    Returns
    -------
    ndarray of shape `shape`, dtype of the parts (promoted if they differ).
    """
    shape = tuple(int(s) for s in shape)
    if len(parts) != 4:
        raise ValueError(f"parts: expected 4 sub-images, got {len(parts)}")
    if len(shape) not in (2, 3):
        raise ValueError(f"shape: expected (H, W) or (H, W, C), got {shape}")
    H, W = shape[:2]
    h, w = (H + 1) // 2, (W + 1) // 2
    tail = shape[2:]
    expected = [(h, w), (h, W - w), (H - h, w), (H - h, W - w)]
    parts = [np.asarray(part) for part in parts]
    for k, (part, hw) in enumerate(zip(parts, expected)):
        if part.shape != hw + tail:
            raise ValueError(f"parts: part {k} has shape {part.shape}, expected {hw + tail} for image shape {shape}")
    out = np.empty(shape, dtype=np.result_type(*parts))
    out[:h, :w], out[:h, w:], out[h:, :w], out[h:, w:] = parts
    return out


def save_png(image, path):
    from PIL import Image

    Image.fromarray(np.clip(np.round(image * 255), 0, 255).astype(np.uint8)).save(path)


def sweep(noise: float, stride: int = STRIDE) -> None:
    from kpca.estimator import KernelHebbianPCA

    clean = split_quadrants(downscale_mean(data.camera() / 255.0, 2))[0]
    noisy = gaussian_noise(clean, noise, np.random.default_rng(0))
    P, grid = extract_patches(noisy, PATCH, stride)
    runs = [{"method": "noisy", "snr_db": snr_db(clean, noisy)}]
    for r in (20, 40):
        runs.append({"method": "linear_pca", "r": r, "snr_db": snr_db(clean, assemble_patches(linear_pca_denoise(P, r),
                                                                                            grid))})
        for sigma in (1.0, 2.0, 3.0, 5.0, 8.0):
            model = KernelHebbianPCA(r, sigma=sigma, solver="exact").fit(P).model_
            for method in ("fixed-point", "learned"):
                if method == "learned":
                    out = LearnedInverse.fit(model, rng=np.random.default_rng(0))(P)
                else:
                    out = reconstruct(model, P, method=method)
                runs.append({"method": f"exact-kpca/{method}", "r": r, "sigma": sigma,
                             "snr_db": snr_db(clean, assemble_patches(out, grid))})
                print(runs[-1], flush=True)
    doc = {"image": "camera 256 x 256, top-left 128 x 128 sub-image", "noise_sigma": noise, "patch": PATCH,
           "stride": stride, "runs": runs}
    save("denoise_image_sweep", doc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", action="store_true", help="kernel width / rank / pre-image sweep on one sub-image")
    ap.add_argument("--noise", type=float, default=0.1, help="Gaussian noise sigma, pixels in [0, 1]")
    ap.add_argument("--sigma", type=float, default=1.0, help="Gaussian kernel width (seed 000 used 1)")
    ap.add_argument("--r", type=int, default=20)
    ap.add_argument("--passes", default="10,50")
    ap.add_argument("--methods", default="fixed-point,kwok-tsang,learned")
    ap.add_argument("--stride", type=int, default=STRIDE, help="pixels between patches (4: a quarter of the patches)")
    args = ap.parse_args()
    if args.sweep:
        return sweep(args.noise, args.stride)
    checkpoints = [int(p) for p in args.passes.split(",")]
    methods = args.methods.split(",")
    clean = downscale_mean(data.camera() / 255.0, 2)
    noisy = gaussian_noise(clean, args.noise, np.random.default_rng(0))
    spec = KernelSpec("gaussian", sigma=args.sigma)
    results = {"linear_pca": [], **{f"kha-smd/{p}/{m}": [] for p in checkpoints for m in methods}}
    fits = []
    t_start = time.perf_counter()
    for q, part in enumerate(split_quadrants(noisy)):
        P, grid = extract_patches(part, PATCH, args.stride)
        results["linear_pca"].append(assemble_patches(linear_pca_denoise(P, args.r), grid))
        rows = KernelRows(P, spec)
        c = rows.fit_centering()
        Kc = rows.dense()
        e_min = minimal_error(scipy.linalg.eigvalsh(Kc), args.r)
        params, state = start_iterative("kha-smd", rows, args.r, c.mean_diagonal, seed=q, passes=max(checkpoints))
        block = default_block_size(rows.n_rows)
        fit = {"quadrant": q, "patches": int(P.shape[0]), "params": params, "passes": {}}
        for p in checkpoints:
            t0 = time.perf_counter()
            state, _ = run_passes(rows, state, p, block)
            fit["passes"][p] = {"excess_error": excess_error(Kc, state["AK"], e_min),
                                "fit_s": time.perf_counter() - t0}
            model = KernelModel(rows=rows, A=state["A"].copy(), AK=state["AK"].copy())
            for method in methods:
                t0 = time.perf_counter()
                if method == "learned":
                    cleaned = LearnedInverse.fit(model, rng=np.random.default_rng(q))(P)
                else:
                    cleaned = reconstruct(model, P, method=method)
                results[f"kha-smd/{p}/{method}"].append(assemble_patches(cleaned, grid))
                fit["passes"][p][f"{method}_s"] = time.perf_counter() - t0
        fits.append(fit)
        print(fit, flush=True)
    images = {k: join_quadrants(v, clean.shape) for k, v in results.items()}
    snr = {"noisy": snr_db(clean, noisy), **{k: snr_db(clean, v) for k, v in images.items()}}
    snr_centered = {"noisy": snr_db(clean, noisy, centered=True),
                    **{k: snr_db(clean, v, centered=True) for k, v in images.items()}}
    best = max((k for k in images if k.startswith("kha-smd")), key=lambda k: snr[k])
    for name, image in (("clean", clean), ("noisy", noisy), ("linear_pca", images["linear_pca"]),
                        ("kernel_best", images[best])):
        save_png(image, output_path(f"denoise_image_sigma{args.sigma:g}_{name}.png"))
    doc = {"image": "skimage camera, 256 x 256", "noise_sigma": args.noise, "kernel": spec.to_dict(),
           "r": args.r, "patch": PATCH, "stride": args.stride, "snr_db": snr, "snr_db_mean_removed": snr_centered,
           "best_kernel_setting": best, "fits": fits, "seconds": time.perf_counter() - t_start}
    save(f"denoise_image_sigma{args.sigma:g}", doc)


if __name__ == "__main__":
    main()
