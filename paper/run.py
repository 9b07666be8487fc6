"""`make paper`: run every experiment module ``paper/exp_*.py`` and write paper/REPORT.md and paper/verdicts.json.

Each module (the contract in its docstring's terms) has ``TITLE``, ``SEED`` and ``run(figures, quick)``
returning ``{"markdown", "claims", "seconds"}``; each claim is the record `paper._criteria.Criterion.result`
makes, ``{"id", "claim", "criterion", "verdict", "figure"}``: its stable id, the paper's words, the rule that
decides ``reproduced`` / ``partly`` / ``not reproduced`` (read from ``paper/criteria/<id>.json``, committed before
the run; ``"not testable here"`` with its ``reason`` where that file says the data here cannot decide it), the
verdict that rule gives on the numbers of this run, and the figure. The claims a module returns are exactly
those whose criteria files name it. Every experiment runs its computations from the code at HEAD in this
process: nothing is read from stored bench output. The modules run in order of (seed, name), their PNGs go to
``paper/figures/`` and the report (written to a temporary name, then renamed) has a header (the machine,
library versions, commit, whether the tree was clean, minutes), a table of every claim with its id, the commit
of its criteria file, criterion, verdict and figure, and one ``## TITLE`` section per experiment. An experiment
that raises gets a section saying so, its claims the verdict ``"the experiment raised"``, and the run goes on.

verdicts.json (beside the report) records, per claim id, the verdict of this run (``full``) and of the quick
form of its experiment (``quick``), with the commit they came from: a full run also runs every quick form, after
the full ones (their figures to a temporary folder), so that both come from the same code; a ``--quick`` run
records its quick verdicts and leaves the full ones pending (null). With ``--only``, the other claims' records are
kept. ``--check`` (``make paper-quick``, in CI) runs the quick forms and exits 1, listing them, where a quick
verdict differs from the recorded one, a claim has no record or a record no claim, or an experiment raises: a
change that moves a verdict cannot land without rerunning the report. A claim whose criterion compares
wall-clock times (``timed`` in its file) is listed when it differs but does not fail the check: on a shared
machine its quick verdict follows the load.

The numbers must come from a commit: the run refuses to start from a tree with uncommitted changes
(untracked files included) unless ``--allow-dirty`` is given, and refuses to write the report if HEAD or
any file outside the report's own outputs changed while it ran (same flag); the header says which. ``--check``
writes no report of record and runs from any tree.

    python paper/run.py [--quick] [--out paper] [--only 000_fig1,...] [--allow-dirty]
    python paper/run.py --quick --check [--verdicts paper/verdicts.json] [--only ...]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repository root: kpca, bench

from bench._common import environment  # noqa: E402
from bench._common import git_state as environment_git  # noqa: E402
from paper._criteria import CRITERIA_DIR, NOT_TESTABLE, VERDICTS, load_all, of_module  # noqa: E402

HERE = ROOT / "paper"
RAISED = "the experiment raised"
VERDICTS_FILE = "verdicts.json"


class DirtyTree(SystemExit):
    """The tree the report would be written from has uncommitted changes (and ``--allow-dirty`` was not given)."""


def changed_paths(ignore: tuple[Path, ...] = ()) -> list[str] | None:
    """Paths ``git status --porcelain`` lists (modified, staged, untracked), less those under ``ignore``;
    None where git cannot tell."""
    try:
        done = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], capture_output=True,
                              text=True, cwd=ROOT, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    skipped = [str(p.resolve().relative_to(ROOT)) + "/" for p in ignore if p.resolve().is_relative_to(ROOT)]
    paths = [line[3:].split(" -> ")[-1].strip('"') for line in done.stdout.splitlines() if line.strip()]
    return [p for p in paths if not any(p.startswith(s) or p + "/" == s for s in skipped)]


def check_tree(state: dict, allow_dirty: bool, when: str) -> str:
    """``"clean"``, or what is not, as the header says it; `DirtyTree` unless ``allow_dirty`` when the tree
    is not known to be clean. ``state``: ``{"commit", "changed"}`` (None: git could not tell)."""
    changed = state.get("changed")
    if changed == []:
        return "clean"
    what = ("git could not tell whether the tree is clean" if changed is None
            else f"{len(changed)} uncommitted paths ({', '.join(changed[:5])}{', ...' if len(changed) > 5 else ''})")
    if not allow_dirty:
        raise DirtyTree(f"paper/run.py: {when}: {what}; the report's numbers must come from a commit: commit (or "
                        f"stash) first, or pass --allow-dirty to write a report that says so")
    return what


def tree_state(out: Path) -> dict:
    """HEAD and the paths changed outside the report's outputs (``out``'s REPORT.md, verdicts.json, figures/)."""
    git = environment_git()
    return {"commit": git["commit"], "changed": changed_paths((out / "figures", out / "REPORT.md", out / VERDICTS_FILE))}


def experiments(only: list[str] | None = None) -> list:
    """The modules ``paper/exp_*.py``, imported, in order of (SEED, name); ``only`` keeps the names (without
    ``exp_``) that start with one of its entries."""
    names = sorted(p.stem for p in HERE.glob("exp_*.py"))
    if only:
        names = [n for n in names if any(n[4:].startswith(o) for o in only)]
    modules = [importlib.import_module(f"paper.{n}") for n in names]
    return sorted(modules, key=lambda m: (m.SEED, m.__name__))


def module_name(module) -> str:
    """``exp_...``: how criteria files name a module."""
    return module.__name__.rsplit(".", 1)[-1]


def check_claims(module, claims: list[dict]) -> None:
    """ValueError unless ``claims`` are the module's criteria files' claims, each once, with a verdict its file
    allows: one of `VERDICTS` where testable, ``"not testable here"`` where the file says so."""
    name, criteria = module_name(module), {c.id: c for c in of_module(module_name(module))}
    ids = [c.get("id") for c in claims]
    if sorted(ids) != sorted(criteria) or len(set(ids)) != len(ids):
        raise ValueError(f"{name}: claims {ids} are not those of its criteria files ({sorted(criteria)}, "
                         f"{CRITERIA_DIR.name}/<id>.json)")
    for claim in claims:
        c = criteria[claim["id"]]
        allowed = (NOT_TESTABLE,) if not c.testable else VERDICTS
        if not claim.get("criterion") or claim.get("verdict") not in (*allowed, RAISED):
            raise ValueError(f"{name}: claim {c.id} needs a criterion and a verdict in {allowed}: {claim}")


def run_one(module, figures: Path, quick: bool) -> dict:
    """``module.run`` with its wall time and its claims checked (`check_claims`); an exception becomes a section
    that shows it, and each of the module's claims the verdict `RAISED`."""
    t0 = time.perf_counter()
    try:
        result = dict(module.run(figures, quick=quick))
    except Exception:  # noqa: BLE001 - one broken experiment must not hide the others
        result = {"markdown": f"**This experiment failed:**\n\n```\n{traceback.format_exc()}```\n",
                  "claims": [{"id": c.id, "claim": c.claim, "criterion": c.text, "verdict": RAISED, "figure": ""}
                             for c in of_module(module_name(module))]}
    check_claims(module, result["claims"])
    result["seconds"] = time.perf_counter() - t0
    return result


