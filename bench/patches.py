"""Patch extraction and assembly: ours (`kpca.images.patches`) against scikit-learn's stride-1 functions.

One grey image (``--size`` square, normal noise), ``--patch`` square patches at stride 1 (the only
stride `sklearn.feature_extraction.image.extract_patches_2d` and `reconstruct_from_patches_2d` take),
and ours again at ``--stride`` (the multipatch experiment's two-pixel grid). Each call is timed as the
best of ``--repeat`` runs; the largest difference from scikit-learn's results is reported beside the
times. Prints JSON and writes bench/results/patches.json (`bench._common.save`).

    python bench/patches.py [--size 512] [--patch 8] [--stride 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402
from sklearn.feature_extraction.image import extract_patches_2d, reconstruct_from_patches_2d  # noqa: E402

from bench._common import best_of, save  # noqa: E402
from kpca.images.patches import assemble_patches, extract_patches  # noqa: E402


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--patch", type=int, default=8)
    parser.add_argument("--stride", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    image = rng.normal(size=(args.size, args.size))
    p = args.patch

    ours_extract_s, (patches, grid) = best_of(args.repeat, lambda: extract_patches(image, p, 1))
    sk_extract_s, theirs = best_of(args.repeat, lambda: extract_patches_2d(image, (p, p)))
    noisy = patches + rng.normal(size=patches.shape)
    ours_assemble_s, ours_image = best_of(args.repeat, lambda: assemble_patches(noisy, grid))
    sk_assemble_s, sk_image = best_of(args.repeat, lambda: reconstruct_from_patches_2d(
        noisy.reshape(theirs.shape), image.shape))
    strided_extract_s, (strided, strided_grid) = best_of(args.repeat, lambda: extract_patches(image, p, args.stride))
    strided_assemble_s, _ = best_of(args.repeat, lambda: assemble_patches(strided, strided_grid))
    payload = {
        "image": [args.size, args.size], "patch": p, "repeat": args.repeat,
        "stride_1": {
            "n_patches": int(patches.shape[0]),
            "extract_s": {"ours": ours_extract_s, "sklearn": sk_extract_s},
            "assemble_s": {"ours": ours_assemble_s, "sklearn": sk_assemble_s},
            "max_abs_difference": {
                "extract": float(np.max(np.abs(patches - theirs.reshape(len(theirs), -1)))),
                "assemble": float(np.max(np.abs(ours_image - sk_image)))},
        },
        f"stride_{args.stride}": {"n_patches": int(strided.shape[0]),
                                  "extract_s": {"ours": strided_extract_s},
                                  "assemble_s": {"ours": strided_assemble_s}},
    }
    save("patches", payload)
    return payload


if __name__ == "__main__":
    main()
