"""The leading eigenpairs of a centred kernel matrix: ARPACK with its check against LAPACK's eigh.

For each order n (``--sizes``) the centred Gaussian kernel matrix K' of n rows of scikit-learn's
digits (`bench._common.jittered_digits`, as bench/solvers.py; sigma 3), and for each number of pairs q
(``--ranks``): the seconds of `scipy.linalg.eigh` with ``subset_by_index`` (LAPACK, what the exact
solver ran before) and of `kpca._dense.leading_eigh` forced to take its ARPACK path (Lanczos, then the
check that no eigenvalue was missed), best of ``--repeat``, both on one BLAS thread as the exact solver
runs them; their ratio, and the largest difference of the eigenvalues relative to the largest.
`kpca._dense.KRYLOV_MIN_ORDER`, `KRYLOV_MIN_Q` and `KRYLOV_MAX_SHARE` are chosen from it: the path is
taken where it is faster. Then the whole exact fit (`KernelHebbianPCA(solver="exact")`, r = 16) on the
largest size, with the ARPACK path and with LAPACK forced, beside scikit-learn's
``KernelPCA(eigen_solver="arpack")`` on the same rows (the same kernel), best of ``--repeat`` each.
Prints JSON and writes bench/results/leading_eigh.json.

    python bench/leading_eigh.py [--sizes 400,800,1200,2000,3000] [--ranks 4,8,16,32,64] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402

from bench._common import best_of, jittered_digits, save  # noqa: E402
from kpca import _dense  # noqa: E402
from kpca._threads import serial_blas  # noqa: E402

SIGMA = 3.0


def centred_kernel(n: int) -> np.ndarray:
    """K' of `bench._common.jittered_digits` (n rows, as bench/solvers.py), Gaussian kernel of width `SIGMA`."""
    X = jittered_digits(n)
    sq = (X * X).sum(axis=1)
    K = np.exp(-np.maximum(sq[:, None] + sq[None, :] - 2.0 * X @ X.T, 0.0) / (2.0 * SIGMA**2))
    return K - K.mean(axis=0) - K.mean(axis=1)[:, None] + K.mean()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="400,800,1200,2000,3000")
    ap.add_argument("--ranks", default="4,8,16,32,64")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for n in (int(v) for v in args.sizes.split(",")):
        Kc = centred_kernel(n)
        for q in (int(v) for v in args.ranks.split(",")):
            with serial_blas():
                lapack, (w0, _) = best_of(args.repeat, lambda: scipy.linalg.eigh(Kc, subset_by_index=[n - q, n - 1]))
            limits = (_dense.KRYLOV_MIN_ORDER, _dense.KRYLOV_MIN_Q)
            _dense.KRYLOV_MIN_ORDER, _dense.KRYLOV_MIN_Q = 0, n  # the ARPACK path whatever the size
            try:
                arpack, (w, _) = best_of(args.repeat, lambda: _dense.leading_eigh(Kc, q))
            finally:
                _dense.KRYLOV_MIN_ORDER, _dense.KRYLOV_MIN_Q = limits
            rows.append({"n": n, "q": q, "lapack_s": lapack, "leading_eigh_s": arpack,
                         "lapack_over_leading_eigh": lapack / arpack,
                         "eigenvalue_error": float(np.abs(w - w0).max() / abs(w0[-1]))})
            print(f"n {n} q {q}: {lapack / arpack:.2f}x", file=sys.stderr, flush=True)
    save("leading_eigh", {"sigma": SIGMA, "repeat": args.repeat, "rows": rows, "exact_fit": exact_fit(n, args.repeat),
                          "krylov_min_order": _dense.KRYLOV_MIN_ORDER, "krylov_min_q": _dense.KRYLOV_MIN_Q,
                          "krylov_max_share": _dense.KRYLOV_MAX_SHARE})


def exact_fit(n: int, repeat: int, r: int = 16) -> dict:
    """Seconds of the exact fit of r components of n rows: as it runs, with LAPACK forced, and
    scikit-learn's KernelPCA with ARPACK on the same rows and kernel (`jittered_digits`)."""
    from sklearn.decomposition import KernelPCA

    from kpca.estimator import KernelHebbianPCA

    X = jittered_digits(n)
    KernelHebbianPCA(r, sigma=SIGMA, solver="exact").fit(X[:500])  # compiled before it is timed
    fit = lambda: KernelHebbianPCA(r, sigma=SIGMA, solver="exact").fit(X)  # noqa: E731
    arpack, _ = best_of(repeat, fit)
    limit, _dense.KRYLOV_MIN_ORDER = _dense.KRYLOV_MIN_ORDER, n + 1  # LAPACK whatever the size
    try:
        lapack, _ = best_of(repeat, fit)
    finally:
        _dense.KRYLOV_MIN_ORDER = limit
    sklearn, _ = best_of(repeat, lambda: KernelPCA(r, kernel="rbf", gamma=1.0 / (2.0 * SIGMA**2),
                                                   eigen_solver="arpack").fit(X))
    return {"n": n, "r": r, "exact_s": arpack, "exact_lapack_s": lapack, "sklearn_arpack_s": sklearn,
            "exact_over_sklearn": arpack / sklearn, "exact_lapack_over_sklearn": lapack / sklearn}


if __name__ == "__main__":
    main()
