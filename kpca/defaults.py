"""Gain defaults that transfer across data sets, kernels and kernel widths.

Maintenance note. With components normalised in feature space
(``A K' A^T = I``), ``y_i = <w_i, Phi'(x)>`` has ``E[y_i^2] = lambda_i(K')/l``,
the i-th eigenvalue of the feature-space covariance ``C = K'/l``. A KHA step
moves row i by about ``eta_i * y_i^2``, so the dimensionless quantity that
decides speed and stability is ``eta_i * lambda_i(C)``; it does not depend on
``l``, and rescaling the kernel by ``c`` rescales ``lambda(C)`` by ``c``. All
eigenvalues of C are bounded by its trace, ``trace(K')/l`` =
`Centering.mean_diagonal` (``s`` below), which one streaming pass gives for
free. Hence the rule, for parameters the user leaves out:

    eta0 = ETA_SCALE[solver] / s,      mu = MU_SCALE / s.

For KHA/et the per-component gain (eq. 12) is ``eta0 ||lambda|| / lambda_i``,
so ``eta_i lambda_i(C) = eta0 ||lambda(C)|| <= ETA_SCALE`` for every
component. The scale constants were chosen on digits (Gaussian kernel, sigma
3 on pixels in [0, 1], r = 16, 20 passes, see bench/convergence.py) and are
checked by tests on other kernels, widths and sizes. ``mu`` is a gain on the
log-gain and has units of ``1/lambda`` too (``Gamma K' B^T`` scales with the
kernel), hence the same normalisation. A user-given eta0 or mu is used
unchanged, as in the paper.

A warm start (``init="subset"``, `kpca.solvers._warm`) begins close to the
solution, where the default gains' noise would throw most of the start away
in the first pass; its defaults are scaled by WARM_GAIN_SCALE. Measured on
digits[:1000]/16 (Gaussian, m = 300; excess error at the start, after 1 and
20 passes): sigma 3, r 16 -- scale 1: 1.0e-3, 5.4e-1, 2.6e-3; 0.1: 2.0e-2,
5.1e-5; 0.03: 4.1e-4, 6.8e-5 (random start, scale 1: 5.4, 8.8e-1, 4.0e-3);
sigma 6, r 8 -- scale 1: 6.2e-6, 1.9e-1, 7.6e-4; 0.1: 5.5e-3, 9.8e-6;
0.03: 7.1e-5, 1.2e-5. 0.03 is the largest scale tried whose first pass
does not lose much of the start.

The noise a pass adds grows with its number of steps l (the steps' noise
accumulates like a random walk until the iteration forgets it, after about
``1 / (eta lambda)`` steps), so on larger sets the same scale undoes more of
the start: the warm scale is ``WARM_GAIN_SCALE * min(1, WARM_REFERENCE_ROWS / l)``.
Measured on digits repeated with jitter 0.05 (sigma 3, r 16, m 1000;
excess error of the served Ritz components, `kpca.solvers._ritz`, at the
start, after 1 and 5 passes): l 3000 -- scale 0.03: 1.7e-5, 1.6e-4, 8.9e-6;
0.01: 9.1e-6, 2.5e-6; 0.003: 1.4e-5, 8.0e-6. l 10,000 -- 0.03: 3.1e-5,
1.4e-3, 9.4e-5; 0.01: 6.8e-5, 4.0e-6; 0.003: 8.7e-6, 1.7e-6. The rule picks
0.01 and 0.003, the best of each row.
"""

from __future__ import annotations

ETA_SCALE = {"kha": 0.05, "kha-t": 0.5, "kha-et": 0.1, "kha-smd": 0.05}
MU_SCALE = 0.2
WARM_GAIN_SCALE = 0.03  # eta0 and mu defaults after init="subset", for l <= WARM_REFERENCE_ROWS
WARM_REFERENCE_ROWS = 1000
XI_DEFAULT = 0.99  # seed 000 §5, set a priori
# Rows per block of a pass. The update never forms a block's rows when they come from a row
# source (kpca.rows.KernelRows: memory O(r l + b^2) whatever b), and its O(r^2 l) work per
# block is spread over b rows: at l = 100,000, n = 256 a kha-smd pass took 127 s in blocks of
# 1024 rows against 180 s in blocks of 167. 1024 is also the blocked solver's segment.
BLOCK_ROWS = 1024
# Where rows are formed (b x l entries each): a block of about 128 MiB in float64.
BLOCK_ELEMENTS = 2**24


def default_eta0(solver: str, mean_diagonal: float, init: str = "random", n_rows: int | None = None) -> float:
    """eta0 = ETA_SCALE[solver] / (trace(K')/l), times `warm_scale` after a warm start."""
    return ETA_SCALE[solver] * warm_scale(init, n_rows) / max(mean_diagonal, 1e-300)


def default_mu(mean_diagonal: float, init: str = "random", n_rows: int | None = None) -> float:
    """mu = MU_SCALE / (trace(K')/l), times `warm_scale` after a warm start."""
    return MU_SCALE * warm_scale(init, n_rows) / max(mean_diagonal, 1e-300)


def warm_scale(init: str, n_rows: int | None = None) -> float:
    """1 for a random start; after ``init="subset"``
    ``WARM_GAIN_SCALE * min(1, WARM_REFERENCE_ROWS / n_rows)`` (without n_rows: WARM_GAIN_SCALE)."""
    if init != "subset":
        return 1.0
    return WARM_GAIN_SCALE * (1.0 if n_rows is None else min(1.0, WARM_REFERENCE_ROWS / max(int(n_rows), 1)))


def default_block_size(n_rows: int) -> int:
    """Rows per block of a pass: BLOCK_ROWS, or all n_rows if fewer (see BLOCK_ROWS)."""
    return int(max(1, min(BLOCK_ROWS, n_rows)))


def formed_block_size(n_rows: int) -> int:
    """Rows per block where the rows are formed: about BLOCK_ELEMENTS kernel entries, 1 to BLOCK_ROWS rows."""
    return int(max(1, min(BLOCK_ROWS, n_rows, BLOCK_ELEMENTS // max(n_rows, 1))))
