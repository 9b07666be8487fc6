"""The report's criteria and its verdict check (issue 53): one criteria file (paper/criteria/<id>.json) per claim an
experiment returns and none without its claim, no verdict threshold left in the experiments' code, and
`make paper-quick` (``paper/run.py --quick --check``) failing when a verdict moves, whether the record or the
rule changed."""

from __future__ import annotations

import ast
import copy
import dataclasses
import json
from types import SimpleNamespace

import pytest

from paper import _criteria
from paper import run as paper_run

CRITERIA = _criteria.load_all()
RECORDED = json.loads((paper_run.HERE / paper_run.VERDICTS_FILE).read_text())
MODULES = {paper_run.module_name(m): m for m in paper_run.experiments()}


def test_every_criteria_file_is_complete_and_names_its_experiment():
    assert len(CRITERIA) >= 26
    for c in CRITERIA.values():
        assert c.module in MODULES and c.seed == MODULES[c.module].SEED and c.id.startswith(f"{c.seed}_"), c.id
        assert c.claim and c.source and c.text and "{" not in c.text, c.id
        assert c.testable or len(c.not_testable) > 40, c.id  # not testable here: with its reason
    assert all(_criteria.of_module(name) for name in MODULES)  # every experiment has its claims


def test_every_claim_returned_has_a_criteria_file_and_no_file_is_orphaned():
    """verdicts.json holds the claims the experiments returned when it was written (run.py refuses a module whose
    claims are not exactly its criteria files', below; make paper-quick reruns every module and compares)."""
    assert set(RECORDED["claims"]) == set(CRITERIA)
    for claim_id, record in RECORDED["claims"].items():
        c = CRITERIA[claim_id]
        allowed = _criteria.VERDICTS if c.testable else (_criteria.NOT_TESTABLE,)
        assert record["module"] == c.module and record["timed"] == c.timed, claim_id
        assert record["quick"] in allowed and record["full"] in (None, *allowed), claim_id


def test_a_module_whose_claims_are_not_its_criteria_files_is_refused():
    toy, motion = MODULES["exp_002_fig1_toy"], MODULES["exp_000_fig4_motion"]
    good = [CRITERIA["002_fig1_similarity"].result("reproduced", "figures/x.png")]
    paper_run.check_claims(toy, good)
    for claims in ([], good + good, good + [{**good[0], "id": "002_fig1_unwritten"}]):
        with pytest.raises(ValueError, match="criteria files"):
            paper_run.check_claims(toy, claims)
    with pytest.raises(ValueError, match="verdict"):
        paper_run.check_claims(toy, [{**good[0], "verdict": _criteria.NOT_TESTABLE}])
    untestable = CRITERIA["000_fig4_mse"].result("reproduced")  # a claim not testable here gets no verdict
    assert untestable["verdict"] == _criteria.NOT_TESTABLE and untestable["reason"]
    order = CRITERIA["000_fig4_order"].result("reproduced")
    paper_run.check_claims(motion, [order, untestable])
    with pytest.raises(ValueError, match="verdict"):
        paper_run.check_claims(motion, [order, {**untestable, "verdict": "reproduced"}])
    with pytest.raises(ValueError, match="verdict"):
        CRITERIA["000_fig4_order"].result(None)


def test_no_verdict_threshold_is_left_in_the_experiments_code():
    """Every number a verdict compares with comes from the criteria files: the experiments compare with 0 and 1
    at most (below, above; faster than), array ranks aside."""
    found = []
    for name, module in MODULES.items():
        tree = ast.parse(open(module.__file__, encoding="utf-8").read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and not (isinstance(node.left, ast.Attribute) and node.left.attr == "ndim"):
                for operand in (node.left, *node.comparators):
                    if isinstance(operand, ast.Constant) and isinstance(operand.value, (int, float)) \
                            and not isinstance(operand.value, bool) and operand.value not in (0, 1):
                        found.append(f"{name}:{node.lineno}: {operand.value}")
    assert found == []


def check(tmp_path, recorded: dict) -> None:
    """`make paper-quick` on seed 002's toy example (a second), against ``recorded`` written to a file."""
    path = tmp_path / "verdicts.json"
    path.write_text(json.dumps(recorded))
    assert paper_run.main(["--quick", "--check", "--only", "002_fig1", "--verdicts", str(path)]) is None


def test_the_check_passes_on_the_recorded_verdicts(tmp_path, capsys):
    check(tmp_path, RECORDED)
    assert "every quick verdict as recorded" in capsys.readouterr().err


def test_the_check_fails_when_the_recorded_verdict_differs(tmp_path, capsys):
    altered = copy.deepcopy(RECORDED)
    record = altered["claims"]["002_fig1_similarity"]
    record["quick"] = "partly" if record["quick"] != "partly" else "reproduced"
    with pytest.raises(SystemExit) as failed:
        check(tmp_path, altered)
    assert failed.value.code == 1
    err = capsys.readouterr().err
    assert "paper-quick FAILED" in err and f"002_fig1_similarity: quick verdict" in err and record["quick"] in err


def test_the_check_fails_when_a_changed_rule_moves_the_verdict(tmp_path, monkeypatch, capsys):
    """The code's side: the same record, a rule whose threshold no component can meet (|cos| > 1) or every one
    meets (|cos| > -1), whichever moves the recorded verdict."""
    toy = MODULES["exp_002_fig1_toy"]
    recorded = RECORDED["claims"]["002_fig1_similarity"]["quick"]
    rule = CRITERIA["002_fig1_similarity"]
    moved = dataclasses.replace(rule, params={**rule.params, "min_abs_cos": 1.0 if recorded == "reproduced" else -1.0})
    monkeypatch.setattr(toy, "SIMILARITY", moved)
    with pytest.raises(SystemExit) as failed:
        check(tmp_path, RECORDED)
    assert failed.value.code == 1 and "002_fig1_similarity: quick verdict" in capsys.readouterr().err


_Module = SimpleNamespace(SEED="002", TITLE="Seed 002 Fig. 1: toy", __name__="paper.exp_002_fig1_toy")  # a stand-in


def test_what_the_check_counts_as_a_failure():
    records = {"claims": {"002_fig1_similarity": {"module": "exp_002_fig1_toy", "quick": "reproduced", "timed": False},
                          "002_fig1_gone": {"module": "exp_002_fig1_toy", "quick": "partly", "timed": False},
                          "002_fig1_timed": {"module": "exp_002_fig1_toy", "quick": "partly", "timed": True}}}
    claims = [{"id": "002_fig1_similarity", "verdict": "reproduced"}, {"id": "002_fig1_timed", "verdict": "reproduced"},
              {"id": "002_fig1_new", "verdict": "partly"}]
    failures, notes = paper_run.compare_verdicts(records, [(_Module, {"claims": claims})])
    assert len(failures) == 2 and any("002_fig1_new: no recorded verdict" in f for f in failures)
    assert any("002_fig1_gone: recorded, but exp_002_fig1_toy no longer returns it" in f for f in failures)
    assert len(notes) == 1 and "002_fig1_timed" in notes[0] and "timed" in notes[0]  # wall clock: listed, not failed
    raised = [{"id": "002_fig1_similarity", "verdict": paper_run.RAISED}]
    failures, _ = paper_run.compare_verdicts({"claims": {}}, [(_Module, {"claims": raised})])
    assert failures == ["002_fig1_similarity: the experiment raised (section Seed 002 Fig. 1)"]
