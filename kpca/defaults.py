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
"""

from __future__ import annotations

ETA_SCALE = {"kha": 0.05, "kha-t": 0.5, "kha-et": 0.1, "kha-smd": 0.05}
MU_SCALE = 0.2
XI_DEFAULT = 0.99  # seed 000 §5, set a priori
BLOCK_ELEMENTS = 2**22  # kernel-row block of about 32 MiB in float64


def default_eta0(solver: str, mean_diagonal: float) -> float:
    """eta0 = ETA_SCALE[solver] / (trace(K')/l)."""
    return ETA_SCALE[solver] / max(mean_diagonal, 1e-300)


def default_mu(mean_diagonal: float) -> float:
    """mu = MU_SCALE / (trace(K')/l)."""
    return MU_SCALE / max(mean_diagonal, 1e-300)


def default_block_size(n_rows: int) -> int:
    """Rows per kernel block: about 2^22 kernel entries, between 1 and 1024 rows."""
    return int(max(1, min(1024, n_rows, BLOCK_ELEMENTS // max(n_rows, 1))))
