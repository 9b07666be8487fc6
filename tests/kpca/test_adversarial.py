"""The adversarial suite (issue 51): every registered solver, and the default's path at scale, on hostile
inputs against the exact eigendecomposition (`bench._adversarial`: the cases, the configurations, the
reference and the rule). The rule for every cell: the served answer is right (excess <= max(tol^2, 1e-6)
and eigenvalues within 1e-6 of lambda_1 for the exact solvers; an approximate one within ten times what it
achieves on the benign case, and never an eigenvalue above the rows'), or the model's warnings say that it
is not, with the figure, or the fit is refused with a message naming what to change. Never silently
wrong, never a crash. The table at more rows is bench/adversarial.py's (docs/choosing-a-solver.md)."""

import pytest

from bench._adversarial import CONFIGS, run_suite

ROWS = 300  # each case at 300 rows: all its fits in a few seconds per configuration


@pytest.mark.parametrize("config", list(CONFIGS))
def test_no_cell_is_silently_wrong(config):
    outcomes = run_suite(ROWS, [config])
    assert outcomes, config
    bad = [(o.case, o.verdict, o.excess, o.eigenvalue_error, o.error) for o in outcomes
           if o.verdict in ("silently wrong", "crashed")]
    assert not bad, bad


def test_the_rule_can_fail():
    """The verdict is not a tautology: a served answer a little off, with no warning, reads as silently
    wrong; with a warning that gives a figure, as warned; without a figure in the warning, still wrong."""
    from bench._adversarial import Outcome, verdict

    exact, approximate = CONFIGS["exact"], CONFIGS["nystrom"]
    off = Outcome("c", "exact", excess=1e-4, eigenvalue_error=0.0, eigenvalue_excess=0.0)
    assert verdict(off, exact, None) == "silently wrong"
    off.warnings = ["params.tol 0.001 not met in 20 passes (relative residual 0.05)"]
    assert verdict(off, exact, None) == "warned"
    off.warnings = ["something is off"]
    assert verdict(off, exact, None) == "silently wrong"
    benign = Outcome("b", "nystrom", excess=1e-3, eigenvalue_error=1e-3, eigenvalue_excess=-1e-3)
    fine = Outcome("c", "nystrom", excess=5e-3, eigenvalue_error=5e-3, eigenvalue_excess=-1e-3)
    above = Outcome("c", "nystrom", excess=5e-3, eigenvalue_error=5e-3, eigenvalue_excess=1e-3)
    assert verdict(fine, approximate, benign) == "right"
    assert verdict(above, approximate, benign) == "silently wrong"  # above the rows' eigenvalue
