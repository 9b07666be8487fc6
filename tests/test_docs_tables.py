"""The docs' measured tables are their results files' (issue 53: figures traced to what a bench script
wrote at a recorded commit): each table below is generated here, by the bench script's own formatter, from
its results file, and must stand verbatim in the page that shows it. A rerun whose numbers move fails this
test until the page shows the new table."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _solvers(document):
    from bench.solvers import markdown

    return markdown(document)


def _time_to_accuracy(document):
    from bench.time_to_accuracy import markdown

    return markdown(document)


def _adversarial(document):
    from bench._adversarial import Outcome
    from bench.adversarial import table

    return table([Outcome(**outcome) for outcome in document["outcomes"]])


TABLES = [
    ("docs/choosing-a-solver.md", "solvers.json", _solvers),
    ("docs/choosing-a-solver.md", "time_to_accuracy.json", _time_to_accuracy),
    ("docs/choosing-a-solver.md", "adversarial_before_400.json", _adversarial),
    ("docs/choosing-a-solver.md", "adversarial_after_400.json", _adversarial),
]


@pytest.mark.parametrize("page, name, formatter", TABLES, ids=[f"{p}:{n}" for p, n, _ in TABLES])
def test_a_measured_table_is_its_results_file(page, name, formatter):
    document = json.loads((ROOT / "bench" / "results" / name).read_text())
    assert document["environment"].get("commit"), f"{name}: written at no recorded commit"
    table = formatter(document).strip()
    text = (ROOT / page).read_text()
    missing = [line for line in table.splitlines() if line not in text.splitlines()]
    assert not missing, f"{page} does not show {name}'s table (generate it with the script's --markdown): {missing[:3]}"