def criterion_commits() -> dict[str, str]:
    """The commit that last changed each criteria file, by claim id (one ``git log``); ids missing where git
    cannot tell or the file is not committed."""
    try:
        done = subprocess.run(["git", "log", "--format=commit %H", "--name-only", "--", str(CRITERIA_DIR)],
                              capture_output=True, text=True, cwd=ROOT, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return {}
    found, commit = {}, None
    for line in done.stdout.splitlines() if done.returncode == 0 else []:
        if line.startswith("commit "):
            commit = line.split()[1]
        elif line.endswith(".json") and commit:
            found.setdefault(Path(line).stem, commit)
    return found


def header(env: dict, total_s: float, quick: bool, timings: list[tuple[str, float]], tree: str = "clean") -> str:
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
        + (" (**quick run: the numbers mean nothing**)" if quick else ", the quick forms included") + ".",
        "",
        f"Machine: {env['cpu']}, {env['available_cores']} cores available ({env['logical_cores']} logical), "
        f"Python {env['python']}, {env['platform']}. Libraries: {libs}. Commit `{env['commit']}`, run started "
        f"{env['utc']}. Tree: " + ("clean (no uncommitted changes, untracked files included) at the start and the end "
                                   "of the run: every number below comes from that commit's code."
                                   if tree == "clean" else f"**not clean** ({tree}; written with --allow-dirty).") ,
        "",
        "Every experiment reran here, from the code at that commit; nothing is read from stored bench results. "
        "Each claim is quoted as the paper states it, with the rule that decides its verdict: its own file, "
        "`paper/criteria/<id>.json` (every threshold the rule uses is there, none in the experiments' code), "
        "committed before the run (the table gives the commit that last changed each file) and stated in each "
        "section before its numbers. A claim the data here cannot decide is marked *not testable here*, with "
        "the reason, and gets no verdict. `paper/verdicts.json` records every verdict of this run and of the "
        "quick form of each experiment; `make paper-quick` (in CI) fails where a quick verdict moves.",
        "",
        "Time per experiment: " + ", ".join(f"{name} {s:.0f} s" for name, s in timings) + ".",
        "",
    ]
    return "\n".join(lines)


