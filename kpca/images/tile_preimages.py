"""Every rank's and pre-image method's output for one tile's patches, from what they share (issue 55).

`kpca.images.denoising.denoise_candidates` serves a grid of ranks and methods from one model per tile and
kernel width (fitted at the largest rank). Each candidate's pre-images start from the patches'
projections onto the model's leading components, and the fixed-point step (Mika et al.'s weighted mean,
`kpca.images.denoising`) from the patches' kernel values and profile slopes against the model's rows;
computed per candidate, these kernel evaluations (a ``b x l x n`` product and ``b l`` exponentials each)
were most of the one-call route's time. `TilePreimages` computes them once per tile and width:

* the projections ``beta = A k'(p)`` onto the r components (`kpca.model.KernelModel.project`); the leading
  r' of them are the projections of the model's leading r' components (`leading`),
  whose targets ``Psi = sum_i gamma_i Phi(x_i)`` (`kpca.model.KernelModel.target_from_components`) every
  method starts from;
* for the fixed-point step, ``k(p, x_i)`` and the profile's slopes ``f'_i`` (b, l) against the training
  rows x_i, which give the step's ``u = sum_i gamma_i f'_i`` and ``v = sum_i gamma_i f'_i x_i``
  (`kpca.preimage._objective.kernel_moments`) for every rank by one product each.

Kwok-Tsang, the gradient pre-image and the learned map take the projections as ``components``; the learned
map's training sample reads its own from them where the model's rows are among the tile's patches.
"""

from __future__ import annotations

import numba
import numpy as np

from kpca.kernels import kernel_and_slope, squared_norms
from kpca.model import KernelModel
from kpca.preimage import LearnedInverse, fixed_point, kwok_tsang
from kpca.preimage._objective import kernel_moments
from kpca.preimage.gradient import batched_descent

__all__ = ["SLOPES_ENTRIES", "TilePreimages", "leading"]

SLOPES_ENTRIES = 1 << 24  # kernel slopes (patches x model rows) held at once for the fixed-point step: 128 MB


def leading(model: KernelModel, n_components: int) -> KernelModel:
    """The model of the first ``n_components`` components of ``model`` (its components are sorted by
    eigenvalue, so these are the leading ones). Cost O(r l) (a copy of the coefficients)."""
    r = int(min(n_components, model.n_components))
    eigenvalues = None if model.eigenvalues is None else model.eigenvalues[:r]
    return KernelModel(rows=model.rows, A=model.A[:r], AK=model.AK[:r], eigenvalues=eigenvalues)


