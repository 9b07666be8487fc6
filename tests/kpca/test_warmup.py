"""`kpca.warmup`'s parts: two processes of ``make warm`` compile every run of the warm-up between them."""

import pytest

from kpca.kernels import KERNELS
from kpca.solvers import SOLVERS
from kpca.warmup import PARTS, main, warm_runs, warm_up


def test_the_two_parts_share_every_run_once():
    whole = warm_runs("all")
    autoencoders, others = warm_runs("autoencoders"), warm_runs("others")
    assert autoencoders and others
    assert sorted(map(repr, autoencoders + others)) == sorted(map(repr, whole))
    assert {solver for solver, _ in whole} == set(SOLVERS)
    assert {kernel["kernel"] for _, kernel in whole} == set(KERNELS)
    assert {solver for solver, _ in autoencoders} == {"akpca", "ds-akpca"}


def test_an_unknown_part_is_refused_by_name(capsys):
    with pytest.raises(ValueError, match="part"):
        warm_runs("most")
    with pytest.raises(ValueError, match="part"):  # before the default fit's compilation, not after it
        warm_up(part="most")
    with pytest.raises(SystemExit):
        main(["--part", "most"])
    assert "--part" in capsys.readouterr().err
    assert set(PARTS) == {"all", "autoencoders", "others"}