def claims_table(results: list[tuple], commits: dict[str, str] | None = None) -> str:
    """The report's table of every claim: id (linked to its criteria file, with the commit that last changed it),
    seed, experiment, the paper's words, criterion, verdict (or *not testable here* and why) and figure."""
    commits = commits or {}
    rows = ["| id (criteria file, its commit) | seed | experiment | claim (the paper's words) | criterion | verdict "
            "| figure |", "|---|---|---|---|---|---|---|"]

    def cell(text) -> str:
        return " ".join(str(text).split()).replace("|", "\\|")

    for module, result in results:
        for c in result["claims"]:
            fig = f"[{Path(c['figure']).name}]({c['figure']})" if c.get("figure") else ""
            done = commits.get(c["id"])
            ident = f"[`{c['id']}`](criteria/{c['id']}.json) " + (f"`{done[:7]}`" if done else "(not committed)")
            verdict = (f"**{NOT_TESTABLE}**: {cell(c['reason'])}" if c["verdict"] == NOT_TESTABLE
                       else f"**{c['verdict']}**" if c["verdict"] == RAISED else c["verdict"])
            rows.append(f"| {ident} | {module.SEED} | {module.TITLE.split(':')[0]} | {cell(c['claim'])} | "
                        f"{cell(c['criterion'])} | {verdict} | {fig} |")
    return "## Claims and verdicts\n\n" + "\n".join(rows) + "\n"


def write_report(out: Path, results: list[tuple], total_s: float, quick: bool, env: dict, tree: str = "clean",
                 commits: dict[str, str] | None = None) -> Path:
    """paper/REPORT.md (or ``out/REPORT.md``), atomically; ``env`` is `bench._common.environment` at the start,
    ``tree`` what `check_tree` said of it, ``commits`` `criterion_commits`."""
    timings = [(module_name(m)[4:], r["seconds"]) for m, r in results]
    parts = [header(env, total_s, quick, timings, tree), claims_table(results, commits)]
    parts += [f"## {m.TITLE}\n\n{r['markdown'].strip()}\n\n*Run time: {r['seconds']:.0f} s.*\n" for m, r in results]
    return write_atomic(out / "REPORT.md", "\n".join(parts))


