"""Kernel functions evaluated in blocks: one GEMM, then a jitted element-wise map.

A block of ``b`` kernel rows against ``m`` points costs one matrix product
``X @ Y.T`` (``2 b m n`` flops, at the BLAS rate) plus ``O(b m)`` element-wise
work done by a numba kernel in place. Supported kernels (``x, y`` in R^n):

==============  =============================================  ====================
type            k(x, y)                                        parameters
==============  =============================================  ====================
``gaussian``    exp(-||x - y||^2 / (2 sigma^2))                sigma > 0
``laplacian``   exp(-||x - y|| / sigma)   (Euclidean norm)     sigma > 0
``polynomial``  (gamma <x, y> + offset)^degree                 degree >= 1, offset >= 0, gamma > 0
``linear``      <x, y>                                         none
``tanh``        tanh(gamma <x, y> + offset)                    gamma > 0, offset
==============  =============================================  ====================

The Laplacian kernel uses the Euclidean (not the L1) distance so that it, too,
is one GEMM away; it is positive definite like the L1 form. ``tanh`` is not
positive semi-definite in general; kernel PCA then only sees the leading
positive part of its spectrum.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

import numba
import numpy as np

from kpca._fastexp import exp_nonpositive_f32, exp_nonpositive_f64

KERNEL_TYPES = ("gaussian", "laplacian", "polynomial", "linear", "tanh")


@dataclass(frozen=True)
class KernelSpec:
    """A kernel and its parameters; ``from_dict``/``to_dict`` round-trip JSON.

    Only the parameters of the chosen ``type`` are meaningful; ``to_dict``
    drops the others.
    """

    type: str = "gaussian"
    sigma: float = 1.0
    degree: int = 2
    offset: float = 1.0
    gamma: float = 1.0

    _PARAMS = {
        "gaussian": ("sigma",),
        "laplacian": ("sigma",),
        "polynomial": ("degree", "offset", "gamma"),
        "linear": (),
        "tanh": ("gamma", "offset"),
    }

    def __post_init__(self):
        if self.type not in KERNEL_TYPES:
            raise ValueError(f"kernel.type: unknown kernel {self.type!r}; choose one of {KERNEL_TYPES}")
        if self.type in ("gaussian", "laplacian") and not self.sigma > 0:
            raise ValueError(f"kernel.sigma: must be > 0, got {self.sigma}")
        if self.type == "polynomial":
            if int(self.degree) != self.degree or self.degree < 1:
                raise ValueError(f"kernel.degree: must be an integer >= 1, got {self.degree}")
            if not self.offset >= 0:
                raise ValueError(f"kernel.offset: must be >= 0, got {self.offset}")
        if self.type in ("polynomial", "tanh") and not self.gamma > 0:
            raise ValueError(f"kernel.gamma: must be > 0, got {self.gamma}")

    @classmethod
    def from_dict(cls, spec: dict) -> "KernelSpec":
        """Build from ``{"type": "gaussian", "sigma": 3.0}``; unknown keys raise ValueError."""
        spec = dict(spec)
        kind = spec.pop("type", "gaussian")
        allowed = cls._PARAMS.get(kind)
        if allowed is None:
            raise ValueError(f"kernel.type: unknown kernel {kind!r}; choose one of {KERNEL_TYPES}")
        extra = set(spec) - set(allowed)
        if extra:
            raise ValueError(f"kernel.{sorted(extra)[0]}: not a parameter of the {kind} kernel")
        return cls(type=kind, **spec)

    def to_dict(self) -> dict:
        """JSON-able dict with ``type`` and the parameters this kernel uses."""
        values = asdict(self)
        return {"type": self.type, **{k: values[k] for k in self._PARAMS[self.type]}}

    @property
    def needs_norms(self) -> bool:
        """Whether the kernel needs the squared norms of its arguments."""
        return self.type in ("gaussian", "laplacian")


def squared_norms(X: np.ndarray) -> np.ndarray:
    """Row-wise squared Euclidean norms, shape (m,), in X's dtype. Cost O(m n)."""
    return np.einsum("ij,ij->i", X, X)


def kernel_block(
    X: np.ndarray,
    Y: np.ndarray,
    spec: KernelSpec,
    x_sqnorms: np.ndarray | None = None,
    y_sqnorms: np.ndarray | None = None,
) -> np.ndarray:
    """Kernel matrix block ``K[i, j] = k(X[i], Y[j])``.

    Parameters
    ----------
    X : ndarray of shape (b, n)
    Y : ndarray of shape (m, n), same dtype as X
    spec : KernelSpec
    x_sqnorms, y_sqnorms : ndarray of shape (b,) and (m,), optional
        Precomputed squared norms (Gaussian and Laplacian only).

    Returns
    -------
    ndarray of shape (b, m), dtype of X. Cost: one GEMM (2 b m n flops) plus
    O(b m) element-wise work.
    """
    G = X @ Y.T
    kind = spec.type
    if kind == "linear":
        return G
    if kind in ("gaussian", "laplacian"):
        xn = squared_norms(X) if x_sqnorms is None else x_sqnorms
        yn = squared_norms(Y) if y_sqnorms is None else y_sqnorms
        xn = np.ascontiguousarray(xn, dtype=G.dtype)
        yn = np.ascontiguousarray(yn, dtype=G.dtype)
        scale = -0.5 / spec.sigma**2 if kind == "gaussian" else -1.0 / spec.sigma
        _map_rows(_RADIAL_MAPS[(kind, G.dtype)], G, xn, yn, G.dtype.type(scale))
    elif kind == "polynomial":
        _polynomial_from_gram(G, G.dtype.type(spec.gamma), G.dtype.type(spec.offset), int(spec.degree))
    elif kind == "tanh":
        _tanh_from_gram(G, G.dtype.type(spec.gamma), G.dtype.type(spec.offset))
    return G


