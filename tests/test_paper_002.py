"""Seed 002's `make paper` modules (paper/exp_002_*.py) keep the contract of paper/run.py:
run(figures, quick=True) returns markdown with a Verdict line and figure links that exist, and well-formed claims."""

from __future__ import annotations

import importlib
import re

import pytest

VERDICTS = {"reproduced", "partly", "not reproduced"}


@pytest.mark.parametrize("name", ["paper.exp_002_fig1_toy", "paper.exp_002_fig2_hyperresolution", "paper.exp_002_fig5_natural"])
def test_quick_run_keeps_the_contract(name, tmp_path):
    module = importlib.import_module(name)
    assert isinstance(module.TITLE, str) and module.TITLE
    assert module.SEED == "002"
    figures = tmp_path / "figures"
    out = module.run(figures, quick=True)
    assert set(out) >= {"markdown", "claims", "seconds"}
    assert out["seconds"] > 0
    md = out["markdown"]
    assert re.search(r"^\*\*Verdict:\*\* (reproduced|partly reproduced|not reproduced) — ", md, re.M)
    links = re.findall(r"!\[[^\]]*\]\((figures/[^)]+\.png)\)", md)
    assert links
    prefix = name.split(".")[-1].removeprefix("exp_")
    for link in links:
        assert (tmp_path / link).is_file(), link
        assert link.split("/")[-1].startswith(prefix)
    assert out["claims"]
    for claim in out["claims"]:
        assert set(claim) == {"id", "claim", "criterion", "verdict", "figure"} and claim["id"].startswith("002_")
        assert claim["claim"] and claim["criterion"] and claim["verdict"] in VERDICTS
        assert (tmp_path / claim["figure"]).is_file()
