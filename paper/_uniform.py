"""Seed 004's own uniform baselines, as its §6 describes them: subsampled KPCA and the regular Nyström method.

Seed 004 compares reduced-set KPCA with "1) subsampled KPCA with bases chosen via random uniform sampling, 2)
the regular Nyström method with bases chosen via random uniform sampling" (and density-weighted Nyström, the
library's ``nystrom-weighted``). Neither is a library solver as the paper runs it, so paper/exp_004_reduced_set.py
fits them here, with the library's kernel blocks (`kpca.kernels.kernel_block`) and eigensolver (`kpca._dense.eigh`).

Both draw m of the l training rows uniformly (`kpca.reduced_sets.uniform_subset`: the rows the library's
``subsampled`` and ``nystrom`` draw with the same seed) and diagonalise their m x m kernel matrix centred by their
own mean ``mu_S`` in feature space, ``K'_S = [<Phi(s_i) - mu_S, Phi(s_j) - mu_S>]``, keeping its r leading pairs
``(lambda_hat_t, v_hat_t)``. Every kernel value is centred by ``mu_S``:
``k'(x, y) = k(x, y) - a(x) - a(y) + g`` with ``a(x) = mean_j k(x, s_j)`` and ``g = mean_ij k(s_i, s_j)``
(centring by the mean of all l rows would cost the O(l^2) pass that kernel PCA pays).

* **subsampled KPCA** (``extend=False``): kernel PCA of the m rows and nothing more. A point projects as
  ``y_t(x) = v_hat_t^T k'_S(x) / sqrt(lambda_hat_t)`` (m kernel values); eigenvalue estimates
  ``(l/m) lambda_hat_t``. Unlike the library's ``subsampled``, it makes no pass over the other l - m rows (that
  solver turns its components to their Rayleigh-Ritz basis over all rows,
  `kpca.solvers._reduced.supported_eigenvalues`; the span, hence the bench's embedding error, is the same).
* **the regular Nyström method** (``extend=True``): the eigenvectors extended to all l training rows by the
  Nyström formula (Williams and Seeger; seed 003 eq. 13-14), ``u_t = sqrt(m/l) K'_lS v_hat_t / lambda_hat_t`` and
  ``lambda_t = (l/m) lambda_hat_t``, then kernel PCA's model with these as its eigenvectors: coefficients
  ``alpha_t = u_t / sqrt(lambda_t)`` over all l rows, a point projecting as ``y_t(x) = alpha_t^T k'(x)`` with l
  kernel values. So it keeps the training rows (seed 004 Table 2: O(n r) space; §2: "both methods require the
  retention of the full dataset for computing projections; while the training cost may be lower, the testing
  cost remains the same"). Seed 003 eq. 13 writes the factor sqrt(m) / l instead of sqrt(m / l): a constant,
  which changes no figure of the bench (the embedding error is measured after an r x r alignment, and 3-NN
  distances scale alike). With m = l both are exact kernel PCA (tests/test_paper_uniform.py).

Cost of a fit: O(m^2 n + m^3), and O(l m (n + r)) more for the extension; of a projection, O(m n) or O(l n) a
point. Components past the rank of ``K'_S`` are zero rows with eigenvalue 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kpca._dense import eigh
from kpca.kernels import KernelSpec, kernel_block
from kpca.reduced_sets import uniform_subset

BLOCK_ROWS = 2048  # points projected at a time: memory O(BLOCK_ROWS * kept rows)


@dataclass
class UniformModel:
    """A fitted uniform baseline (module docstring).

    Attributes
    ----------
    points : ndarray of shape (p, n)
        The rows the model keeps: the m sampled rows, or all l training rows (``extend``).
    coefficients : ndarray of shape (r, p)
        ``alpha``: a point's components are ``coefficients @ k'(x)`` over ``points``.
    sample : ndarray of shape (m,)
        Indices into ``points`` of the sampled rows (they centre every kernel value).
    point_means : ndarray of shape (p,)
        ``a(y)`` of every kept point: its mean kernel value with the sampled rows.
    grand_mean : float
        ``g``, the mean kernel value between sampled rows (``||mu_S||^2``).
    eigenvalues : ndarray of shape (r,)
        Estimates of the training rows' K' eigenvalues, ``(l/m) lambda_hat``.
    spec : KernelSpec
    """

    points: np.ndarray
    coefficients: np.ndarray
    sample: np.ndarray
    point_means: np.ndarray
    grand_mean: float
    eigenvalues: np.ndarray
    spec: KernelSpec

    @property
    def retained_rows(self) -> int:
        """Rows the model keeps to project a point (m, or l for the Nyström method)."""
        return int(self.points.shape[0])

    def project(self, X: np.ndarray) -> np.ndarray:
        """Components of the rows of X, shape (b, r). Cost O(b p (n + r)), in blocks of `BLOCK_ROWS` points."""
        X = np.ascontiguousarray(X, dtype=np.float64)
        out = np.empty((X.shape[0], self.coefficients.shape[0]))
        for a in range(0, X.shape[0], BLOCK_ROWS):
            K = kernel_block(X[a : a + BLOCK_ROWS], self.points, self.spec)
            mean_row = K[:, self.sample].mean(axis=1)
            out[a : a + BLOCK_ROWS] = (K - mean_row[:, None] - self.point_means[None, :] + self.grand_mean) @ self.coefficients.T
        return out


def fit_uniform(train: np.ndarray, spec: KernelSpec, m: int, n_components: int, seed: int,
                extend: bool) -> UniformModel:
    """Subsampled KPCA (``extend=False``) or the regular Nyström method (``extend=True``) of ``train`` (l, n)
    over m uniform rows drawn with ``seed``, r = ``n_components`` (module docstring)."""
    train = np.ascontiguousarray(train, dtype=np.float64)
    l = train.shape[0]
    S = uniform_subset(l, m, seed)
    rows = np.ascontiguousarray(train[S])
    K_S = kernel_block(rows, rows, spec)
    column_means = K_S.mean(axis=0)
    grand = float(column_means.mean())
    centred = K_S - column_means[:, None] - column_means[None, :] + grand
    r = min(n_components, m)
    lam, V = eigh(0.5 * (centred + centred.T), subset_by_index=[m - r, m - 1])
    lam, V = lam[::-1], V[:, ::-1]
    live = lam > 1e-12 * max(float(lam[0]), np.finfo(float).tiny)  # past the rank: zero components
    lam_hat = np.where(live, lam, 1.0)
    eigenvalues = np.zeros(n_components)
    eigenvalues[:r] = np.where(live, (l / m) * lam, 0.0)
    coefficients = np.zeros((n_components, l if extend else m))
    if not extend:
        coefficients[:r] = (V / np.sqrt(lam_hat)).T * live[:, None]
        return UniformModel(rows, coefficients, np.arange(m), column_means, grand, eigenvalues, spec)
    K_lS = kernel_block(train, rows, spec)
    row_means = K_lS.mean(axis=1)
    U = np.sqrt(m / l) * ((K_lS - row_means[:, None] - column_means[None, :] + grand) @ V) / lam_hat  # eq. 13
    coefficients[:r] = (U / np.sqrt((l / m) * lam_hat)).T * live[:, None]  # alpha_t = u_t / sqrt(lambda_t), eq. 14
    return UniformModel(train, coefficients, S, row_means, grand, eigenvalues, spec)
