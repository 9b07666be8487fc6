"""Peak memory and time of parsing one chunk body (issue 30, item 2): the issue's 64 MiB
``{"rows": [[1], [1], ...]}`` as JSON, the same rows as CSV and as ``.npy``, each parsed in a fresh
process so that its peak resident memory is its own.

"before" is the JSON path the service had (pydantic's ``ChunkRows.model_validate_json``, then a
float64 array); "after" is `service.payloads.rows_from_json` / ``rows_from_csv`` / ``rows_from_npy``
as the chunk route calls them now (no row limit: the whole body is parsed). Each run reports the peak
growth of resident memory over the body and over the float64 result (``result_mib``). Prints and saves
``bench/results/body_memory.json``.

    python bench/body_memory.py [--mib 64] [--skip-before]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._common import save  # noqa: E402

CHILD = r"""
import io, json, resource, sys, time
import numpy as np
sys.path.insert(0, {root!r})
mib, kind, path = {mib}, {kind!r}, {path!r}
n = (mib << 20) // 4
if kind.startswith("json"):
    body = b'{{"rows": [' + b"[1]," * (n - 1) + b"[1]]}}"
elif kind == "csv":
    body = b"x\n" + b"1\n" * (2 * n)
else:
    buf = io.BytesIO(); np.save(buf, np.ones((mib << 20) // 8 - 16, dtype=np.float64)[:, None]); body = buf.getvalue()
from service.schemas.datasets import ChunkRows  # imported before the baseline: the parse's growth only
from service.payloads import rows_from_csv, rows_from_json, rows_from_npy, rows_to_array
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
if kind == "json-before":
    rows = rows_to_array(ChunkRows.model_validate_json(body).rows, 1)
elif kind == "json-after":
    rows = rows_from_json(body, 1)
elif kind == "csv":
    rows = rows_from_csv(body, 1)
else:
    rows = rows_from_npy(body)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"kind": kind, "body_mib": round(len(body) / 2**20, 1), "rows": int(rows.shape[0]),
                  "result_mib": round(rows.nbytes / 2**20, 1), "seconds": round(seconds, 2), "peak_rss_growth_mib": round((peak - base) / 1024, 1),
                  "growth_over_body": round((peak - base) * 1024 / len(body), 2),
                  "growth_over_result": round((peak - base) * 1024 / max(rows.nbytes, 1), 2)}}))
"""


def measure(kind: str, mib: int) -> dict:
    """One parse in a fresh process: body size, rows, seconds, peak RSS growth over the body's."""
    code = CHILD.format(root=str(ROOT), mib=mib, kind=kind, path="")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=64, help="body size in MiB")
    parser.add_argument("--skip-before", action="store_true", help="leave out the old JSON path (GBs)")
    args = parser.parse_args()
    kinds = (["json-before"] if not args.skip_before else []) + ["json-after", "csv", "npy"]
    runs = []
    for kind in kinds:
        runs.append(measure(kind, args.mib))
        print(json.dumps(runs[-1]), flush=True)
    save("body_memory", {"body_mib": args.mib, "runs": runs})


if __name__ == "__main__":
    main()
