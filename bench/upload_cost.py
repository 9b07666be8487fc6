"""What one chunk upload costs the store as a data set's staged chunks grow (a known limit, issue 30).

`store.DatasetStore.put_chunk` writes the chunk (a temporary file, ``fsync``, rename) and then answers
the data set's description, whose staged rows are counted over every staged chunk
(`store.datasets.staging.staged_rows`: a folder listing and one ``stat`` per chunk). So an upload's cost
grows with the chunks already staged. Measured here: a fresh data set in a temporary folder on this
machine's disk, chunks of ``--rows`` x 16 float32 uploaded one after the other; at each mark of
``--marks``, the median over ``--repeat`` uploads of the upload's seconds and of a `get` alone, and, as the
anchor, numpy writing the same chunk to a file of its own with ``fsync`` (what the write itself costs).
Prints JSON and writes bench/results/upload_cost.json (`bench._common.save`).

    python bench/upload_cost.py [--marks 10,100,1000,5000] [--rows 32] [--repeat 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bench._common import save  # noqa: E402
from store import DatasetStore  # noqa: E402


def numpy_write(folder: Path, rows: np.ndarray) -> float:
    """Seconds for numpy to write ``rows`` to a new ``.npy`` file and ``fsync`` it."""
    started = time.perf_counter()
    with open(folder / f"anchor-{time.perf_counter_ns()}.npy", "wb") as handle:
        np.save(handle, rows)
        handle.flush()
        os.fsync(handle.fileno())
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--marks", default="10,100,1000,5000")
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    marks = sorted(int(m) for m in args.marks.split(","))
    rows = np.random.default_rng(0).normal(size=(args.rows, 16)).astype(np.float32)
    points = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as root:
        store = DatasetStore(root)
        store.create("d", 16, "float32")
        anchor_folder = Path(root) / "anchor"
        anchor_folder.mkdir()
        index = 0
        for mark in marks:
            while index < mark:
                store.put_chunk("d", index, rows)
                index += 1
            uploads, gets, anchors = [], [], []
            for _ in range(args.repeat):
                started = time.perf_counter()
                store.put_chunk("d", index, rows)
                uploads.append(time.perf_counter() - started)
                index += 1
                started = time.perf_counter()
                store.get("d")
                gets.append(time.perf_counter() - started)
                anchors.append(numpy_write(anchor_folder, rows))
            upload, get, anchor = (statistics.median(x) for x in (uploads, gets, anchors))
            points.append({"staged_chunks": mark, "upload_ms": round(upload * 1000, 3), "get_ms": round(get * 1000, 3),
                           "numpy_write_ms": round(anchor * 1000, 3), "upload_vs_numpy_write": round(upload / anchor, 2)})
            print(points[-1], flush=True)
    save("upload_cost", {"rows_per_chunk": args.rows, "features": 16, "dtype": "float32", "repeat": args.repeat,
                         "points": points})


if __name__ == "__main__":
    main()