def write_atomic(path: Path, text: str) -> Path:
    """``text`` to ``path`` through a temporary name in its folder."""
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


def read_verdicts(path: Path) -> dict:
    """A verdicts.json (module docstring), or an empty record where there is none."""
    return json.loads(path.read_text()) if path.is_file() else {"claims": {}}


def record_verdicts(path: Path, full: list[tuple] | None, quick: list[tuple], env: dict, tree: str,
                    commits: dict[str, str]) -> Path:
    """verdicts.json at ``path``: the claims of the modules run (``full``: their full run's results, None for a
    quick run; ``quick``: their quick forms'), over the record there for the others. Atomic."""
    doc = read_verdicts(path)
    full_verdicts = {c["id"]: c["verdict"] for _, r in full or [] for c in r["claims"]}
    criteria = load_all()
    for module, result in quick:
        for stale in [k for k, v in doc["claims"].items() if v.get("module") == module_name(module)]:
            del doc["claims"][stale]
        for c in result["claims"]:
            doc["claims"][c["id"]] = {"module": module_name(module), "full": full_verdicts.get(c["id"]),
                                      "quick": c["verdict"], "commit": env["commit"], "clean": tree == "clean",
                                      "criterion_commit": commits.get(c["id"]), "timed": criteria[c["id"]].timed}
    doc = {"about": "paper/run.py's record of each claim's verdict in the full run (full: null while pending) and "
                    "in the quick form of its experiment, with the commit they came from; make paper-quick compares "
                    "the quick verdicts",
           "commit": env["commit"], "tree": tree, "full_pending": any(v["full"] is None for v in doc["claims"].values()),
           "claims": dict(sorted(doc["claims"].items()))}
    return write_atomic(path, json.dumps(doc, indent=1) + "\n")


def compare_verdicts(recorded: dict, quick: list[tuple]) -> tuple[list[str], list[str]]:
    """``(failures, notes)`` of `--check`: a quick verdict other than the recorded one, a claim without a record,
    a record of a module run without its claim, an experiment that raised; a timed claim's change is a note."""
    failures, notes = [], []
    records = recorded.get("claims", {})
    seen = set()
    for module, result in quick:
        for c in result["claims"]:
            seen.add(c["id"])
            was = records.get(c["id"])
            if c["verdict"] == RAISED:
                failures.append(f"{c['id']}: {RAISED} (section {module.TITLE.split(':')[0]})")
            elif was is None:
                failures.append(f"{c['id']}: no recorded verdict (a new claim: rerun make paper)")
            elif was.get("quick") != c["verdict"]:
                line = f"{c['id']}: quick verdict {c['verdict']!r}, recorded {was.get('quick')!r} (commit {was.get('commit')})"
                (notes if was.get("timed") else failures).append(line + (" [timed: wall-clock times on this machine]"
                                                                         if was.get("timed") else ""))
        run_name = module_name(module)
        failures += [f"{k}: recorded, but {run_name} no longer returns it" for k, v in records.items()
                     if v.get("module") == run_name and k not in seen]
    return failures, notes


