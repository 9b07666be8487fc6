"""Pre-images: from the kernel principal subspace back to input space (denoising).

Notation (defined once). Training points ``x_1..x_l`` in R^n (``rows.source``),
kernel ``k``, feature map ``Phi``, kernel matrix ``K`` (l x l, never formed),
its column means ``m`` (l,) and their mean ``m_bar`` (`kpca.rows.Centering`),
centred kernel matrix ``K' = K - 1 m^T - m 1^T + m_bar 1 1^T`` (seed 000 eq. 5).
A model has ``r`` components ``W = A Phi'`` with expansion coefficients ``A``
(r x l) and keeps ``AK = A K'`` (r x l; ``diag(lambda) A`` for the exact
solver). For a point x:

* components ``beta = A k'(x)`` (r,), with ``k'(x)`` the centred kernel row;
* the projection plus the mean ``mu = (1/l) sum_i Phi(x_i)`` is
  ``Psi(x) = P Phi'(x) + mu = sum_i gamma_i Phi(x_i)`` with
  ``alpha = A^T beta`` and ``gamma = alpha + (1 - sum_j alpha_j) / l``
  (``P Phi'(x) = sum_i alpha_i (Phi(x_i) - mu)``; adding mu gives gamma);
* a pre-image is a point z of R^n minimising
  ``rho(z) = ||Psi - Phi(z)||^2 = gamma^T K gamma - 2 gamma . k(z, X) + k(z, z)``
  (seed 002 §4.2; Mika et al. 1999, seed 000 ref. [11]).

Maintenance note (no O(l^2) work). Write ``K = K' + 1 m^T + m 1^T - m_bar 1 1^T``
and ``K' alpha = K' A^T beta = (A K')^T beta = AK^T beta`` (K' symmetric), so

    K alpha = AK^T beta + (m . alpha) 1 + (sum alpha) m - m_bar (sum alpha) 1,
    K 1     = l m,
    K gamma = K alpha + c l m,          c = (1 - sum alpha) / l,
    ||Psi||^2 = gamma^T K gamma = gamma . (K gamma),

all O(r l) per point. Every rho then costs one kernel row ``k(z, X)``, O(l n),
and ``||Psi(x) - Phi(x_i)||^2 = ||Psi||^2 - 2 (K gamma)_i + K_ii`` for all i
costs O(r l) more once the O(l n) diagonal of K is known.

Kernel derivatives (`_kernel_and_derivative`). Radial kernels are written
``k(z, x) = f(||z - x||^2)`` with ``grad_z k = 2 f'(d^2) (z - x)`` and
``k(z, z) = 1``; dot-product kernels ``k(z, x) = f(<z, x>)`` with
``grad_z k = f'(<z, x>) x`` and ``grad_z k(z, z) = 2 f'(||z||^2) z``:

==============  ==================================  ===========================================
kernel          f                                    f'
==============  ==================================  ===========================================
gaussian        exp(-d^2 / (2 sigma^2))              -k / (2 sigma^2)
laplacian       exp(-d / sigma), d = sqrt(d^2)       -k / (2 sigma d)   (0 where z == x_i)
polynomial      (g t + c)^p                          p g (g t + c)^(p - 1)
linear          t                                    1
tanh            tanh(g t + c)                        g (1 - k^2)
==============  ==================================  ===========================================

With ``u = sum_i gamma_i f'_i`` and ``v = sum_i gamma_i f'_i x_i`` the gradient
of rho is ``-4 (z u - v)`` (radial) or ``-2 v + 2 f'(||z||^2) z`` (dot
product). Setting the radial gradient to zero gives the fixed-point iteration
``z <- v / u``: Mika et al.'s ``sum gamma_i k_i x_i / sum gamma_i k_i`` for the
Gaussian, and the Weiszfeld-like weights ``gamma_i k_i / ||z - x_i||`` for the
Laplacian.

Methods: `fixed_point` (Mika et al. 1999), `kwok_tsang` (Kwok & Tsang, seed 002
ref. [10]; "The pre-image problem in kernel methods", ICML 2003, seed 003
ref. [2]), `gradient_descent` (L-BFGS-B on rho; seed 002 §4.2 uses
gradient descent started at the Kwok–Tsang point) and `LearnedInverse` (Bakir,
Weston & Schölkopf 2004: kernel ridge regression from components to inputs).
`reconstruct` dispatches. Every method returns finite output for finite input,
including points so far from the data that every Gaussian ``k(z, x_i)``
underflows to 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import scipy.linalg
import scipy.optimize

from kpca.kernels import KernelSpec, kernel_diagonal, squared_norms
from kpca.rows import KernelRows
from kpca.solvers import ritz_components

PREIMAGE_METHODS = ("fixed-point", "kwok-tsang", "gradient", "learned")
FIXED_POINT_KERNELS = ("gaussian", "laplacian")
KWOK_TSANG_KERNELS = ("gaussian", "laplacian", "polynomial", "linear")
_RADIAL = ("gaussian", "laplacian")
_BLOCK_ENTRIES = 2**22  # entries of one (rows x l) working array, about 32 MiB in float64
_EPS = np.finfo(np.float64).eps


class _Target(NamedTuple):
    """Psi for a block of b points: ``gamma`` (b, l), ``k_gamma = K gamma`` (b, l), ``norm2 = ||Psi||^2`` (b,)."""

    gamma: np.ndarray
    k_gamma: np.ndarray
    norm2: np.ndarray


@dataclass
class KernelModel:
    """A trained kernel PCA model, as every pre-image method needs it.

    Parameters
    ----------
    rows : KernelRows
        Training data and kernel, with ``rows.centering`` set.
    A : ndarray of shape (r, l)
        Expansion coefficients; components ``W = A Phi'``.
    AK : ndarray of shape (r, l)
        ``A K'`` (kept by the iterative solvers; ``diag(lambda) A`` for the
        exact solver).

    Notes
    -----
    Costs for m points: `project` O(m l (n + r)); `expansion` O(m l (n + r));
    `feature_distances` O(m l (n + r)) plus, once, O(l n) for the diagonal of
    K. Work is done in blocks of points so that memory stays O(block * l).
    """

    rows: KernelRows
    A: np.ndarray
    AK: np.ndarray

    def __post_init__(self):
        if self.rows.centering is None:
            raise ValueError("rows: centering is not set; call rows.fit_centering() or set rows.centering")
        self.A = np.ascontiguousarray(self.A, dtype=np.float64)
        self.AK = np.ascontiguousarray(self.AK, dtype=np.float64)
        l = self.rows.n_rows
        if self.A.ndim != 2 or self.A.shape[1] != l:
            raise ValueError(f"A: expected shape (r, {l}), got {self.A.shape}")
        if self.AK.shape != self.A.shape:
            raise ValueError(f"AK: expected shape {self.A.shape} like A, got {self.AK.shape}")
        self._diagonal: np.ndarray | None = None

    @classmethod
    def from_estimator(cls, estimator) -> "KernelModel":
        """The model of a fitted `kpca.estimator.KernelHebbianPCA`.

        Uses ``state_["AK"]`` of an iterative solver, else
        ``eigenvalues_[:, None] * coefficients_`` (exact solver).
        """
        state = getattr(estimator, "state_", None) or {
            "A": estimator.coefficients_, "eigenvalues": estimator.eigenvalues_}
        return cls.from_state(estimator.rows_, state)

    @classmethod
    def from_state(cls, rows: KernelRows, state: dict) -> "KernelModel":
        """The model of a solver state (a checkpoint): for an iterative solver the
        `kpca.solvers.ritz_components` of ``A`` and ``AK``; for the exact solver
        ``A`` and ``eigenvalues`` (then ``A K' = diag(lambda) A``)."""
        if "AK" in state:
            A, AK, _ = ritz_components(state["A"], state["AK"])
        else:
            A = np.ascontiguousarray(state["A"])
            AK = np.asarray(state["eigenvalues"])[:, None] * A
        return cls(rows=rows, A=np.ascontiguousarray(A), AK=np.ascontiguousarray(AK))

    # -- sizes ---------------------------------------------------------------
    @property
    def kernel(self) -> KernelSpec:
        return self.rows.kernel

    @property
    def n_components(self) -> int:
        return self.A.shape[0]

    @property
    def n_features(self) -> int:
        return self.rows.n_features

    @property
    def training_diagonal(self) -> np.ndarray:
        """``K_ii = k(x_i, x_i)`` for all training points, shape (l,). One pass, O(l n), cached."""
        if self._diagonal is None:
            if self.kernel.type in _RADIAL:
                self._diagonal = np.ones(self.rows.n_rows)
            else:
                self._diagonal = np.concatenate(
                    [kernel_diagonal(np.asarray(Y, dtype=np.float64), self.kernel) for _, Y in self.rows.chunks()])
        return self._diagonal

    def _block_rows(self, factor: int = 1) -> int:
        """Points per block so that a (block * factor, l) array has about `_BLOCK_ENTRIES` entries."""
        return max(1, _BLOCK_ENTRIES // (self.rows.n_rows * max(1, factor)))

    def check_points(self, X, name: str = "X") -> np.ndarray:
        """X as a C-contiguous float64 array of shape (m, n); ValueError naming ``name`` otherwise."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim == 1 and X.size == self.n_features:
            X = X[None, :]
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"{name}: expected shape (m, {self.n_features}), got {X.shape}")
        if not np.isfinite(X).all():
            raise ValueError(f"{name}: must be finite")
        return np.ascontiguousarray(X)

    # -- projection and expansion -------------------------------------------
    def project(self, X) -> np.ndarray:
        """Components ``beta = A k'(x)`` of the rows of X.

        Parameters
        ----------
        X : ndarray of shape (m, n)

        Returns
        -------
        ndarray of shape (m, r). Cost O(m l (n + r)), memory O(block * l).
        """
        X = self.check_points(X)
        out = np.empty((X.shape[0], self.n_components))
        step = self._block_rows()
        for a in range(0, X.shape[0], step):
            out[a : a + step] = self._project_block(X[a : a + step])
        return out

    def _project_block(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(self.rows.transform_block(X), dtype=np.float64) @ self.A.T

    def expansion_from_components(self, B) -> np.ndarray:
        """``gamma = alpha + (1 - sum alpha) / l`` with ``alpha = A^T beta``, for rows ``beta`` of B.

        Parameters
        ----------
        B : ndarray of shape (m, r)

        Returns
        -------
        ndarray of shape (m, l): ``Psi = sum_i gamma_i Phi(x_i)``. Cost O(m r l).
        """
        alpha = np.asarray(B, dtype=np.float64) @ self.A
        return alpha + ((1.0 - alpha.sum(axis=1)) / self.rows.n_rows)[:, None]

    def expansion(self, X) -> np.ndarray:
        """Coefficients gamma of ``Psi(x) = P Phi'(x) + mu = sum_i gamma_i Phi(x_i)``.

        Parameters
        ----------
        X : ndarray of shape (m, n)

        Returns
        -------
        ndarray of shape (m, l). Cost O(m l (n + r)).
        """
        return self.expansion_from_components(self.project(X))

    def _target_from_components(self, B: np.ndarray) -> _Target:
        """gamma, ``K gamma`` and ``gamma^T K gamma`` for rows of B (module note). Cost O(m r l)."""
        B = np.asarray(B, dtype=np.float64)
        c = self.rows.centering
        m = np.asarray(c.column_means, dtype=np.float64)
        l = self.rows.n_rows
        alpha = B @ self.A
        sum_alpha = alpha.sum(axis=1)
        shift = (1.0 - sum_alpha) / l
        gamma = alpha + shift[:, None]
        k_alpha = B @ self.AK  # K' alpha
        k_alpha += (alpha @ m - c.grand_mean * sum_alpha)[:, None]
        k_alpha += sum_alpha[:, None] * m[None, :]
        k_gamma = k_alpha + (shift * l)[:, None] * m[None, :]  # + shift * K 1
        norm2 = np.einsum("ij,ij->i", gamma, k_gamma)
        return _Target(gamma, k_gamma, norm2)

    def _target(self, X: np.ndarray) -> _Target:
        return self._target_from_components(self._project_block(X))

    def _distances(self, target: _Target) -> np.ndarray:
        d = target.norm2[:, None] - 2.0 * target.k_gamma + self.training_diagonal[None, :]
        return np.maximum(d, 0.0, out=d)

    def feature_distances(self, X) -> np.ndarray:
        """``||Psi(x) - Phi(x_i)||^2`` for every row x of X and every training point i.

        Parameters
        ----------
        X : ndarray of shape (m, n)

        Returns
        -------
        ndarray of shape (m, l), clipped at 0. Cost O(m l (n + r)) (plus the
        O(l n) diagonal of K once).
        """
        X = self.check_points(X)
        out = np.empty((X.shape[0], self.rows.n_rows))
        step = self._block_rows()
        for a in range(0, X.shape[0], step):
            out[a : a + step] = self._distances(self._target(X[a : a + step]))
        return out

    def objective(self, Z, X) -> np.ndarray:
        """``rho(z_j) = ||Psi(x_j) - Phi(z_j)||^2`` for paired rows of Z and X.

        Parameters
        ----------
        Z, X : ndarray of shape (m, n)

        Returns
        -------
        ndarray of shape (m,). Cost O(m l (n + r)).
        """
        Z, X = self.check_points(Z, "Z"), self.check_points(X)
        if Z.shape != X.shape:
            raise ValueError(f"Z: expected shape {X.shape} like X, got {Z.shape}")
        out = np.empty(X.shape[0])
        step = self._block_rows()
        for a in range(0, X.shape[0], step):
            t = self._target(X[a : a + step])
            out[a : a + step] = _rho_and_gradient(self.rows, Z[a : a + step], t.gamma, t.norm2)[0]
        return out


# -- kernel passes -------------------------------------------------------------


def _kernel_and_derivative(spec: KernelSpec, gram: np.ndarray, zn: np.ndarray, yn: np.ndarray):
    """Kernel values k and f' (module note) from ``gram = Z Y^T`` and squared norms. All (b, c)."""
    kind = spec.type
    if kind in _RADIAL:
        d2 = zn[:, None] + yn[None, :] - 2.0 * gram
        np.maximum(d2, 0.0, out=d2)
        if kind == "gaussian":
            k = np.exp(d2 * (-0.5 / spec.sigma**2))
            return k, k * (-0.5 / spec.sigma**2)
        d = np.sqrt(d2)
        k = np.exp(d * (-1.0 / spec.sigma))
        # z == x_i (up to the rounding of d2 = |z|^2 + |x|^2 - 2 <z, x>): the cone point, weight 0
        apart = d2 > 64 * _EPS * (zn[:, None] + yn[None, :])
        fp = np.zeros_like(k)
        np.divide(k * (-0.5 / spec.sigma), d, out=fp, where=apart)
        return k, fp
    if kind == "linear":
        return gram, np.ones_like(gram)
    if kind == "polynomial":
        base = spec.gamma * gram + spec.offset
        p = int(spec.degree)
        below = base ** (p - 1)
        return below * base, (p * spec.gamma) * below
    k = np.tanh(spec.gamma * gram + spec.offset)  # tanh
    return k, spec.gamma * (1.0 - k * k)


def _self_kernel(spec: KernelSpec, Z: np.ndarray):
    """``k(z, z)`` (b,) and its gradient (b, n)."""
    if spec.type in _RADIAL:
        return np.ones(Z.shape[0]), np.zeros_like(Z)
    t = squared_norms(Z)
    k, fp = _kernel_and_derivative(spec, t[:, None], t, t)
    return k[:, 0], 2.0 * fp[:, :1] * Z


def _kernel_moments(rows: KernelRows, Z: np.ndarray, G: np.ndarray):
    """One pass over the training data for the points Z with weights G.

    Parameters
    ----------
    Z : ndarray of shape (b, n)
    G : ndarray of shape (b, l)
        Weights (the gamma of each point's target).

    Returns
    -------
    s0 : (b,) ``sum_i G_i k(z, x_i)``
    u : (b,) ``sum_i G_i f'_i``
    v : (b, n) ``sum_i G_i f'_i x_i``
    a : (b,) ``sum_i |G_i f'_i|`` (scale of u, for the fixed-point guard)

    Cost: 4 b l n flops (two GEMMs) plus O(b l).
    """
    spec = rows.kernel
    Z = np.ascontiguousarray(Z, dtype=np.float64)
    b = Z.shape[0]
    s0, u, a = np.zeros(b), np.zeros(b), np.zeros(b)
    v = np.zeros_like(Z)
    zn = squared_norms(Z)
    for start, Y in rows.chunks():
        Y = np.asarray(Y, dtype=np.float64)
        Gc = G[:, start : start + Y.shape[0]]
        k, fp = _kernel_and_derivative(spec, Z @ Y.T, zn, squared_norms(Y))
        s0 += np.einsum("ij,ij->i", Gc, k)
        w = np.multiply(Gc, fp, out=fp)
        u += w.sum(axis=1)
        a += np.abs(w).sum(axis=1)
        v += w @ Y
    return s0, u, v, a


def _rho_and_gradient(rows: KernelRows, Z: np.ndarray, G: np.ndarray, norm2: np.ndarray):
    """``rho(z)`` (b,) and its gradient (b, n) for targets (G = gamma, norm2 = ||Psi||^2). One pass."""
    spec = rows.kernel
    Z = np.ascontiguousarray(Z, dtype=np.float64)
    s0, u, v, _ = _kernel_moments(rows, Z, G)
    kzz, grad_kzz = _self_kernel(spec, Z)
    rho = norm2 - 2.0 * s0 + kzz
    if spec.type in _RADIAL:
        grad = -4.0 * (Z * u[:, None] - v)
    else:
        grad = -2.0 * v + grad_kzz
    return rho, grad


# -- Kwok & Tsang ------------------------------------------------------------------


def _check_kwok_tsang(spec: KernelSpec) -> None:
    if spec.type not in KWOK_TSANG_KERNELS:
        raise ValueError(f"method: Kwok-Tsang pre-images need a kernel whose feature distances determine input "
                         f"distances ({', '.join(KWOK_TSANG_KERNELS)}), not {spec.type!r}; use method='gradient'")


def _dot_inverse(spec: KernelSpec, values: np.ndarray) -> np.ndarray:
    """Inner products t with ``f(t) = values`` for the polynomial and linear kernels.

    Even degrees take the non-negative root (``g t + c >= 0``), odd degrees the real root.
    """
    if spec.type == "linear":
        return values
    p = int(spec.degree)
    if p % 2:
        root = np.sign(values) * np.abs(values) ** (1.0 / p)
    else:
        root = np.maximum(values, 0.0) ** (1.0 / p)
    return (root - spec.offset) / spec.gamma


def _input_distances(model: KernelModel, target: _Target, neighbours: np.ndarray, dist: np.ndarray,
                     P: np.ndarray) -> np.ndarray:
    """Squared input-space distances from the pre-image to the neighbours, (b, k) (Kwok & Tsang).

    Gaussian: ``d~^2 = 2 - 2 exp(-d^2 / (2 sigma^2))`` so ``d^2 = -2 sigma^2 ln(1 - d~^2 / 2)``;
    Laplacian: ``d = -sigma ln(1 - d~^2 / 2)``; the argument is clipped into (eps, 1].
    Polynomial and linear: ``<Psi, Phi(x_i)> = (K gamma)_i ~ f(<z, x_i>)`` and
    ``||Psi||^2 ~ f(||z||^2)`` give ``d^2 = ||z||^2 + ||x_i||^2 - 2 <z, x_i>``.
    """
    spec = model.kernel
    if spec.type in _RADIAL:
        arg = np.clip(1.0 - 0.5 * np.take_along_axis(dist, neighbours, axis=1), _EPS, 1.0)
        if spec.type == "gaussian":
            return -2.0 * spec.sigma**2 * np.log(arg)
        return (spec.sigma * np.log(arg)) ** 2
    inner = _dot_inverse(spec, np.take_along_axis(target.k_gamma, neighbours, axis=1))
    zz = _dot_inverse(spec, target.norm2)
    d2 = zz[:, None] + np.einsum("bkn,bkn->bk", P, P) - 2.0 * inner
    return np.maximum(d2, 0.0)


def _kwok_tsang_position(P: np.ndarray, d2: np.ndarray) -> np.ndarray:
    """Position from neighbours and squared input distances (Kwok & Tsang 2003, closed form).

    With the neighbours centred, ``X H = U Lambda V^T`` (thin SVD) and
    ``Z = Lambda V^T`` their coordinates in the basis U, the point with
    ``||z - z_i||^2 ~ d_i^2`` is ``z = -1/2 Lambda^{-1} V^T (d^2 - d0^2)``,
    ``d0_i^2 = ||z_i||^2`` (from ``||z - z_i||^2 = d_i^2``, multiplied by Z,
    using ``Z 1 = 0``), mapped back as ``U z + mean``. Directions with
    singular values below ``sqrt(eps) * largest`` are dropped.

    Parameters
    ----------
    P : ndarray of shape (b, k, n), the neighbours of each point
    d2 : ndarray of shape (b, k)

    Returns
    -------
    ndarray of shape (b, n). Cost O(b k n min(k, n)) (batched SVD).
    """
    mean = P.mean(axis=1)
    C = P - mean[:, None, :]  # (X H)^T = V Lambda U^T
    V, s, Ut = np.linalg.svd(C, full_matrices=False)
    coords = V * s[:, None, :]  # Z^T, (b, k, q)
    d0 = np.einsum("bkq,bkq->bk", coords, coords)
    keep = s > np.sqrt(_EPS) * s[:, :1]
    inv = np.divide(1.0, s, out=np.zeros_like(s), where=keep)
    z = -0.5 * inv * np.einsum("bkq,bk->bq", V, d2 - d0)
    return mean + np.einsum("bq,bqn->bn", z, Ut)


def _kwok_tsang_block(model: KernelModel, target: _Target, n_neighbors: int):
    """Kwok–Tsang points (b, n) and the neighbour indices (b, k), nearest first, for one block."""
    dist = model._distances(target)
    k = int(min(max(1, n_neighbors), model.rows.n_rows))
    if k < dist.shape[1]:
        neighbours = np.argpartition(dist, k - 1, axis=1)[:, :k]
    else:
        neighbours = np.tile(np.arange(k), (dist.shape[0], 1))
    order = np.argsort(np.take_along_axis(dist, neighbours, axis=1), axis=1, kind="stable")
    neighbours = np.take_along_axis(neighbours, order, axis=1)
    P = np.asarray(model.rows.take(neighbours.ravel()), dtype=np.float64).reshape(*neighbours.shape, -1)
    d2 = _input_distances(model, target, neighbours, dist, P)
    Z = _kwok_tsang_position(P, d2)
    bad = ~np.isfinite(Z).all(axis=1)
    if bad.any():  # cannot happen for finite distances; the neighbours' mean is the safe answer
        Z[bad] = P[bad].mean(axis=1)
    return Z, neighbours


def kwok_tsang(model: KernelModel, X, *, n_neighbors: int = 10) -> np.ndarray:
    """Pre-images by distance constraints (Kwok & Tsang; seed 002 ref. [10]).

    For each point: feature distances ``d~_i^2 = ||Psi(x) - Phi(x_i)||^2`` to
    all training points, the ``n_neighbors`` nearest, their input-space
    distances from the kernel (`_input_distances`), and the closed-form
    position in the span of the centred neighbours (`_kwok_tsang_position`).
    Non-iterative; also the start of the other methods.

    Parameters
    ----------
    model : KernelModel
        Kernel gaussian, laplacian, polynomial or linear (ValueError naming
        "method" otherwise).
    X : ndarray of shape (m, n)
    n_neighbors : int, default 10

    Returns
    -------
    ndarray of shape (m, n). Cost O(m l (n + r)) for the distances (in blocks
    of points) plus O(m k n min(k, n)) for the SVDs.
    """
    _check_kwok_tsang(model.kernel)
    X = model.check_points(X)
    out = np.empty_like(X)
    step = model._block_rows()
    for a in range(0, X.shape[0], step):
        out[a : a + step] = _kwok_tsang_block(model, model._target(X[a : a + step]), n_neighbors)[0]
    return out


# -- fixed point (Mika et al. 1999) ---------------------------------------------------


def _fixed_point_iterations(rows: KernelRows, Z: np.ndarray, G: np.ndarray, norm2: np.ndarray,
                            n_iter: int, tol: float):
    """Iterate ``z <- v / u`` (module note) for all rows of Z at once; best iterate by rho.

    Each iteration is one pass over the training data for the rows still
    moving. A row stops when its step is below ``tol * (1 + ||z||)``, when
    ``|u| <= 1e-12 sum_i |gamma_i f'_i|`` (the denominator vanishes or
    underflows, e.g. z far from all data) or when the new iterate is not
    finite. Returns the iterate of lowest rho seen per row (b, n) and that rho
    (b,), inf if no iterate was evaluated finite.
    """
    Z = Z.copy()
    b = Z.shape[0]
    best_Z, best_rho = Z.copy(), np.full(b, np.inf)
    done = np.zeros(b, dtype=bool)
    active = np.arange(b)
    for it in range(n_iter + 1):
        if active.size == 0:
            break
        s0, u, v, a = _kernel_moments(rows, Z[active], G[active])
        rho = norm2[active] - 2.0 * s0 + _self_kernel(rows.kernel, Z[active])[0]
        better = np.isfinite(rho) & (rho < best_rho[active])
        best_rho[active[better]] = rho[better]
        best_Z[active[better]] = Z[active[better]]
        if it == n_iter:
            break
        moving = ~done[active] & (np.abs(u) > 1e-12 * a)
        with np.errstate(all="ignore"):
            Z_new = v[moving] / u[moving, None]
        finite = np.isfinite(Z_new).all(axis=1)
        idx = active[moving][finite]
        Z_new = Z_new[finite]
        step = np.linalg.norm(Z_new - Z[idx], axis=1)
        Z[idx] = Z_new
        done[idx] = step <= tol * (1.0 + np.linalg.norm(Z_new, axis=1))
        active = idx  # converged rows get one last evaluation, then leave
    return best_Z, best_rho


def fixed_point(model: KernelModel, X, *, n_iter: int = 100, tol: float = 1e-6, restarts: int = 3,
                n_neighbors: int = 10, init=None, rng=None) -> np.ndarray:
    """Pre-images by the fixed-point iteration of Mika et al. 1999 (seed 000 ref. [11]).

    Gaussian kernel: ``z <- sum_i gamma_i k(z, x_i) x_i / sum_i gamma_i k(z, x_i)``,
    the stationarity condition of rho. Laplacian kernel: the analogous
    Weiszfeld-like weights ``gamma_i k(z, x_i) / ||z - x_i||`` (module note).

    Starts, per point: ``init`` if given else the Kwok–Tsang point; the point
    x itself (``restarts >= 2``); and ``restarts - 2`` distinct random training
    points among its ``n_neighbors`` nearest in feature space. Every iterate
    is scored by rho and the lowest-rho iterate over all starts is returned;
    a start stops early when the denominator vanishes or the iterate is not
    finite, keeping its last finite iterate (fallback: the Kwok–Tsang point).

    Parameters
    ----------
    model : KernelModel
        Gaussian or Laplacian kernel; ValueError naming "method" otherwise.
    X : ndarray of shape (m, n)
    n_iter : int, default 100
    tol : float, default 1e-6
        Stop a start when ``||z_new - z|| <= tol (1 + ||z||)``.
    restarts : int, default 3
        Number of starts per point (>= 1).
    n_neighbors : int, default 10
        Neighbours for the Kwok–Tsang start and the random starts.
    init : ndarray of shape (m, n), optional
        Replaces the Kwok–Tsang start.
    rng : int or numpy.random.Generator, optional
        For the random starts; None means a fixed seed (deterministic output).

    Returns
    -------
    ndarray of shape (m, n). Cost per iteration one pass over the training
    data for all moving starts, O(m restarts l n); plus the Kwok–Tsang start.
    """
    spec = model.kernel
    if spec.type not in FIXED_POINT_KERNELS:
        raise ValueError(f"method: the fixed-point iteration needs a radial kernel "
                         f"({', '.join(FIXED_POINT_KERNELS)}), not {spec.type!r}; use method='gradient'")
    restarts = int(restarts)
    if restarts < 1:
        raise ValueError(f"restarts: must be >= 1, got {restarts}")
    if int(n_iter) < 0:
        raise ValueError(f"n_iter: must be >= 0, got {n_iter}")
    X = model.check_points(X)
    init = None if init is None else model.check_points(init, "init")
    if init is not None and init.shape != X.shape:
        raise ValueError(f"init: expected shape {X.shape} like X, got {init.shape}")
    rng = np.random.default_rng(0 if rng is None else rng)
    out = np.empty_like(X)
    step = model._block_rows(restarts)
    for a in range(0, X.shape[0], step):
        Xb = X[a : a + step]
        b = Xb.shape[0]
        target = model._target(Xb)
        kt, neighbours = _kwok_tsang_block(model, target, n_neighbors)
        starts = [kt if init is None else init[a : a + step]]
        if restarts >= 2:
            starts.append(Xb)
        if restarts > 2:
            k = neighbours.shape[1]
            picks = np.argsort(rng.random((b, k)), axis=1)  # a random order of each point's neighbours
            for j in range(restarts - 2):
                chosen = np.take_along_axis(neighbours, picks[:, j % k : j % k + 1], axis=1)[:, 0]
                starts.append(np.asarray(model.rows.take(chosen), dtype=np.float64))
        Z0 = np.concatenate(starts)
        G = np.tile(target.gamma, (len(starts), 1))
        norm2 = np.tile(target.norm2, len(starts))
        Z, rho = _fixed_point_iterations(model.rows, Z0, G, norm2, int(n_iter), float(tol))
        Z, rho = Z.reshape(len(starts), b, -1), rho.reshape(len(starts), b)
        pick = np.argmin(rho, axis=0)
        best = Z[pick, np.arange(b)]
        none = ~np.isfinite(rho[pick, np.arange(b)])
        best[none] = kt[none]
        out[a : a + step] = best
    return out


# -- gradient descent ----------------------------------------------------------------


def _gradient_starts(model: KernelModel, Xb: np.ndarray, target: _Target, n_neighbors: int) -> np.ndarray:
    """Of the Kwok–Tsang point (if the kernel allows) and x itself, the one with lower rho."""
    if model.kernel.type not in KWOK_TSANG_KERNELS:
        return Xb.copy()
    kt = _kwok_tsang_block(model, target, n_neighbors)[0]
    Z = np.concatenate([kt, Xb])
    rho = _rho_and_gradient(model.rows, Z, np.tile(target.gamma, (2, 1)), np.tile(target.norm2, 2))[0]
    b = Xb.shape[0]
    use_x = ~(rho[:b] <= rho[b:])  # also when the KT rho is not finite
    return np.where(use_x[:, None], Xb, kt)


def gradient_descent(model: KernelModel, X, *, init=None, max_iter: int = 200, tol: float = 1e-8,
                     n_neighbors: int = 10) -> np.ndarray:
    """Pre-images by minimising rho with L-BFGS-B and the analytic gradient (seed 002 §4.2).

    Works for every kernel of `kpca.kernels` (gradients in the module note;
    the Laplacian's cone point z == x_i gets the zero subgradient).

    Parameters
    ----------
    model : KernelModel
    X : ndarray of shape (m, n)
    init : ndarray of shape (m, n), optional
        Starts; default per point the lower-rho of the Kwok–Tsang point and x
        itself (x only for ``tanh``, which Kwok–Tsang does not cover).
    max_iter : int, default 200
        L-BFGS-B iterations per point.
    tol : float, default 1e-8
        L-BFGS-B ``ftol`` and ``gtol``.
    n_neighbors : int, default 10
        For the Kwok–Tsang start.

    Returns
    -------
    ndarray of shape (m, n): per point the optimiser's result, or its start if
    that has the lower (or only finite) rho. Cost per function evaluation one
    kernel row and its gradient, O(l n); points are optimised one by one.
    """
    X = model.check_points(X)
    init = None if init is None else model.check_points(init, "init")
    if init is not None and init.shape != X.shape:
        raise ValueError(f"init: expected shape {X.shape} like X, got {init.shape}")
    out = np.empty_like(X)
    step = model._block_rows()
    options = {"maxiter": int(max_iter), "ftol": float(tol), "gtol": float(tol)}
    for a in range(0, X.shape[0], step):
        Xb = X[a : a + step]
        target = model._target(Xb)
        Z0 = _gradient_starts(model, Xb, target, n_neighbors) if init is None else init[a : a + step]
        for j in range(Xb.shape[0]):
            G, norm2 = target.gamma[j : j + 1], target.norm2[j : j + 1]

            def fun(z, G=G, norm2=norm2):
                rho, grad = _rho_and_gradient(model.rows, z[None, :], G, norm2)
                return float(rho[0]), grad[0]

            z0 = Z0[j]
            rho0 = fun(z0)[0]
            with np.errstate(all="ignore"):
                res = scipy.optimize.minimize(fun, z0, jac=True, method="L-BFGS-B", options=options)
            finite = bool(np.isfinite(res.x).all() and np.isfinite(res.fun))
            improved = finite and (not np.isfinite(rho0) or res.fun <= rho0)
            out[a + j] = res.x if improved else z0
    return out


# -- learned inverse (Bakir, Weston & Schölkopf 2004) ----------------------------------


def _pairwise_sq(B: np.ndarray, C: np.ndarray) -> np.ndarray:
    d = squared_norms(B)[:, None] + squared_norms(C)[None, :] - 2.0 * (B @ C.T)
    return np.maximum(d, 0.0, out=d)


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
            gamma: float | None = None, rng=None) -> "LearnedInverse":
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
        Bs = model.project(Xs)
        D = _pairwise_sq(Bs, Bs)
        if gamma is None:
            off_diagonal = D[np.triu_indices(s, k=1)]
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
        W = scipy.linalg.solve(Kappa, Xs - offset, assume_a="pos")
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
    def from_state(cls, state: dict, model: KernelModel | None = None) -> "LearnedInverse":
        """Rebuild from `to_state` output; ``model`` is needed only by ``__call__``."""
        return cls(state["centers"], state["weights"], state["offset"], state["gamma"], state["alpha"], model)


# -- dispatch ----------------------------------------------------------------------


def reconstruct(model: KernelModel, X, method: str = "auto", **options) -> np.ndarray:
    """Pre-images of the projections of the rows of X.

    Parameters
    ----------
    model : KernelModel
    X : ndarray of shape (m, n)
    method : {"auto", "fixed-point", "kwok-tsang", "gradient", "learned"}
        "auto" is "fixed-point" for the Gaussian kernel, "gradient" otherwise.
        "learned" uses ``options["inverse"]`` (a `LearnedInverse`) if given,
        else fits one with the remaining options.
    **options
        Keyword arguments of the chosen method; an unknown one raises
        ValueError naming it.

    Returns
    -------
    ndarray of shape (m, n).
    """
    if method == "auto":
        method = "fixed-point" if model.kernel.type == "gaussian" else "gradient"
    functions = {"fixed-point": fixed_point, "kwok-tsang": kwok_tsang, "gradient": gradient_descent}
    allowed = {"fixed-point": {"n_iter", "tol", "restarts", "n_neighbors", "init", "rng"},
               "kwok-tsang": {"n_neighbors"},
               "gradient": {"init", "max_iter", "tol", "n_neighbors"},
               "learned": {"inverse", "n_samples", "alpha", "gamma", "rng"}}
    if method not in allowed:
        raise ValueError(f"method: unknown pre-image method {method!r}; choose one of {PREIMAGE_METHODS} or 'auto'")
    extra = sorted(set(options) - allowed[method])
    if extra:
        raise ValueError(f"options.{extra[0]}: not an option of the {method} method")
    if method == "learned":
        inverse = options.pop("inverse", None)
        if inverse is None:
            inverse = LearnedInverse.fit(model, **options)
        elif options:
            raise ValueError(f"options.{sorted(options)[0]}: not used with a given inverse")
        return inverse.map_components(model.project(X))
    return functions[method](model, X, **options)
