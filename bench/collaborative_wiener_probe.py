"""Would BM3D's collaborative Wiener step close issue 27's last two cases? A probe (not kept).

Issue 27's goal is the service with defaults at least 0.5 dB above linear PCA of the same patches on
every case of bench/denoise_quality.py; two cases miss it: cell 128 at noise 0.05 and gravel 256 at
0.2. This probe runs BM3D's second step (Dabov et al., "Image denoising by sparse 3-D transform-domain
collaborative filtering", IEEE TIP 2007) over the service's answer as the pilot:

    for reference patches on a grid of step 3: the n patches of the pilot nearest to it (squared
    distance) within +-R pixels, their group G_p and the noisy image's group G_y at the same places;
    T = the orthonormal 3-D DCT (each k x k patch, then along the group);
    G = T^-1 (w * T G_y),   w = (T G_p)^2 / ((T G_p)^2 + s^2)          (the Wiener gain, per coefficient)
    each estimate added back with the weight 1 / (s^2 sum w^2), and divided by the weights' sum.

Where `kpca.images.wiener` shrinks each patch alone in the basis of the pilot's patches, this shrinks along
the group too, as if averaging similar patches; the service's second stage and its variants stay as
they are. The pilot is the service's answer as the route gives it (first stage, then `auto`'s second
stage); s the service's noise estimate; only the scores read the clean image. PSNR is in dB over
linear PCA (rank by `kpca.images.tuning.linear_rank`, bench/denoise_quality.py's baseline). ``--cache`` as
bench/wiener_probe.py's (the service's first stage, the slow part). Pure numpy and scipy.fft.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from numpy.lib.stride_tricks import sliding_window_view  # noqa: E402
from scipy.fft import dctn, idctn  # noqa: E402

from bench._common import save  # noqa: E402
from bench.denoise_quality import PATCH, STRIDE  # noqa: E402
from bench.wiener_probe import first_stage_cases, psnr  # noqa: E402
from kpca.images.denoising import linear_pca_denoise  # noqa: E402
from kpca.images.second_stage import apply_second_stage, second_stage_risks  # noqa: E402
from kpca.images.tuning import linear_rank  # noqa: E402

CASES = "cell:128:0.05,gravel:256:0.2"
GRID = ((8, 32), (8, 64), (8, 128), (12, 32), (12, 64), (16, 32))  # (patch side k, group size n)


def collaborative_wiener(noisy, pilot, k: int, noise: float, n: int, step: int = 3, reach: int = 12,
                         batch: int = 1024) -> np.ndarray:
    """BM3D's second step over ``pilot`` (module note). Cost per reference patch: (2 reach + 1)^2 distances of
    k^2 values, and two 3-D DCTs of n k^2 values."""
    H, W = noisy.shape
    Hp, Wp, m = H - k + 1, W - k + 1, k * k
    Pp = sliding_window_view(pilot, (k, k)).reshape(Hp * Wp, m)
    Py = sliding_window_view(noisy, (k, k)).reshape(Hp * Wp, m)
    ri = np.unique(np.r_[np.arange(0, Hp, step), Hp - 1])
    rj = np.unique(np.r_[np.arange(0, Wp, step), Wp - 1])
    RI, RJ = (a.ravel() for a in np.meshgrid(ri, rj, indexing="ij"))
    side_i, side_j = min(2 * reach + 1, Hp), min(2 * reach + 1, Wp)
    di, dj = (a.ravel() for a in np.meshgrid(np.arange(side_i), np.arange(side_j), indexing="ij"))
    n = min(n, side_i * side_j)
    acc, weight = np.zeros(Hp * Wp * m), np.zeros(Hp * Wp * m)
    s2 = float(noise) ** 2
    for b0 in range(0, len(RI), batch):
        bi, bj = RI[b0:b0 + batch], RJ[b0:b0 + batch]
        i0, j0 = np.clip(bi - reach, 0, Hp - side_i), np.clip(bj - reach, 0, Wp - side_j)
        candidates = (i0[:, None] + di[None]) * Wp + (j0[:, None] + dj[None])
        distance = ((Pp[candidates] - Pp[bi * Wp + bj][:, None]) ** 2).sum(-1)
        group = np.take_along_axis(candidates, np.argsort(distance, axis=1, kind="stable")[:, :n], 1)
        Tp = dctn(Pp[group].reshape(-1, n, k, k), axes=(1, 2, 3), norm="ortho")
        Ty = dctn(Py[group].reshape(-1, n, k, k), axes=(1, 2, 3), norm="ortho")
        gain = Tp * Tp / (Tp * Tp + s2)
        estimate = idctn(gain * Ty, axes=(1, 2, 3), norm="ortho").reshape(-1, n, m)
        w = 1.0 / np.maximum(s2 * (gain * gain).sum((1, 2, 3)), 1e-300)
        where = (group[:, :, None] * m + np.arange(m)[None, None]).ravel()
        np.add.at(acc, where, (estimate * w[:, None, None]).ravel())
        np.add.at(weight, where, np.broadcast_to(w[:, None, None], estimate.shape).ravel())
    out, total = np.zeros((H, W)), np.zeros((H, W))
    A, C = acc.reshape(Hp, Wp, k, k), weight.reshape(Hp, Wp, k, k)
    for a in range(k):
        for b in range(k):
            out[a:a + Hp, b:b + Wp] += A[:, :, a, b]
            total[a:a + Hp, b:b + Wp] += C[:, :, a, b]
    return np.where(total > 0, out / np.maximum(total, 1e-300), pilot)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=CASES, help="image:size:noise, comma separated")
    ap.add_argument("--cache", default="", help="folder of the service's first stages (bench/wiener_probe.py)")
    ap.add_argument("--name", default="collaborative_wiener_probe", help="name of the JSON result")
    args = ap.parse_args()
    cache = Path(args.cache) if args.cache else None
    data_dir = tempfile.mkdtemp(prefix="collaborative-probe-")
    cases = []
    for spec in args.cases.split(","):
        image, size, level = spec.split(":")
        one = SimpleNamespace(images=image, sizes=size, levels=level)
        for name, size, level, clean, unit, first, noise, settings, _ in first_stage_cases(one, cache, data_dir):
            linear = psnr(clean, linear_pca_denoise(unit, PATCH, STRIDE, linear_rank(unit, PATCH, STRIDE, noise)))
            stage = second_stage_risks(unit, settings, noise)["chosen"]
            service = apply_second_stage(unit, first, settings, noise, stage)
            row = {"image": name, "size": size, "noise": level, "noise_estimate": noise, "second_stage": stage,
                   "over_linear_pca_db": {"service": psnr(clean, service) - linear}, "seconds": {}}
            for k, n in GRID:
                start = time.perf_counter()
                out = collaborative_wiener(unit, service, k, noise, n)
                row["over_linear_pca_db"][f"collaborative k={k} n={n}"] = psnr(clean, out) - linear
                row["seconds"][f"collaborative k={k} n={n}"] = time.perf_counter() - start
            cases.append(row)
            print(name, size, level, {key: round(v, 2) for key, v in row["over_linear_pca_db"].items()}, flush=True)
    best = {c["image"] + f" {c['size']} {c['noise']}": max(c["over_linear_pca_db"].values()) for c in cases}
    save(args.name, {"patch": PATCH, "stride": STRIDE, "grid": [list(g) for g in GRID], "cases": cases,
                     "best_over_linear_pca_db": best, "goal_db": 0.5})


if __name__ == "__main__":
    main()
