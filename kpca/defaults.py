"""Every default of the fit, in one place, and the rules that make the gains transfer across data.

The schemas of the service, the workers, the estimator and the solver
registry read their defaults from here; nothing else spells them out.

Maintenance note (the gain rule). With components normalised in feature
space (``A K' A^T = I``), ``y_i = <w_i, Phi'(x)>`` has ``E[y_i^2] =
lambda_i(K')/l``, the i-th eigenvalue of the feature-space covariance
``C = K'/l``. A KHA step moves row i by about ``eta_i * y_i^2``, so the
dimensionless quantity that decides speed and stability is ``eta_i *
lambda_i(C)``; it does not depend on ``l``, and rescaling the kernel by
``c`` rescales ``lambda(C)`` by ``c``. All eigenvalues of C are bounded by its
trace, ``trace(K')/l`` = `kpca.rows.Centering.mean_diagonal` (``s`` below),
which the centring pass gives for free. Hence, for parameters the user
leaves out:

    eta0 = gain_scale / s,      mu = MU_SCALE / s,

with ``gain_scale`` declared by each solver (`kpca.solvers.Solver.gain_scale`).

For KHA/et the per-component gain (eq. 12) is ``eta0 ||lambda|| / lambda_i``,
so ``eta_i lambda_i(C) = eta0 ||lambda(C)|| <= gain_scale`` for every
component. ``mu`` is a gain on the log-gain and has units of ``1/lambda``
too (``Gamma K' B^T`` scales with the kernel), hence the same normalisation.
A user-given eta0 or mu is used unchanged, as in the paper. The scale
constants were chosen on digits (bench/convergence.py) and are checked by
tests on other kernels, widths and sizes.

A warm start (``init="subset"``, `kpca.solvers._warm`) begins close to the
solution, where the default gains' noise would throw most of the start away
in the first pass; its defaults are scaled by WARM_GAIN_SCALE, the largest
scale tried whose first pass keeps the start. The noise a pass adds grows
with its number of steps l (it accumulates like a random walk until the
iteration forgets it, after about ``1 / (eta lambda)`` steps), so on larger
sets the same scale undoes more of the start: the warm scale is
``WARM_GAIN_SCALE * min(1, WARM_REFERENCE_ROWS / l)``. The measurements
behind both choices are in docs/papers.md (*How the defaults were chosen*).
"""

from __future__ import annotations

PASSES = 20  # passes of an iterative fit
EXACT_LIMIT = 3000  # largest l whose l x l kernel matrix a fit forms (exact solver, exact convergence figure)
CHECKPOINT_KEEP = 3  # checkpoints kept per model: the last CHECKPOINT_KEEP, plus the best
MU_SCALE = 0.2
XI = 0.99  # SMD decay factor, set a priori (seed 000 §5)
WARM_GAIN_SCALE = 0.03  # eta0 and mu defaults after init="subset", for l <= WARM_REFERENCE_ROWS
WARM_REFERENCE_ROWS = 1000
WARM_INITS = ("subset", "nystrom", "rskpca")  # starts close to the solution: the gains are scaled down
# Rows per block of a pass. The update never forms a block's rows when they come from a row
# source (kpca.rows.KernelRows: memory O(r l + b^2) whatever b), and its O(r^2 l) work per
# block is spread over b rows; bench/out_of_core.py compares block sizes. 1024 is also the
# blocked solver's segment.
BLOCK_ROWS = 1024
# Where rows are formed (b x l entries each): a block of about 128 MiB in float64.
BLOCK_ELEMENTS = 2**24


def default_eta0(gain_scale: float, mean_diagonal: float, init: str = "random", n_rows: int | None = None,
                 init_size: int | None = None) -> float:
    """eta0 = gain_scale / (trace(K')/l), times `warm_scale` after a warm start (``gain_scale``: the
    solver's, `kpca.solvers.Solver.gain_scale`)."""
    return gain_scale * warm_scale(init, n_rows, init_size) / max(mean_diagonal, 1e-300)


def default_mu(mean_diagonal: float, init: str = "random", n_rows: int | None = None,
               init_size: int | None = None) -> float:
    """mu = MU_SCALE / (trace(K')/l), times `warm_scale` after a warm start."""
    return MU_SCALE * warm_scale(init, n_rows, init_size) / max(mean_diagonal, 1e-300)


def warm_scale(init: str, n_rows: int | None = None, init_size: int | None = None) -> float:
    """1 for a random start; after ``init="subset"`` on m = ``init_size`` of l = ``n_rows`` rows
    ``WARM_GAIN_SCALE * min(1, WARM_REFERENCE_ROWS / l) * (1 - m / l)``: the last factor because the
    start is the best the m rows' span can express, exact kernel PCA at m = l, and the passes have
    the less to add (and should add the less noise) the more of the data the subset covers. The same
    after ``init="nystrom"`` with m = ``init_size`` landmarks (its components are the best their
    span holds, seed 003), and without the last factor after ``init="rskpca"`` (its centres are
    not rows). Without n_rows: WARM_GAIN_SCALE."""
    if init not in WARM_INITS:
        return 1.0
    if n_rows is None:
        return WARM_GAIN_SCALE
    l = max(int(n_rows), 1)
    uncovered = 1.0 if init_size is None else max(0.0, 1.0 - int(init_size) / l)
    return WARM_GAIN_SCALE * min(1.0, WARM_REFERENCE_ROWS / l) * uncovered


def default_block_size(n_rows: int) -> int:
    """Rows per block of a pass: BLOCK_ROWS, or all n_rows if fewer (see BLOCK_ROWS)."""
    return int(max(1, min(BLOCK_ROWS, n_rows)))


def formed_block_size(n_rows: int) -> int:
    """Rows per block where the rows are formed: about BLOCK_ELEMENTS kernel entries, 1 to BLOCK_ROWS rows."""
    return int(max(1, min(BLOCK_ROWS, n_rows, BLOCK_ELEMENTS // max(n_rows, 1))))
