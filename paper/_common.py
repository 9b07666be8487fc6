"""What the seed 000 experiments share: the paper's tuning grid, a per-pass excess-error curve, plots.

Seed 000 §5 tuned every gain "by a local search over values in the set {a 10^b : a in {1, 2, 5}, b in Z}"
on the curves it plots; `local_search` does the same, scoring a value by the excess error (eq. 22) after
the last pass of the run it tunes (a run that diverges for good scores worse than any finished one; the divergence guard of
`kpca.driver.run_passes`, which restarts a pass with smaller gains, is part of every run).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from bench._common import start_iterative
from kpca.driver import Diverged, PassHooks, run_passes
from kpca.metrics import excess_error
from paper._criteria import NOT_TESTABLE

SOLVER_LABELS = {"kha": "KHA (constant gain)", "kha-t": "KHA/t", "kha-et": "KHA/et", "kha-smd": "KHA-SMD"}


def on_grid(value: float) -> float:
    """The value of {1, 2, 5} x 10^b nearest to ``value`` (> 0) on a log scale."""
    b = math.floor(math.log10(value))
    candidates = [a * 10.0 ** e for e in (b - 1, b, b + 1) for a in (1, 2, 5)]
    return min(candidates, key=lambda c: abs(math.log(c / value)))


def grid_step(value: float, up: bool) -> float:
    """The next value of the grid above (``up``) or below ``value`` (itself on the grid)."""
    b = math.floor(math.log10(value) + 1e-9)
    a = round(value / 10.0**b)
    ladder = {1: (2, 0.5), 2: (5, 1), 5: (10, 2)}[a]
    return on_grid((ladder[0] if up else ladder[1]) * 10.0**b)


def local_search(score: Callable[[float], float], start: float, max_steps: int = 8) -> tuple[float, dict]:
    """The paper's local search on the grid: from ``on_grid(start)``, step to the better neighbour while
    it improves ``score`` (lower is better). Returns ``(best value, {value: score} of every value tried)``."""
    tried: dict[float, float] = {}

    def s(v):
        if v not in tried:
            tried[v] = score(v)
        return tried[v]

    best = on_grid(start)
    for _ in range(max_steps):
        lo, hi = grid_step(best, False), grid_step(best, True)
        nxt = min((lo, hi), key=s)
        if s(nxt) >= s(best):
            break
        best = nxt
    return best, tried


def curve(rows, Kc: np.ndarray, e_min: float, solver: str, r: int, passes: int, mean_diagonal: float,
          block: int = 256, seed: int = 0, **params) -> dict:
    """Excess error (eq. 22) after each of ``passes`` passes of ``solver`` from the paper's random start,
    with ``params`` (eta0, mu, ...) as given. Returns ``{"excess_error": [...], "gain_reductions", "state",
    "seconds"}``; a run that diverges for good has NaN from there on."""
    _, state = start_iterative(solver, rows, r, mean_diagonal, seed=seed, **params)
    errors: list[float] = []
    t0 = time.perf_counter()
    try:
        state, _ = run_passes(rows, state, passes, block,
                              hooks=PassHooks(on_pass=lambda s: errors.append(excess_error(Kc, s["AK"], e_min))))
    except Diverged:
        errors += [float("nan")] * (passes - len(errors))
    return {"excess_error": errors, "gain_reductions": int(state.get("gain_reductions", 0)), "state": state,
            "seconds": time.perf_counter() - t0}


def final_score(run: dict) -> float:
    """What `local_search` minimises: the last excess error, infinite for a run that diverged for good (one
    whose gains the divergence guard cut and that then finished is scored like any other)."""
    last = run["excess_error"][-1]
    return float(last) if np.isfinite(last) else float("inf")


def fmt(x: float) -> str:
    """A number as the report prints it (3 significant digits)."""
    return "diverged" if not np.isfinite(x) else f"{x:.3g}"


def plot_curves(ax, curves: dict, title: str, ylabel: str = "excess relative reconstruction error",
                log: bool = True) -> None:
    """One panel: ``curves`` maps a label to its per-pass values (pass 1, 2, ...)."""
    for label, values in curves.items():
        if isinstance(values, (int, float)):
            ax.axhline(values, color="k", ls="--", label=label)
            continue
        x = np.arange(1, len(values) + 1)
        (ax.semilogy if log else ax.plot)(x, values, marker="o", ms=2.5, label=label)
    ax.set_title(title)
    ax.set_xlabel("passes through the data")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def figure(n_panels: int, width: float = 5.2):
    """A matplotlib figure (Agg) with ``n_panels`` axes side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, n_panels, figsize=(width * n_panels, 4.0))
    return fig, list(np.atleast_1d(axes))


def save_figure(fig, path, dpi: int = 100) -> None:
    """Lay out, write and close ``fig``."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def graded(holds: int, total: int) -> str:
    """The graded verdict of a claim that holds in ``holds`` of ``total`` cases checked: reproduced if in
    every case, not reproduced if in none, partly otherwise (the rule the criteria files state in words)."""
    return "reproduced" if holds == total else ("not reproduced" if holds == 0 else "partly")


def share(holds: int, total: int, criterion) -> str:
    """The verdict of a claim over a range (ells, noise levels, faces: one case may fall either way) that holds
    in ``holds`` of ``total`` cases: reproduced if in at least ``criterion["reproduced_share_pct"]`` % of them,
    not reproduced if in under ``criterion["not_reproduced_below_pct"]`` %, partly otherwise (``criterion``: a
    `paper._criteria.Criterion`)."""
    percent = 100.0 * holds / total if total else 0.0
    if percent >= criterion["reproduced_share_pct"]:
        return "reproduced"
    return "not reproduced" if percent < criterion["not_reproduced_below_pct"] else "partly"


def ordered(values: dict, order) -> bool:
    """Whether ``values[order[0]] < values[order[1]] < ...`` (a criterion's ``order``, best first)."""
    return all(values[a] < values[b] for a, b in zip(order, order[1:]))


def overall(verdicts) -> str:
    """A section's verdict from its claims': reproduced if all are, not reproduced if none is even partly,
    partly otherwise; claims not testable here do not count (all of them: "not testable here")."""
    verdicts = set(verdicts) - {NOT_TESTABLE} or {NOT_TESTABLE}
    return verdicts.pop() if len(verdicts) == 1 and verdicts != {"partly"} else "partly"


def verdict_word(verdict: str) -> str:
    """A verdict as a sentence says it: ``partly`` is ``partly reproduced``."""
    return "partly reproduced" if verdict == "partly" else verdict
