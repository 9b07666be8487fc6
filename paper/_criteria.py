"""The rule that decides each claim's verdict, read from ``paper/criteria/<claim id>.json`` (one file a claim).

A criteria file is committed before the run that uses it, so the history shows that a verdict was decided by a
rule written before its numbers were seen (``git log -- paper/criteria/<id>.json``; the report prints the commit
that last changed each file). Its fields:

* ``id``: the claim's stable id (the file's name), ``seed`` and ``module`` (the ``paper/exp_*.py`` that tests it,
  without ``.py``), ``source`` (section and figure of the paper);
* ``claim``: the paper's words; ``criterion``: the rule in words, with ``{name}`` fields filled from ``params``;
* ``params``: every number the rule uses (thresholds, bands, shares, passes, the ells or noise levels it
  covers): the experiments read them here and hold no threshold of their own;
* ``timed``: true where the rule compares wall-clock times (then a quick run's verdict depends on the machine's
  load, and ``paper/run.py --check`` reports a change of it without failing);
* ``not_testable`` (optional): why the data here cannot decide the claim; it then gets no verdict;
* ``note`` (optional): why the rule is what it is, when it changed and what it replaced.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

CRITERIA_DIR = Path(__file__).resolve().parent / "criteria"
VERDICTS = ("reproduced", "partly", "not reproduced")
NOT_TESTABLE = "not testable here"
FIELDS = {"id", "seed", "module", "source", "claim", "criterion", "params", "timed", "not_testable", "note"}


@dataclass(frozen=True)
class Criterion:
    """One claim's criteria file, read (module docstring). ``c["name"]`` is ``c.params["name"]``."""

    id: str
    seed: str
    module: str
    source: str
    claim: str
    criterion: str
    params: dict = field(default_factory=dict)
    timed: bool = False
    not_testable: str | None = None
    note: str | None = None

    def __getitem__(self, name: str):
        return self.params[name]

    @property
    def text(self) -> str:
        """The criterion in words, its ``{name}`` fields filled from ``params`` (KeyError for one it lacks)."""
        return self.criterion.format(**self.params)

    @property
    def testable(self) -> bool:
        return self.not_testable is None

    def result(self, verdict: str | None, figure: str = "") -> dict:
        """The claim record an experiment returns (`paper/run.py`): ``id``, ``claim``, ``criterion``,
        ``verdict`` and ``figure``. A claim not testable here gets ``"not testable here"`` and its ``reason``
        whatever ``verdict`` is given (None: none computed); a testable one needs a verdict in `VERDICTS`."""
        out = {"id": self.id, "claim": self.claim, "criterion": self.text, "figure": figure}
        if not self.testable:
            return {**out, "verdict": NOT_TESTABLE, "reason": self.not_testable}
        if verdict not in VERDICTS:
            raise ValueError(f"{self.id}: verdict {verdict!r} is not one of {VERDICTS}")
        return {**out, "verdict": verdict}


def read(path: Path) -> Criterion:
    """One criteria file, checked: known fields only, the id its file's name, the text's fields in params."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    unknown = set(doc) - FIELDS
    if unknown:
        raise ValueError(f"{path.name}: unknown fields {sorted(unknown)}")
    found = Criterion(**doc)
    if found.id != path.stem:
        raise ValueError(f"{path.name}: id {found.id!r} is not the file's name")
    found.text  # noqa: B018 - a field the params lack raises here, not in the middle of a run
    return found


@functools.cache
def load_all() -> dict[str, Criterion]:
    """Every criteria file under `CRITERIA_DIR`, by id (read once)."""
    return {c.id: c for c in map(read, sorted(CRITERIA_DIR.glob("*.json")))}


def criterion(claim_id: str) -> Criterion:
    """The criteria of one claim; KeyError naming the id (and the folder) where there is no file."""
    try:
        return load_all()[claim_id]
    except KeyError:
        raise KeyError(f"no criteria file {CRITERIA_DIR.name}/{claim_id}.json") from None


def of_module(module: str) -> list[Criterion]:
    """The criteria of the claims of one experiment module (``exp_...``, or its dotted name), by id."""
    name = module.rsplit(".", 1)[-1]
    return [c for c in load_all().values() if c.module == name]
