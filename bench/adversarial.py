"""The adversarial suite's table: hostile cases x solvers, each cell right / warned / refused / silently wrong.

Runs `bench._adversarial.run_suite` (the cases, the configurations and the verdict rule are there) and
prints the table as JSON and, with ``--markdown``, as the table docs/choosing-a-solver.md keeps. Writes
bench/results/adversarial.json (``--name`` another file: a run of older code keeps its own).

    python bench/adversarial.py [--rows 400] [--configs default,nystrom] [--cases "offset 1e+04"] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

from bench._adversarial import CONFIGS, run_suite  # noqa: E402
from bench._common import save  # noqa: E402

MARKS = {"right": "right", "warned": "warned", "refused": "refused", "crashed": "CRASH", "silently wrong": "**WRONG**"}


def table(outcomes) -> str:
    """The markdown table: a row per case, a column per configuration, a verdict per cell."""
    configs = list(dict.fromkeys(o.config for o in outcomes))
    rows = list(dict.fromkeys(o.case for o in outcomes))
    cell = {(o.case, o.config): o for o in outcomes}
    lines = ["| case | " + " | ".join(configs) + " |", "|---" * (len(configs) + 1) + "|"]
    for case in rows:
        marks = []
        for config in configs:
            o = cell.get((case, config))
            marks.append("" if o is None else MARKS[o.verdict])
        lines.append(f"| {case} | " + " | ".join(marks) + " |")
    counts = {v: sum(o.verdict == v for o in outcomes) for v in MARKS}
    lines.append("")
    lines.append(", ".join(f"{v}: {n}" for v, n in counts.items()))
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=400)
    parser.add_argument("--configs", default=None, help=f"comma-separated, of {', '.join(CONFIGS)}")
    parser.add_argument("--cases", default=None, help="semicolon-separated case names (default: all)")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--name", default="adversarial")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    outcomes = run_suite(args.rows, args.configs.split(",") if args.configs else None,
                         args.cases.split(";") if args.cases else None)
    payload = {"rows": args.rows, "seconds": round(time.perf_counter() - t0, 1),
               "outcomes": [asdict(o) for o in outcomes],
               "counts": {v: sum(o.verdict == v for o in outcomes) for v in MARKS}}
    save(args.name, payload)  # prints the JSON
    print(json.dumps(payload["counts"]))
    if args.markdown:
        print(table(outcomes))
    return payload


if __name__ == "__main__":
    main()
