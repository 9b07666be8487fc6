"""Out-of-core fit: one kha-smd pass over a zarr data set of l = 100,000 rows, n = 64.

The data (a Gaussian mixture, float32) is uploaded into a `store.DatasetStore`
and committed to zarr. Each measurement runs in a fresh child process so its
peak RSS (``ru_maxrss``) is its own:

* ``rows_numpy`` / ``rows_zarr`` / ``rows_zarr_nocache``: centred kernel rows
  only (formed, in blocks of `kpca.defaults.formed_block_size` rows: about
  128 MiB each), ``--blocks`` blocks of a pass, from an in-memory array, from zarr with
  the default chunk cache, and from zarr with no cache (every block re-reads
  and decompresses every chunk) -> rows per second and the ratio to numpy;
* ``fit_zarr``: the centring pass plus ``--passes`` full kha-smd passes from
  zarr, as the worker runs them (in blocks of `kpca.defaults.default_block_size`
  rows that are never formed: the update multiplies each kernel tile in
  cache) -> seconds, rows per second, peak RSS;
  ``fit_zarr_f32`` the same with float32 rows (``KernelRows(dtype=float32)``,
  as a fit with ``kernel_precision`` float32 runs: tiles, rows and the
  solver's GEMMs against them in float32, its state float64);
* ``sklearn_<solver>``: scikit-learn's ``KernelPCA(16, "rbf").fit`` on the
  same data read into memory, under an address-space limit of
  ``--sklearn-limit-gib`` so that it fails cleanly instead of being killed
  by the kernel's OOM killer -> what it does (error and message) and when.

The dense kernel matrix would need 8 l^2 bytes (80 GB at l = 100,000).
Prints JSON and writes bench/results/out_of_core_n{n}.json (`bench._common.save`;
``--merge`` keeps the earlier runs of modes not run this time; every run names its commit).

    python bench/out_of_core.py [--rows 100000] [--features 64] [--passes 1] [--blocks 100]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402

from bench._common import git_state, results_dir, save, start_iterative  # noqa: E402
SIGMA_PER_SQRT_FEATURE = 1.5  # sigma = 1.5 sqrt(n): within-cluster distances ~ sqrt(2n)


def sigma_for(n: int) -> float:
    return SIGMA_PER_SQRT_FEATURE * float(np.sqrt(n))


def make_data(root: Path, l: int, n: int) -> None:
    from store import DatasetStore

    rng = np.random.default_rng(0)
    centers = rng.normal(scale=3.0, size=(10, n))
    store = DatasetStore(root)
    store.create("mix", n, "float32")
    step = 10_000
    for i, a in enumerate(range(0, l, step)):
        m = min(step, l - a)
        X = centers[rng.integers(0, 10, size=m)] + rng.normal(size=(m, n))
        store.put_chunk("mix", i, X.astype(np.float32))
    store.commit("mix")


def sklearn_fit(X: np.ndarray, spec, solver: str, limit_gib: float) -> dict:
    """scikit-learn's KernelPCA on X under RLIMIT_AS: seconds and outcome (fitted or the error)."""
    from sklearn.decomposition import KernelPCA

    limit = int(limit_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    kpca = KernelPCA(n_components=16, kernel="rbf", gamma=0.5 / spec.sigma**2, eigen_solver=solver, random_state=0)
    t0 = time.perf_counter()
    try:
        kpca.fit(X)
        outcome, message = "fitted", None
    except MemoryError as err:
        outcome, message = "MemoryError", str(err)
    return {"solver": solver, "address_space_limit_gib": limit_gib, "outcome": outcome, "message": message,
            "seconds": time.perf_counter() - t0}


def child(mode: str, root: str, passes: int, blocks: int, limit_gib: float = 16.0) -> dict:
    from kpca.defaults import default_block_size, formed_block_size
    from kpca.driver import permutation, run_passes
    from kpca.kernels import KernelSpec
    from kpca.rows import Centering, KernelRows
    from store import DatasetStore

    source = DatasetStore(Path(root)).open_array("mix")
    spec = KernelSpec("gaussian", sigma=sigma_for(source.shape[1]))
    out = {"mode": mode}
    if mode.startswith("sklearn_"):
        return {**out, **sklearn_fit(np.asarray(source[:]), spec, mode.removeprefix("sklearn_"), limit_gib)}
    if mode.startswith("rows"):
        if mode == "rows_numpy":
            source = np.asarray(source[:])
        rows = KernelRows(source, spec, cache_bytes=0 if mode == "rows_zarr_nocache" else None)
        l = rows.n_rows
        # centring statistics are not what is timed here; any values give the same work
        rows.centering = Centering(np.zeros(l), 0.0, 1.0)
        b = formed_block_size(l)  # rows formed: about 128 MiB per block
        order = permutation(0, 0, l)
        rows.block(order[:b])  # warm-up: numba, first reads
        t0 = time.perf_counter()
        for k in range(blocks):
            rows.block(order[k * b : (k + 1) * b])
        dt = time.perf_counter() - t0
        out.update(block_size=b, blocks=blocks, seconds=dt, rows_per_s=blocks * b / dt,
                   chunk_reads=rows.reads)
    else:
        rows = KernelRows(source, spec, dtype=np.float32 if mode == "fit_zarr_f32" else np.float64)
        l = rows.n_rows
        t0 = time.perf_counter()
        c = rows.fit_centering()
        out["centring_s"] = time.perf_counter() - t0
        params, state = start_iterative("kha-smd", rows, 16, c.mean_diagonal, seed=0, passes=passes,
                                        kernel_precision=rows.dtype.name)
        b = default_block_size(l)
        t0 = time.perf_counter()
        state, _ = run_passes(rows, state, passes, b)
        dt = time.perf_counter() - t0
        out.update(block_size=b, passes=passes, pass_s=dt / passes, rows_per_s=passes * l / dt,
                   params=params, finite=bool(np.isfinite(state["A"]).all()),
                   eigenvalues=[float(v) for v in np.sort(state["eigenvalues"])[::-1][:5]])
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--passes", type=int, default=1)
    ap.add_argument("--blocks", type=int, default=100)
    ap.add_argument("--modes", default="rows_numpy,rows_zarr,rows_zarr_nocache,fit_zarr,fit_zarr_f32,sklearn_arpack",
                    help="comma-separated child runs (see the module docstring)")
    ap.add_argument("--sklearn-limit-gib", type=float, default=16.0)
    ap.add_argument("--merge", action="store_true", help="keep earlier runs of other modes in the results file")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "ROOT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.passes, args.blocks, args.sklearn_limit_gib)))
        return
    with tempfile.TemporaryDirectory(prefix="kpca-ooc-") as root:
        t0 = time.perf_counter()
        make_data(Path(root), args.rows, args.features)
        results = {"l": args.rows, "n": args.features, "kernel": {"type": "gaussian", "sigma": sigma_for(args.features)},
                   "n_components": 16, "upload_and_commit_s": time.perf_counter() - t0,
                   "dense_kernel_matrix_gb": 8 * args.rows**2 / 1e9, "runs": {}}
        for mode in args.modes.split(","):
            cmd = [sys.executable, __file__, "--child", mode, root, "--passes", str(args.passes),
                   "--sklearn-limit-gib", str(args.sklearn_limit_gib),
                   "--blocks", str(args.blocks if mode != "rows_zarr_nocache" else max(1, args.blocks // 10))]
            done = subprocess.run(cmd, check=True, capture_output=True, text=True)
            results["runs"][mode] = {**json.loads(done.stdout.strip().splitlines()[-1]), **git_state()}
            print(mode, results["runs"][mode], file=sys.stderr, flush=True)
        runs = results["runs"]
        if {"rows_zarr", "rows_numpy"} <= runs.keys():
            results["zarr_vs_numpy_rows_per_s"] = runs["rows_zarr"]["rows_per_s"] / runs["rows_numpy"]["rows_per_s"]
        if {"rows_zarr_nocache", "rows_numpy"} <= runs.keys():
            results["zarr_nocache_vs_numpy_rows_per_s"] = (runs["rows_zarr_nocache"]["rows_per_s"]
                                                           / runs["rows_numpy"]["rows_per_s"])
        if {"fit_zarr", "rows_zarr"} <= runs.keys():
            results["fit_pass_vs_kernel_rows_only"] = (runs["fit_zarr"]["pass_s"]
                                                       / (args.rows / runs["rows_zarr"]["rows_per_s"]))
    name = f"out_of_core_n{args.features}"
    path = results_dir() / f"{name}.json"
    if args.merge and path.exists():  # keep the runs of modes not run this time (each run names its commit)
        old = json.loads(path.read_text())
        if (old.get("l"), old.get("n")) == (results["l"], results["n"]):
            results["runs"] = {**old.get("runs", {}), **results["runs"]}
    save(name, results)


if __name__ == "__main__":
    main()
