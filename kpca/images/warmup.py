"""Compile (and cache) the image wing's jitted loops before the first image request: ``python -m kpca.images.warmup``.

`kpca.warmup` compiles the core's kernels (the core never imports its wings); this does the same for what only
image requests run: the patch sums (`kpca.images.patch_bands`), the fixed-point step's weights
(`kpca.images.tile_preimages`) and Kwok-Tsang's neighbours (`kpca.preimage.kwok_tsang.nearest`), by denoising a
tiny image with one candidate of each kind. A worker runs it at its start after the core's
(`workers.plugins.WarmKernels`); ``make warm`` before the tests. Cost: their compilation on an empty cache (a few
seconds), a fraction of a second on a full one.
"""

from __future__ import annotations

import numpy as np

from kpca.images.denoising import Candidate, PatchSettings, denoise_candidates


def warm_images() -> list[str]:
    """Denoise a 24 x 24 random image with the fixed point and Kwok-Tsang on tiles of 12 pixels: every jitted loop
    of an image request loaded or compiled. The candidates run."""
    image = np.random.default_rng(0).random((24, 24))
    candidates = [Candidate(2, "fixed-point", {"n_iter": 1}), Candidate(2, "kwok-tsang", {"n_neighbors": 5})]
    denoise_candidates(image, PatchSettings(patch=5, stride=1, width=0.75, tile=12), 0.1, candidates, threads=1)
    return [f"{c.method}/{c.n_components}" for c in candidates]


if __name__ == "__main__":
    print("warmed:", ", ".join(warm_images()))
