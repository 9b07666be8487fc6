"""`make paper`'s machinery (paper/run.py) on quick runs of two experiments, into a temporary folder."""

import re

from paper import run as paper_run


def test_every_experiment_module_keeps_the_contract():
    modules = paper_run.experiments()
    assert {m.SEED for m in modules} >= {"000", "003", "004"}
    assert [(m.SEED, m.__name__) for m in modules] == sorted((m.SEED, m.__name__) for m in modules)
    for m in modules:
        assert isinstance(m.TITLE, str) and m.TITLE and m.SEED in {"000", "002", "003", "004"} and callable(m.run)


def test_quick_report_has_its_sections_claims_and_figures(tmp_path):
    path = paper_run.main(["--quick", "--out", str(tmp_path), "--only", "000_fig1,003"])
    text = path.read_text()
    assert text.startswith("# The seeds' experiments, rerun") and "quick run" in text and "make paper" in text
    assert "## Claims and verdicts" in text and "| seed | experiment | claim | verdict | figure |" in text
    sections = re.findall(r"^## (Seed .*)$", text, flags=re.M)
    assert [s.split(":")[0] for s in sections] == ["Seed 000 Fig. 1", "Seed 003 Fig. 3-4, 8, 10"]
    assert "This experiment failed" not in text
    rows = [line for line in text.splitlines() if line.startswith("| 000 ") or line.startswith("| 003 ")]
    assert len(rows) >= 3 and all(re.search(r"\| (reproduced|partly|not reproduced) \|", row) for row in rows)
    assert text.count("**Verdict:**") == 2
    links = re.findall(r"\]\((figures/[^)]+\.png)\)", text)
    assert "figures/000_fig1_convergence.png" in links and "figures/003_akpca.png" in links
    assert all((tmp_path / link).is_file() for link in links)
    assert not list(tmp_path.glob(".REPORT.md.*"))  # the temporary name is gone
