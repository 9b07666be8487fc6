"""The leading eigenpairs of a small kernel matrix on one thread and on two at once: ARPACK, whose loop holds
Python's lock, against LAPACK's MRRR called without it (`kpca._lapack.leading_evr`), issue 55.

For each order n (``--sizes``) the centred Gaussian kernel matrix K' of n noisy 7 x 7 patches of scikit-image's
camera (noise 0.1, width 0.5 of `kpca.images.denoising`'s (D1), as an image tile's model is fitted) and q = 8
pairs: the seconds per matrix of `kpca._dense.leading_eigh` on its ARPACK path and inside
`kpca._dense.unlocked_eigh` (LAPACK without the lock), best of ``--repeat``, first one call after another on
one thread, then 16 calls on two threads at once (wall time over 16). `kpca._dense.NOGIL_MAX_ORDER` is chosen
from it. BLAS on one thread, as the tiles run it. Writes bench/results/unlocked_eigh.json.

    python bench/unlocked_eigh.py [--sizes 256,512,640,768,1024] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # as on the service's workers
    os.environ.setdefault(_variable, "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402
from skimage import data  # noqa: E402

from bench._common import save  # noqa: E402
from kpca import _dense  # noqa: E402
from kpca.images.patches import extract_patches  # noqa: E402
from kpca.kernels import KernelSpec  # noqa: E402
from kpca.rows import KernelRows  # noqa: E402

NOISE, WIDTH, PATCH, Q, CALLS = 0.1, 0.5, 7, 8, 16


def patch_kernel(n: int) -> np.ndarray:
    """K' of n patches sampled (fixed seed) from a noisy crop of camera, Gaussian kernel of width (D1)."""
    rng = np.random.default_rng(0)
    image = data.camera()[100:228, 100:228] / 255.0 + rng.normal(0.0, NOISE, (128, 128))
    P, _ = extract_patches(image, PATCH, 1)
    X = P[np.sort(rng.choice(len(P), n, replace=False))]
    sigma = WIDTH * NOISE * np.sqrt(2.0 * PATCH * PATCH)
    rows = KernelRows(np.ascontiguousarray(X), KernelSpec("gaussian", sigma=sigma))
    rows.fit_centering()
    return rows.dense()  # K', as the exact solver forms it for a tile's model


def timed(call, repeat: int) -> tuple[float, float]:
    """Best of ``repeat``: seconds per call on one thread, and per call of `CALLS` on two threads at once."""
    call()
    one, two = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(4):
            call()
        one.append((time.perf_counter() - start) / 4)
        with ThreadPoolExecutor(2) as pool:
            start = time.perf_counter()
            list(pool.map(lambda _: call(), range(CALLS)))
            two.append((time.perf_counter() - start) / CALLS)
    return min(one), min(two)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="256,512,640,768,1024")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for n in (int(v) for v in args.sizes.split(",")):
        Kc = patch_kernel(n)
        limit, _dense.KRYLOV_MIN_ORDER = _dense.KRYLOV_MIN_ORDER, 0  # the ARPACK path whatever the size
        try:
            arpack = timed(lambda Kc=Kc: _dense.leading_eigh(Kc, Q), args.repeat)
        finally:
            _dense.KRYLOV_MIN_ORDER = limit
        limit, _dense.NOGIL_MAX_ORDER = _dense.NOGIL_MAX_ORDER, n

        def unlocked(Kc=Kc):
            with _dense.unlocked_eigh():
                return _dense.leading_eigh(Kc, Q)

        try:
            lapack = timed(unlocked, args.repeat)
        finally:
            _dense.NOGIL_MAX_ORDER = limit
        rows.append({"n": n, "q": Q, "arpack_one_thread_s": arpack[0], "arpack_two_threads_s": arpack[1],
                     "unlocked_one_thread_s": lapack[0], "unlocked_two_threads_s": lapack[1],
                     "one_thread_ratio": lapack[0] / arpack[0], "two_threads_ratio": lapack[1] / arpack[1]})
        print(f"n {n}: unlocked / ARPACK {lapack[0] / arpack[0]:.2f} on one thread, {lapack[1] / arpack[1]:.2f} "
              "on two", file=sys.stderr, flush=True)
    save("unlocked_eigh", {"noise": NOISE, "width": WIDTH, "patch": PATCH, "calls": CALLS, "repeat": args.repeat,
                           "nogil_max_order": _dense.NOGIL_MAX_ORDER, "rows": rows})


if __name__ == "__main__":
    main()
