"""The eigenvalues of a centred kernel matrix K' as components are served from them (`kpca.kernel_pca`):
which are rounding (served as 0) and which negative ones are significant (an error: the kernel is not positive
semi-definite on the data, or the decomposition failed), with scikit-learn's messages and a rounding level
read from the raw matrix K' was centred from (eq. 5)."""

from __future__ import annotations

import numpy as np

from kpca.solvers._ritz import RELATIVE_RANK_TOL

NEGATIVE_RTOL = 1e-5  # a negative eigenvalue below -NEGATIVE_RTOL * scale is significant (scikit-learn's)


def psd_eigenvalues(eigenvalues: np.ndarray, rounding: float = 0.0) -> np.ndarray:
    """The eigenvalues of a centred kernel matrix as components are served from them: ValueError if one
    is significantly negative (below ``-NEGATIVE_RTOL`` times the largest, or times ``rounding``, the
    matrix's rounding level, whichever is larger; scikit-learn's messages), else those not above
    ``RELATIVE_RANK_TOL`` times the largest (nor above ``rounding``) set to 0. O(r)."""
    w = np.asarray(eigenvalues, dtype=np.float64)
    top = float(w.max())
    if top < 0 and -top > rounding:
        raise ValueError(f"All eigenvalues are negative (maximum is {top:g}). Either the matrix is not PSD, or "
                         "there was an issue while computing the eigendecomposition of the matrix.")
    scale = max(top, rounding, 0.0)
    if w.min() < -NEGATIVE_RTOL * scale:
        raise ValueError(f"There are significant negative eigenvalues ({-w.min() / max(top, 1e-300):g} of the "
                         "maximum positive). Either the matrix is not PSD, or there was an issue while computing "
                         "the eigendecomposition of the matrix.")
    return np.where((w > RELATIVE_RANK_TOL * top) & (w > rounding), w, 0.0)


def rounding_level(K: np.ndarray) -> float:
    """The size of the rounding error in the eigenvalues of the centred matrix K' of a raw kernel matrix K
    (l, l): ``l eps max |K|``. K' is K less its row and column means (eq. 5), so its entries carry the rounding
    of K's, however much smaller they are (a constant offset of the data under a dot-product kernel). O(l^2)."""
    return float(K.shape[0] * np.finfo(np.float64).eps * np.abs(K).max()) if K.size else 0.0


__all__ = ["psd_eigenvalues", "rounding_level", "NEGATIVE_RTOL"]
