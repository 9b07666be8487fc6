"""A learned pre-image map (Bakir, Weston & Schölkopf, "Learning to find pre-images", NIPS 2004):
kernel ridge regression from components to inputs, fitted once per model."""

from __future__ import annotations

import functools

import numpy as np

from kpca._dense import positive_solve
from kpca.kernels import squared_norms
from kpca.model import KernelModel


def _pairwise_sq(B: np.ndarray, C: np.ndarray) -> np.ndarray:
    d = squared_norms(B)[:, None] + squared_norms(C)[None, :] - 2.0 * (B @ C.T)
    return np.maximum(d, 0.0, out=d)


@functools.lru_cache(maxsize=8)
def _upper_triangle(s: int) -> tuple[np.ndarray, np.ndarray]:
    """`numpy.triu_indices` ``(s, k=1)``, made once per size (a learned map is fitted per tile and draw). O(s^2)."""
    rows, cols = np.triu_indices(s, k=1)
    rows.setflags(write=False)
    cols.setflags(write=False)
    return rows, cols


class LearnedInverse:
    """A learned pre-image map: kernel ridge regression from components to inputs.

    Bakir, Weston & Schölkopf, "Learning to find pre-images", NIPS 2004. On a
    random subset of s training points, with components ``b_j = beta(x_j)``,
    the map ``g(beta) = sum_j w_j kappa(beta, b_j) + offset`` uses the
    Gaussian kernel ``kappa(b, b') = exp(-gamma ||b - b'||^2)`` in component
    space, ``offset`` the mean of the s points, and weights
    ``W = (Kappa + alpha I)^{-1} (X_s - offset)``. Far from all ``b_j`` the map
    tends to the mean of the sample instead of 0.

    Parameters
    ----------
    centers : ndarray of shape (s, r), components of the sample
    weights : ndarray of shape (s, n)
    offset : ndarray of shape (n,)
    gamma : float, component-space kernel width
    alpha : float, ridge
    model : KernelModel, optional
        Needed by ``__call__`` (which projects); not by `map_components`.
    """

    def __init__(self, centers, weights, offset, gamma: float, alpha: float, model: KernelModel | None = None):
        self.centers = np.ascontiguousarray(centers, dtype=np.float64)
        self.weights = np.ascontiguousarray(weights, dtype=np.float64)
        self.offset = np.ascontiguousarray(offset, dtype=np.float64)
        self.gamma = float(gamma)
        self.alpha = float(alpha)
        self.model = model
        if self.centers.ndim != 2 or self.weights.shape[0] != self.centers.shape[0] or \
                self.offset.shape != self.weights.shape[1:]:
            raise ValueError(f"state: inconsistent shapes centers {self.centers.shape}, weights "
                             f"{self.weights.shape}, offset {self.offset.shape}")

    @classmethod
    def fit(cls, model: KernelModel, *, n_samples: int = 2000, alpha: float | None = None,
            gamma: float | None = None, rng=None, components=None) -> LearnedInverse:
        """Fit the map on ``s = min(n_samples, l)`` random training points.

        Parameters
        ----------
        model : KernelModel
        n_samples : int, default 2000
        alpha : float, optional
            Ridge; default ``1e-3 * mean(diag(Kappa))`` (= 1e-3 for the Gaussian).
        gamma : float, optional
            Default ``1 / median ||b_i - b_j||^2`` over distinct pairs of the sample.
        rng : int or numpy.random.Generator, optional
            Chooses the sample; None means a fixed seed.
        components : ndarray of shape (l, r), optional
            The projections of the model's l training rows, where the caller has them: the sample's are
            read from it instead of computed (the same map, without the sample's kernel rows).

        Returns
        -------
        LearnedInverse. Cost O(s l (n + r)) for the sample's components plus
        O(s^2 (r + n) + s^3) for the solve; memory O(s^2 + s l).
        """
        rng = np.random.default_rng(0 if rng is None else rng)
        l = model.rows.n_rows
        s = int(min(max(1, n_samples), l))
        idx = np.sort(rng.choice(l, size=s, replace=False))
        Xs = np.asarray(model.rows.take(idx), dtype=np.float64)
        if components is None:
            Bs = model.project(Xs)
        else:
            components = model.check_components(components, l)
            assert components is not None  # given, so checked, not None
            Bs = components[idx]
        D = _pairwise_sq(Bs, Bs)
        if gamma is None:
            off_diagonal = D[_upper_triangle(s)]
            positive = off_diagonal[off_diagonal > 0]
            median = float(np.median(positive)) if positive.size else 0.0
            gamma = 1.0 / median if median > 0 and np.isfinite(median) else 1.0
        if not gamma > 0:
            raise ValueError(f"gamma: must be > 0, got {gamma}")
        Kappa = np.exp(-gamma * D)
        if alpha is None:
            alpha = 1e-3 * float(np.mean(np.diag(Kappa)))
        if not alpha > 0:
            raise ValueError(f"alpha: must be > 0, got {alpha}")
        offset = Xs.mean(axis=0)
        Kappa[np.diag_indices(s)] += alpha
        W = positive_solve(Kappa, Xs - offset)
        return cls(Bs, W, offset, gamma, alpha, model)

    def map_components(self, B) -> np.ndarray:
        """Input-space points for component vectors.

        Parameters
        ----------
        B : ndarray of shape (m, r)

        Returns
        -------
        ndarray of shape (m, n). Cost O(m s (r + n)).
        """
        B = np.asarray(B, dtype=np.float64)
        if B.ndim != 2 or B.shape[1] != self.centers.shape[1]:
            raise ValueError(f"B: expected shape (m, {self.centers.shape[1]}), got {B.shape}")
        return np.exp(-self.gamma * _pairwise_sq(B, self.centers)) @ self.weights + self.offset

    def __call__(self, X) -> np.ndarray:
        """Pre-images of the rows of X (m, n): project, then `map_components`. Cost O(m l (n + r) + m s (r + n))."""
        if self.model is None:
            raise RuntimeError("this LearnedInverse has no model; pass model= to from_state, or use map_components")
        return self.map_components(self.model.project(X))

    def to_state(self) -> dict:
        """Plain arrays and scalars for checkpointing; `from_state` inverts it exactly."""
        return {"method": "learned", "centers": self.centers, "weights": self.weights, "offset": self.offset,
                "gamma": self.gamma, "alpha": self.alpha}

    @classmethod
    def from_state(cls, entries: dict, model: KernelModel | None = None) -> LearnedInverse:
        """Rebuild from `to_state` output; ``model`` is needed only by ``__call__``."""
        return cls(entries["centers"], entries["weights"], entries["offset"], entries["gamma"], entries["alpha"],
                   model)


def learned(model: KernelModel, X, *, inverse: LearnedInverse | None = None, **options) -> np.ndarray:
    """Pre-images through a learned map: ``inverse`` if given, else one fitted now with ``options``
    (`LearnedInverse.fit`). Cost: the fit (if any) plus O(m l (n + r) + m s (r + n))."""
    if inverse is None:
        inverse = LearnedInverse.fit(model, **options)
    elif options:
        raise ValueError(f"options.{sorted(options)[0]}: not used with a given inverse")
    return inverse.map_components(model.project(X))