_MIN_ROWS_PER_THREAD = 16
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def map_threads() -> int:
    """Threads for the element-wise maps: numba's configured thread count
    (``NUMBA_NUM_THREADS``; the service's dask workers set it to 1, so only
    standalone use, like the benchmarks, runs the map on several cores)."""
    return max(1, int(numba.config.NUMBA_NUM_THREADS))


def _map_rows(fn, G, xn, yn, scale) -> None:
    """Apply a jitted row map to G, splitting the rows over `map_threads` threads.

    The maps release the GIL (``nogil=True``), so plain Python threads run them
    in parallel without numba's own threading layer (which must not be entered
    from several threads at once, as dask worker threads would).
    """
    global _pool
    threads = min(map_threads(), G.shape[0] // _MIN_ROWS_PER_THREAD)
    if threads <= 1:
        fn(G, xn, yn, scale)
        return
    with _pool_lock:
        if _pool is None or _pool._max_workers < threads:
            _pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kpca-map")
    bounds = np.linspace(0, G.shape[0], threads + 1).astype(int)
    futures = [_pool.submit(fn, G[a:b], xn[a:b], yn, scale) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
    for f in futures:
        f.result()


def kernel_diagonal(X: np.ndarray, spec: KernelSpec) -> np.ndarray:
    """``k(x_i, x_i)`` for every row of X, shape (m,). Cost O(m n)."""
    if spec.type in ("gaussian", "laplacian"):
        return np.ones(X.shape[0], dtype=X.dtype)
    sq = squared_norms(X)
    if spec.type == "linear":
        return sq
    if spec.type == "polynomial":
        return (spec.gamma * sq + spec.offset) ** spec.degree
    return np.tanh(spec.gamma * sq + spec.offset)


# Jitted element-wise maps, in place on the Gram block G = X Y^T, row by row
# so a row stays in cache between the distance and the exp pass. Twins in
# plain numpy live in tests/naive.py.


@numba.njit(nogil=True, cache=True, fastmath=True)
def _squared_distances(G, xn, yn, i, scale):
    """Row i of G becomes ``scale * max(|x_i|^2 + |y_j|^2 - 2 G[i, j], 0)`` (in G's dtype)."""
    zero = scale - scale
    for j in range(G.shape[1]):
        G[i, j] = scale * max(xn[i] + yn[j] - (G[i, j] + G[i, j]), zero)


@numba.njit(nogil=True, cache=True, fastmath=True)
def _euclidean_distances(G, xn, yn, i, scale):
    """Row i of G becomes ``scale * sqrt(max(|x_i|^2 + |y_j|^2 - 2 G[i, j], 0))``."""
    zero = scale - scale
    for j in range(G.shape[1]):
        G[i, j] = scale * np.sqrt(max(xn[i] + yn[j] - (G[i, j] + G[i, j]), zero))


@numba.njit(nogil=True, cache=True)
def _gaussian_from_gram_f32(G, xn, yn, scale):
    bits = np.empty(G.shape[1], dtype=np.int32)
    for i in range(G.shape[0]):
        _squared_distances(G, xn, yn, i, scale)
        exp_nonpositive_f32(G[i], bits)


@numba.njit(nogil=True, cache=True)
def _gaussian_from_gram_f64(G, xn, yn, scale):
    bits = np.empty(G.shape[1], dtype=np.int64)
    for i in range(G.shape[0]):
        _squared_distances(G, xn, yn, i, scale)
        exp_nonpositive_f64(G[i], bits)


@numba.njit(nogil=True, cache=True)
def _laplacian_from_gram_f32(G, xn, yn, scale):
    bits = np.empty(G.shape[1], dtype=np.int32)
    for i in range(G.shape[0]):
        _euclidean_distances(G, xn, yn, i, scale)
        exp_nonpositive_f32(G[i], bits)


@numba.njit(nogil=True, cache=True)
def _laplacian_from_gram_f64(G, xn, yn, scale):
    bits = np.empty(G.shape[1], dtype=np.int64)
    for i in range(G.shape[0]):
        _euclidean_distances(G, xn, yn, i, scale)
        exp_nonpositive_f64(G[i], bits)


_RADIAL_MAPS = {
    ("gaussian", np.dtype(np.float32)): _gaussian_from_gram_f32,
    ("gaussian", np.dtype(np.float64)): _gaussian_from_gram_f64,
    ("laplacian", np.dtype(np.float32)): _laplacian_from_gram_f32,
    ("laplacian", np.dtype(np.float64)): _laplacian_from_gram_f64,
}


@numba.njit(nogil=True, cache=True)
def _polynomial_from_gram(G, gamma, offset, degree):
    b, m = G.shape
    for i in range(b):
        for j in range(m):
            G[i, j] = (gamma * G[i, j] + offset) ** degree


@numba.njit(nogil=True, cache=True)
def _tanh_from_gram(G, gamma, offset):
    b, m = G.shape
    for i in range(b):
        for j in range(m):
            G[i, j] = np.tanh(gamma * G[i, j] + offset)
