"""`make paper`'s machinery (paper/run.py) on quick runs of two experiments, into a temporary folder; its
refusal to report from a tree with uncommitted changes; experiments that read no stored bench output."""

import re
from pathlib import Path

import pytest

from paper import run as paper_run


def test_every_experiment_module_keeps_the_contract():
    modules = paper_run.experiments()
    assert {m.SEED for m in modules} >= {"000", "003", "004"}
    assert [(m.SEED, m.__name__) for m in modules] == sorted((m.SEED, m.__name__) for m in modules)
    for m in modules:
        assert isinstance(m.TITLE, str) and m.TITLE and m.SEED in {"000", "002", "003", "004"} and callable(m.run)


def test_quick_report_has_its_sections_claims_and_figures(tmp_path):
    # --allow-dirty: a test run may come from a working tree with changes; the header then says so
    path = paper_run.main(["--quick", "--out", str(tmp_path), "--only", "000_fig1,003", "--allow-dirty"])
    text = path.read_text()
    assert "Tree: " in text and "nothing is read from stored bench results" in text
    assert text.startswith("# The seeds' experiments, rerun") and "quick run" in text and "make paper" in text
    assert "## Claims and verdicts" in text
    assert "| id (criteria file, its commit) | seed | experiment | claim (the paper's words) | criterion | verdict " \
           "| figure |" in text
    sections = re.findall(r"^## (Seed .*)$", text, flags=re.M)
    assert [s.split(":")[0] for s in sections] == ["Seed 000 Fig. 1", "Seed 003 Fig. 3-4, 8, 10"]
    assert "This experiment failed" not in text
    rows = [line for line in text.splitlines() if re.match(r"\| \[`00[03]_\w+`\]\(criteria/00[03]_\w+\.json\)", line)]
    assert len(rows) >= 3 and all(re.search(r"\| (reproduced|partly|not reproduced) \|", row) for row in rows)
    assert (tmp_path / "verdicts.json").is_file()  # beside the report: the quick verdicts, the full ones pending
    assert text.count("**Verdict:**") == 2
    links = re.findall(r"\]\((figures/[^)]+\.png)\)", text)
    assert "figures/000_fig1_convergence.png" in links and "figures/003_akpca.png" in links
    assert all((tmp_path / link).is_file() for link in links)
    assert not list(tmp_path.glob(".REPORT.md.*"))  # the temporary name is gone


def test_a_tree_with_changes_is_refused_unless_allowed():
    assert paper_run.check_tree({"commit": "abc", "changed": []}, False, "at the start") == "clean"
    for changed in (["kpca/model.py"], None):  # None: git could not tell
        with pytest.raises(paper_run.DirtyTree, match="--allow-dirty"):
            paper_run.check_tree({"commit": "abc", "changed": changed}, False, "at the start")
    said = paper_run.check_tree({"commit": "abc", "changed": ["kpca/model.py"]}, True, "at the start")
    assert "1 uncommitted paths (kpca/model.py)" == said


def test_the_report_outputs_do_not_count_as_changes(tmp_path):
    """What a run writes (REPORT.md, figures/ under --out) is not a change of the code it ran."""
    changed = paper_run.changed_paths((paper_run.HERE / "figures", paper_run.HERE / "REPORT.md"))
    assert changed is not None
    assert not any(p.startswith("paper/figures/") or p == "paper/REPORT.md" for p in changed)


def test_no_experiment_reads_stored_bench_output():
    for module in paper_run.experiments():
        source = re.sub(r"paper/criteria/[\w*]+\.json", "", Path(module.__file__).read_text())  # its rules, named
        assert "bench/results" not in source and "results_dir" not in source and ".json" not in source, module
