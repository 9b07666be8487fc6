"""`DenseRows`: a row source over an in-memory centred kernel matrix K' (small l), with the interface the
solvers and the driver take (`kpca.rows.KernelRows`'s ``n_rows``, ``block``, ``square``, ``times``,
``left_product``): references, tests and the benches' exact runs."""

from __future__ import annotations

import numpy as np


class DenseRows:
    """A row source over an in-memory centred kernel matrix K' (small l): the same interface as
    `KernelRows` for the solvers and the driver (``n_rows``, ``block``, ``square``, ``left_product``).
    It has no ``centering``: K' is given centred."""

    centering = None

    def __init__(self, Kc: np.ndarray):
        self.Kc = Kc
        self.n_rows = Kc.shape[0]

    def block(self, indices: np.ndarray) -> np.ndarray:
        """``K'[indices, :]``."""
        return self.Kc[indices]

    def square(self, indices: np.ndarray) -> np.ndarray:
        """``K'[indices][:, indices]``."""
        return self.Kc[np.ix_(indices, indices)]

    def times(self, C: np.ndarray, block_size: int = 0) -> np.ndarray:
        """``C K'`` (d, l)."""
        return np.asarray(C, dtype=np.float64) @ self.Kc

    def left_product(self, indices: np.ndarray, C: np.ndarray, out: np.ndarray, T: np.ndarray | None = None,
                     start: np.ndarray | None = None) -> np.ndarray:
        """``out = T start + C K'[indices, :]`` (T the identity and start ``out`` by default)."""
        start = out if start is None else start
        out[:] = (start if T is None else T @ start) + C @ self.Kc[indices]
        return out
