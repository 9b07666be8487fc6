"""A large serving request and answer as JSON against the same as ``.npy`` bytes, through the real service.

A service (`python -m service` in a process of its own, embedded cluster, temporary data folder) fits
a linear model (exact, r = 16) on ``--train`` rows of 64 features; then ``POST /v1/models/m/project``
of ``--rows`` rows is timed ``--repeats`` times each way, one after the other, from the request to the
array in this process:

* ``json``: JSON rows in, the default answer, ``np.asarray(r.json()["components"])``;
* ``npy``: the same JSON rows in, ``Accept: application/octet-stream``, ``np.load`` of the body;
* ``npy_both``: the rows as ``.npy`` bytes in (``Content-Type: application/octet-stream``, as the
  Python client sends them), the answer as ``npy``'s.

``json`` and ``npy`` get the same request body, so their difference is the answer's encoding, transfer
and decoding; ``npy_both`` also drops the request's JSON (written here, parsed and validated in the
API process). Reports the median and minimum seconds of each and their ratios to ``json``, and checks
that every answer holds the same float64 values. Prints JSON and writes
bench/results/answer_formats.json.

    python bench/answer_formats.py [--rows 10000] [--train 2000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from bench._common import save  # noqa: E402
from bench._service import service_process  # noqa: E402

N_FEATURES, R = 64, 16
KINDS = ("json", "npy", "npy_both")


def timed(api: httpx.Client, rows: np.ndarray, kind: str) -> tuple[float, np.ndarray]:
    """Seconds from making the request's body (``kind``: module note) to holding the answer as an
    array, and the array."""
    started = time.perf_counter()
    if kind == "npy_both":
        buffer = io.BytesIO()
        np.save(buffer, rows, allow_pickle=False)
        r = api.post("/v1/models/m/project", content=buffer.getvalue(),
                     headers={"Accept": "application/octet-stream", "Content-Type": "application/octet-stream"})
    else:
        headers = {"Accept": "application/octet-stream"} if kind == "npy" else {}
        r = api.post("/v1/models/m/project", json={"rows": rows.tolist()}, headers=headers)
    r.raise_for_status()
    if kind == "json":
        array = np.asarray(r.json()["components"], dtype=np.float64)
    else:
        array = np.load(io.BytesIO(r.content), allow_pickle=False)
    return time.perf_counter() - started, array


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--train", type=int, default=2_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--note", default="", help="what else ran on the machine (recorded with the figures)")
    args = ap.parse_args()
    from client import upload_array

    rng = np.random.default_rng(0)
    rows = rng.normal(size=(args.rows, N_FEATURES))
    with service_process() as url, httpx.Client(base_url=url, timeout=600) as api:
        upload_array(api, "train", rng.normal(size=(args.train, N_FEATURES)), progress=False)
        api.post("/v1/models", json={"name": "m", "dataset": "train", "n_components": R,
                                     "kernel": {"type": "linear"}, "solver": "exact"}).raise_for_status()
        while (status := api.get("/v1/models/m").json()["status"]) in ("queued", "running"):
            time.sleep(0.2)
        if status != "completed":
            raise RuntimeError(f"model m: {status}")
        for kind in KINDS:  # warm every path
            timed(api, rows, kind)
        seconds = {kind: [] for kind in KINDS}
        answers = {}
        for _ in range(args.repeats):
            for kind in KINDS:
                s, answers[kind] = timed(api, rows, kind)
                seconds[kind].append(s)
    if not all(np.array_equal(answers["json"], answers[kind]) for kind in KINDS):
        raise RuntimeError("a .npy answer differs from the JSON one")
    summary = {kind: {"median_s": round(float(np.median(v)), 4), "min_s": round(min(v), 4),
                      "all_s": [round(x, 4) for x in v]} for kind, v in seconds.items()}
    save("answer_formats", {
        "rows": args.rows, "features": N_FEATURES, "components": R, "train": args.train, "repeats": args.repeats,
        "answer_values": int(args.rows * R), "seconds": summary,
        "npy_over_json_median": round(summary["npy"]["median_s"] / summary["json"]["median_s"], 3),
        "npy_both_over_json_median": round(summary["npy_both"]["median_s"] / summary["json"]["median_s"], 3),
        "identical_values": True, "note": args.note,
    })


if __name__ == "__main__":
    main()
