"""What verifying stored rows on read costs, on a ~100 MB data set (issue 30).

A committed data set (float64, ``--rows`` x ``--features``, ~100 MB) is read whole through
`store.DatasetStore.open_array` in four ways, best of ``--repeat`` rounds each:

* ``raw_zarr_s``: the segment's zarr array read directly, no checks (the floor: decode only);
* ``first_read_s``: the first read in a process (every zarr chunk decoded, hashed and compared), which
  is also what a source read on every open costs (a remote or column-chunked registered array);
* ``verified_read_s``: a later read of unchanged files (one ``stat`` per zarr chunk: inode, size,
  mtime and ctime, then decode only);
* ``open_s``: `open_array` alone (its ``zarr.json`` hashed and checked, its digest document read).

Also ``sha256_mb_s``, hashlib's sha256 throughput here. Prints JSON and writes
bench/results/verify_cost.json (`bench._common.save`).

    python bench/verify_cost.py [--rows 102400] [--features 128] [--repeat 3]
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402
import zarr  # noqa: E402

from bench._common import save  # noqa: E402
from store import DatasetStore  # noqa: E402
from store.datasets import integrity  # noqa: E402


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=102_400)
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="verify-cost-"))
    try:
        store = DatasetStore(folder)
        rows = np.random.default_rng(0).normal(size=(args.rows, args.features))
        store.create("d", args.features, "float64")
        for index, part in enumerate(np.array_split(rows, 8)):
            store.put_chunk("d", index, part)
        store.commit("d")
        segment = zarr.open_array(str(store.array_path("d")), mode="r")
        times = {"raw_zarr_s": [], "first_read_s": [], "verified_read_s": [], "open_s": []}
        for _ in range(args.repeat):
            times["raw_zarr_s"].append(timed(lambda: np.asarray(segment[:])))
            integrity._VERIFIED.clear()  # a new process: nothing verified yet
            times["first_read_s"].append(timed(lambda: np.asarray(store.open_array("d")[:])))
            times["verified_read_s"].append(timed(lambda: np.asarray(store.open_array("d")[:])))
            times["open_s"].append(timed(lambda: store.open_array("d")))
        block = np.random.default_rng(1).bytes(64 << 20)
        sha = min(timed(lambda: hashlib.sha256(block).digest()) for _ in range(args.repeat))
        best = {key: min(values) for key, values in times.items()}
        payload = {
            "rows": args.rows, "features": args.features, "megabytes": round(rows.nbytes / 1e6, 1),
            "zarr_chunks": int(-(-args.rows // segment.chunks[0])), **{k: round(v, 4) for k, v in best.items()},
            "first_read_over_raw": round(best["first_read_s"] / best["raw_zarr_s"], 2),
            "verified_read_over_raw": round(best["verified_read_s"] / best["raw_zarr_s"], 2),
            "sha256_mb_s": round(64 * 2**20 / sha / 1e6, 1), "repeat": args.repeat,
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    save("verify_cost", payload)
    return payload


if __name__ == "__main__":
    import json

    print(json.dumps(main(), indent=1))