def main(argv: list[str] | None = None) -> Path | None:
    """Run the experiments (module docstring); the report's path, or None after a passing ``--check`` (a failing
    one exits with status 1)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the quick forms only (seconds to a minute each)")
    ap.add_argument("--check", action="store_true", help="with --quick: compare the quick verdicts with --verdicts "
                                                         "and exit 1 where one differs (writes no report of record)")
    ap.add_argument("--verdicts", type=Path, default=HERE / VERDICTS_FILE, help="the record --check compares with")
    ap.add_argument("--out", type=Path, default=None, help="folder for REPORT.md, verdicts.json and figures/ "
                                                           "(default paper/; --check: a temporary folder)")
    ap.add_argument("--only", default="", help="comma-separated module names without exp_ (prefixes)")
    ap.add_argument("--allow-dirty", action="store_true",
                    help="run and write the report from a tree with uncommitted changes (the header says so)")
    args = ap.parse_args(argv)
    if args.check and not args.quick:
        ap.error("--check compares quick verdicts: give --quick too")
    # Stochastic fits run the passes an experiment gives them and then say that the default tol was not met:
    # expected here, and a warning never changes a verdict.
    warnings.filterwarnings("ignore", message="the default tol .* not met")
    only = [o for o in args.only.split(",") if o] or None
    if args.check:
        return check(args, only)
    out = args.out or HERE
    figures = out / "figures"
    start = tree_state(out)
    tree = check_tree(start, args.allow_dirty, "at the start")  # before minutes of work, not after
    figures.mkdir(parents=True, exist_ok=True)
    t0, env = time.perf_counter(), environment()  # the commit and tree the run started from
    modules = experiments(only)
    results = run_all(modules, figures, args.quick)
    quick = results if args.quick else quick_forms(modules)
    end = tree_state(out)
    if end["commit"] != start["commit"]:
        end["changed"] = [f"HEAD moved from {start['commit']} to {end['commit']}"] + list(end["changed"] or [])
    ended = check_tree(end, args.allow_dirty, "at the end (something changed while it ran)")
    if tree == "clean" and ended != "clean":
        tree = f"clean at the start; at the end {ended}"
    commits = criterion_commits()
    path = write_report(out, results, time.perf_counter() - t0, args.quick, env, tree, commits)
    record_verdicts(out / VERDICTS_FILE, None if args.quick else results, quick, env, tree, commits)
    print(f"wrote {path} and {out / VERDICTS_FILE}", file=sys.stderr)
    return path


def run_all(modules: list, figures: Path, quick: bool) -> list[tuple]:
    """``[(module, result)]`` of `run_one` for each module, progress on stderr."""
    results = []
    for module in modules:
        print(f"running {module.__name__}{' (quick)' if quick else ''} ...", file=sys.stderr, flush=True)
        results.append((module, run_one(module, figures, quick)))
        print(f"  {results[-1][1]['seconds']:.0f} s", file=sys.stderr, flush=True)
    return results


def quick_forms(modules: list) -> list[tuple]:
    """The quick form of each module, its figures to a temporary folder (the full run's stay)."""
    with tempfile.TemporaryDirectory(prefix="paper-quick-") as tmp:
        figures = Path(tmp) / "figures"
        figures.mkdir()
        return run_all(modules, figures, True)


def check(args, only: list[str] | None) -> None:
    """`--check`: the quick forms against the record (`compare_verdicts`); SystemExit(1) listing what differs."""
    t0 = time.perf_counter()
    recorded = read_verdicts(args.verdicts)
    with tempfile.TemporaryDirectory(prefix="paper-check-") as tmp:
        out = args.out or Path(tmp)
        (out / "figures").mkdir(parents=True, exist_ok=True)
        modules = experiments(only)
        results = run_all(modules, out / "figures", True)
        if args.out:
            write_report(out, results, time.perf_counter() - t0, True, environment(), "not recorded (--check)",
                         criterion_commits())
    failures, notes = compare_verdicts(recorded, results)
    count = sum(len(r["claims"]) for _, r in results)
    print(f"paper-quick: {count} claims of {len(modules)} experiments in {time.perf_counter() - t0:.0f} s against "
          f"{args.verdicts} (commit {recorded.get('commit')})", file=sys.stderr)
    for line in notes:
        print(f"  differs, not failing: {line}", file=sys.stderr)
    if failures:
        print("paper-quick FAILED: a verdict moved; rerun the report (make paper) from a clean tree and commit "
              "paper/REPORT.md with paper/verdicts.json:", file=sys.stderr)
        for line in failures:
            print(f"  {line}", file=sys.stderr)
        raise SystemExit(1)
    print("paper-quick: every quick verdict as recorded", file=sys.stderr)


if __name__ == "__main__":
    main()
