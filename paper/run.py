"""`make paper`: run every experiment module ``paper/exp_*.py`` and write paper/REPORT.md.

Each module (the contract in its docstring's terms) has ``TITLE``, ``SEED`` and ``run(figures, quick)``
returning ``{"markdown", "claims", "seconds"}``; the modules run in order of (seed, name), their PNGs go to
``paper/figures/`` and the report (written to a temporary name, then renamed) has a header (the machine,
library versions, commit, minutes), a table of every claim with its verdict and figure, and one
``## TITLE`` section per experiment. An experiment that raises gets a section saying so and the run
goes on.

    python paper/run.py [--quick] [--out paper] [--only 000_fig1,...]
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repository root: kpca, bench

from bench._common import environment  # noqa: E402

HERE = ROOT / "paper"


def experiments(only: list[str] | None = None) -> list:
    """The modules ``paper/exp_*.py``, imported, in order of (SEED, name); ``only`` keeps the names (without
    ``exp_``) that start with one of its entries."""
    names = sorted(p.stem for p in HERE.glob("exp_*.py"))
    if only:
        names = [n for n in names if any(n[4:].startswith(o) for o in only)]
    modules = [importlib.import_module(f"paper.{n}") for n in names]
    return sorted(modules, key=lambda m: (m.SEED, m.__name__))


def run_one(module, figures: Path, quick: bool) -> dict:
    """``module.run`` with its wall time; an exception becomes a section that shows it."""
    t0 = time.perf_counter()
    try:
        result = dict(module.run(figures, quick=quick))
    except Exception:  # noqa: BLE001 - one broken experiment must not hide the others
        result = {"markdown": f"**This experiment failed:**\n\n```\n{traceback.format_exc()}```\n",
                  "claims": [{"claim": "(the experiment raised)", "verdict": "not reproduced", "figure": ""}]}
    result["seconds"] = time.perf_counter() - t0
    return result


def header(env: dict, total_s: float, quick: bool, timings: list[tuple[str, float]]) -> str:
    libs = ", ".join(f"{k} {v}" for k, v in env["libraries"].items() if v)
    lines = [
        "# The seeds' experiments, rerun",
        "",
        "Every experiment of the seed papers (`/work/shared/seeds/` in the design: seed 000 Schraudolph et al.,"
        " *Fast Iterative Kernel PCA*; 002 Kim et al., *Kernel Hebbian Algorithm*; 003 Cohen et al., *Autoencoder"
        " Kernel PCA*; 004 Kingravi et al., *Reduced-Set KPCA*) that can run offline, on stand-in data where the"
        " paper's cannot be downloaded, scaled down where a 2-core machine needs it (each section says where)."
        " Read it with the paper open: each section quotes the claim with its section and figure numbers.",
        "",
        f"Reproduce: `make paper` (or `python paper/run.py`); {total_s / 60:.1f} minutes for this run"
        + (" (**quick run: the numbers mean nothing**)" if quick else "") + ".",
        "",
        f"Machine: {env['cpu']}, {env['available_cores']} cores available ({env['logical_cores']} logical), "
        f"Python {env['python']}, {env['platform']}. Libraries: {libs}. Commit `{env['commit']}`"
        + (" with uncommitted changes" if env["dirty"] else "") + f", run started {env['utc']}.",
        "",
        "Time per experiment: " + ", ".join(f"{name} {s:.0f} s" for name, s in timings) + ".",
        "",
    ]
    return "\n".join(lines)


def claims_table(results: list[tuple]) -> str:
    rows = ["| seed | experiment | claim | verdict | figure |", "|---|---|---|---|---|"]
    for module, result in results:
        for c in result["claims"]:
            fig = f"[{Path(c['figure']).name}]({c['figure']})" if c.get("figure") else ""
            claim = " ".join(str(c["claim"]).split()).replace("|", "\\|")
            rows.append(f"| {module.SEED} | {module.TITLE.split(':')[0]} | {claim} | {c['verdict']} | {fig} |")
    return "## Claims and verdicts\n\n" + "\n".join(rows) + "\n"


def write_report(out: Path, results: list[tuple], total_s: float, quick: bool, env: dict) -> Path:
    """paper/REPORT.md (or ``out/REPORT.md``), atomically; ``env`` is `bench._common.environment` at the start."""
    timings = [(m.__name__.split(".")[-1][4:], r["seconds"]) for m, r in results]
    parts = [header(env, total_s, quick, timings), claims_table(results)]
    parts += [f"## {m.TITLE}\n\n{r['markdown'].strip()}\n\n*Run time: {r['seconds']:.0f} s.*\n" for m, r in results]
    path = out / "REPORT.md"
    tmp = out / f".REPORT.md.{os.getpid()}.tmp"
    tmp.write_text("\n".join(parts))
    os.replace(tmp, path)
    return path


def main(argv: list[str] | None = None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny runs (seconds): checks the machinery only")
    ap.add_argument("--out", type=Path, default=HERE, help="folder for REPORT.md and figures/")
    ap.add_argument("--only", default="", help="comma-separated module names without exp_ (prefixes)")
    args = ap.parse_args(argv)
    figures = args.out / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    t0, env = time.perf_counter(), environment()  # the commit and tree the run started from
    results = []
    for module in experiments([o for o in args.only.split(",") if o] or None):
        print(f"running {module.__name__} ...", file=sys.stderr, flush=True)
        results.append((module, run_one(module, figures, args.quick)))
        print(f"  {results[-1][1]['seconds']:.0f} s", file=sys.stderr, flush=True)
    path = write_report(args.out, results, time.perf_counter() - t0, args.quick, env)
    print(f"wrote {path}", file=sys.stderr)
    return path


if __name__ == "__main__":
    main()