class TilePreimages:
    """A tile's patches P (b, n) and its model (r components, l training rows), with the projections and
    kernel values that every candidate (rank, pre-image method) shares (module docstring).

    ``training`` : positions in P of the model's training rows, in the model's order, when they are all
    among P (a tile's model is fitted on a sample of its own patches); None otherwise.
    ``training_components`` : the projections (l, r) of the model's training rows where the caller has them and
    ``training`` is None (a model fitted on other patches of the tile: ``model.AK.T``, since ``AK = A K'``).
    The learned map's sample reads its projections from either instead of computing them. ``learned``: the
    learned maps by rank, shared with other inputs through the same model (a stored model's windows and
    draws). Cost: O(b l (n + r)) once; memory O(b r), and O(b l) for the fixed-point step's slopes where
    that is at most `SLOPES_ENTRIES` (past it the step computes them block by block, as
    `kpca.images.denoising.preimages` does). A Gaussian model of float64 tiles reads the slopes from the
    projections' own kernel block, kept from the start; other models compute them at the first fixed-point step.
    """

    def __init__(self, model: KernelModel, P: np.ndarray, training: np.ndarray | None = None,
                 learned: dict | None = None, training_components: np.ndarray | None = None):
        self.model = model
        self.P = model.check_points(P)
        self.training = training
        self.training_components = training_components
        self.learned = {} if learned is None else learned  # rank -> its learned map, fitted once (it reads no P)
        self._moments: tuple[np.ndarray, np.ndarray] | None = None  # the slopes f' (b, l), the rows (l, n)
        if (model.kernel.type == "gaussian" and model.rows.compute_dtype == np.float64
                and self.P.shape[0] * model.rows.n_rows <= SLOPES_ENTRIES):
            # one kernel block serves both: the Gaussian profile's slope is f' = -k / (2 sigma^2) (in float64
            # tiles, as the slopes computed alone are; a model of float32 tiles computes them alone)
            K = np.asarray(model.rows.raw_block(self.P), dtype=np.float64)
            self._moments = (K * (-0.5 / float(model.kernel.sigma) ** 2), self._training_points())
            self.components = model.rows.centre_raw(K) @ model.A.T  # (b, r), as `KernelModel.project`
        else:
            self.components = model.project(self.P)  # (b, r)

    def preimages(self, rank: int, method: str, options: dict | None = None, n_samples: int = 2000,
                  stop=None) -> np.ndarray:
        """The pre-images of the patches' projections onto the leading ``rank`` components by ``method``
        (`kpca.images.denoising.PATCH_METHODS` but ``linear``), as `kpca.images.denoising.preimages` computes
        them, from the shared projections (and kernel values); ``n_samples``: the learned map's training sample, at
        most. Cost: the method's, less the projections'."""
        options = dict(options or {})
        neighbours = int(options.get("n_neighbors", 10))
        served = leading(self.model, rank)
        B = self.components[:, : served.n_components]
        if method == "fixed-point":
            n_iter = int(options.get("n_iter", 1))
            if n_iter == 1:
                return self._fixed_point_step(served, B)
            return fixed_point(served, self.P, n_iter=n_iter, tol=0.0, restarts=1, n_neighbors=neighbours,
                               init=self.P, components=B, stop=stop)
        if method == "kwok-tsang":
            return kwok_tsang(served, self.P, n_neighbors=neighbours, components=B)
        if method == "gradient":
            return batched_descent(served, self.P, n_iter=int(options.get("n_iter", 10)), n_neighbors=neighbours,
                                   components=B)
        if method == "learned":
            inverse = self.learned.get(served.n_components)
            if inverse is None:
                if self.training is not None:
                    training = self.components[self.training, : served.n_components]
                elif self.training_components is not None:
                    training = np.ascontiguousarray(self.training_components[:, : served.n_components])
                else:
                    training = None
                inverse = self.learned[served.n_components] = LearnedInverse.fit(
                    served, n_samples=n_samples, rng=np.random.default_rng(0), components=training)
            return inverse.map_components(B)
        raise ValueError(f"method: {method!r} is not a patch pre-image method")

    def _kernel_slopes(self) -> tuple[np.ndarray, np.ndarray]:
        """``(f', Y)``: the profile's slopes ``f'(p, x_i)`` (b, l) and the training rows Y (l, n) in the data's
        coordinates, as `kpca.preimage._objective.kernel_moments` reads them. Computed once: O(b l n)."""
        if self._moments is None:
            Y = self._training_points()
            _, slopes = kernel_and_slope(self.model.rows.kernel, self.P @ Y.T, squared_norms(self.P), squared_norms(Y))
            self._moments = (slopes, Y)
        return self._moments

    def _training_points(self) -> np.ndarray:
        """The model's training rows Y (l, n) in the data's coordinates, float64. O(l n)."""
        return np.concatenate([np.asarray(chunk, dtype=np.float64) for _, chunk in self.model.rows.chunks()])

    def _fixed_point_step(self, served: KernelModel, B: np.ndarray) -> np.ndarray:
        """One step of Mika et al.'s iteration from the patches themselves, ``z = v / u`` at ``z = p``
        (`kpca.images.denoising`'s fixed point with ``n_iter`` 1); a patch whose ``|u|`` vanishes
        (``<= 1e-12 sum_i |gamma_i f'_i|``) is kept. From the shared slopes where they fit in `SLOPES_ENTRIES`,
        else block by block (`kpca.preimage._objective.kernel_moments`). O(b l (r + n))."""
        alpha = B @ served.A  # the targets' expansions gamma = alpha + (1 - sum alpha) w (`kpca.model`)
        shift = 1.0 - B @ served.A.sum(axis=1)  # 1 - sum alpha, per patch
        if self.P.shape[0] * self.model.rows.n_rows <= SLOPES_ENTRIES:
            slopes, Y = self._kernel_slopes()
            weighted, u, scale = _weighted_slopes(alpha, shift, served.weights, slopes)  # gamma_i f'_i
            moving = np.abs(u) > 1e-12 * scale
            out = self.P.copy()
            out[moving] = (weighted @ Y)[moving] / u[moving, None]
            return out
        gamma = alpha + shift[:, None] * served.weights[None, :]
        out = self.P.copy()
        step = served.block_rows()
        for a in range(0, self.P.shape[0], step):
            _, u, v, scale = kernel_moments(served.rows, self.P[a : a + step], gamma[a : a + step])
            moving = np.abs(u) > 1e-12 * scale
            out[a : a + step][moving] = v[moving] / u[moving, None]
        return out


@numba.njit(nogil=True, cache=True)
def _weighted_slopes(alpha, shift, weights, slopes):  # pragma: no cover - jitted
    """``gamma_i f'_i`` (b, l) with ``gamma = alpha + shift w`` (the targets' expansions), and per row its sum
    u and the sum of its magnitudes (the fixed-point step's guard): one pass over alpha and the slopes
    instead of a numpy pass per operation. O(b l)."""
    b, l = alpha.shape
    weighted = np.empty((b, l))
    u, scale = np.empty(b), np.empty(b)
    for i in range(b):
        total = 0.0
        size = 0.0
        for j in range(l):
            value = (alpha[i, j] + shift[i] * weights[j]) * slopes[i, j]
            weighted[i, j] = value
            total += value
            size += abs(value)
        u[i], scale[i] = total, size
    return weighted, u, scale
