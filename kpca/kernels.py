"""Kernel functions: one table (`KERNELS`) and blocks of kernel values computed tile by tile.

A block of ``b`` kernel rows against ``m`` points costs the matrix product
``X @ Y.T`` (``2 b m n`` flops, at the BLAS rate) plus ``O(b m)`` element-wise
work by numba maps (`kpca._tiles`); radial kernels go tile by tile so that
the block is written to memory once (`kernel_block_into`), or never, when all
that is wanted is its product with a small matrix on the left
(`kernel_left_product_into`, the solvers' update).

Every kernel is declared once in `KERNELS`, with its parameters
(`kpca.params.Param`), its formula, and its *profile*: a kernel is either
radial, ``k(x, y) = f(||x - y||^2)``, or a dot-product kernel,
``k(x, y) = f(<x, y>)``, and the profile returns ``f(t)`` and ``f'(t)``,
from which the diagonal and the pre-image gradients (`kpca.preimage`) follow:

==============  =============================================  ============================================
type            k(x, y)                                        f'(t)
==============  =============================================  ============================================
``gaussian``    exp(-||x - y||^2 / (2 sigma^2))                -k / (2 sigma^2)
``laplacian``   exp(-||x - y|| / sigma)   (Euclidean norm)     -k / (2 sigma sqrt(t)), 0 at t = 0
``polynomial``  (gamma <x, y> + offset)^degree                 degree gamma (gamma t + offset)^(degree - 1)
``linear``      <x, y>                                         1
``tanh``        tanh(gamma <x, y> + offset)                    gamma (1 - k^2)
==============  =============================================  ============================================

The Laplacian kernel uses the Euclidean (not the L1) distance so that it, too,
is one GEMM away; it is positive definite like the L1 form. ``tanh`` is not
positive semi-definite in general; kernel PCA then only sees the leading
positive part of its spectrum.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kpca import _tiles
from kpca._threads import map_threads
from kpca.errors import Degenerate
from kpca.params import Param, ParamError, check_params, with_defaults


@dataclass(frozen=True)
class Kernel:
    """One row of the kernel table.

    Attributes
    ----------
    name : str
    formula : str
        ``k(x, y)`` in words a user reads.
    params : tuple of Param
    radial : bool
        ``k = f(||x - y||^2)`` (True) or ``f(<x, y>)`` (False).
    profile : callable
        ``profile(spec, t) -> (f(t), f'(t))``, elementwise over a float64 array t.
    tile_map : callable or None
        Radial kernels: the jitted map of `kpca._tiles` and ``tile_scale(spec)``, its scale argument.
    gram_map : callable or None
        Dot-product kernels: ``gram_map(G, spec)`` turns ``X Y^T`` into kernel values in place
        (None: the Gram matrix is the kernel).
    inverse : callable or None
        ``inverse(spec, k) -> t`` with ``f(t) = k`` where the kernel determines input distances
        (the Kwok-Tsang pre-image, `kpca.preimage.kwok_tsang`); values outside f's range are
        clipped to it.
    check : callable or None
        ``check(spec)`` raises `ParamError` for values that pass the bounds but break the
        arithmetic whatever the data (a width whose square under- or overflows).
    definite : bool
        Positive semi-definite whatever its parameters and the data (False: ``tanh``, whose K' a fit
        checks on a sample of the rows, `kpca.sampled_kernel.negative_share`).
    """

    name: str
    formula: str
    params: tuple[Param, ...]
    radial: bool
    profile: Callable
    tile_map: Callable | None = None
    tile_scale: Callable | None = None
    gram_map: Callable | None = None
    inverse: Callable | None = None
    check: Callable | None = None
    definite: bool = True


_SIGMA = Param("sigma", float, "auto", low=0.0, low_open=True, auto=True,
               description="kernel width in the units of the data (> 0), or \"auto\" (the default): the median "
                           "distance between the rows of a fixed-seed sample of the data (`median_distance`)")
_GAMMA = Param("gamma", float, 1.0, low=0.0, low_open=True, description="scale of the inner product (> 0)")


def _gaussian_profile(spec, t):
    k = np.exp(t * (-0.5 / spec.sigma**2))
    return k, k * (-0.5 / spec.sigma**2)


def _laplacian_profile(spec, t):
    d = np.sqrt(t)
    k = np.exp(d * (-1.0 / spec.sigma))
    slope = np.zeros_like(k)
    np.divide(k * (-0.5 / spec.sigma), d, out=slope, where=d > 0)  # the cone point t = 0: slope 0
    return k, slope


def _polynomial_profile(spec, t):
    base = spec.gamma * t + spec.offset
    p = int(spec.degree)
    below = base ** (p - 1)
    return below * base, (p * spec.gamma) * below


def _tanh_profile(spec, t):
    k = np.tanh(spec.gamma * t + spec.offset)
    return k, spec.gamma * (1.0 - k * k)


def _check_width(spec) -> None:
    """sigma^2 and 1/sigma^2 must be finite and normal: beyond that every kernel value is 0 or 1."""
    sigma = np.float64(spec.sigma)
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        square, inverse = sigma * sigma, 1.0 / (sigma * sigma)
    tiny = np.finfo(np.float64).tiny
    if not (tiny <= square < np.inf and tiny <= inverse < np.inf):
        raise ParamError("kernel.sigma", f"{spec.sigma!r} is too {'small' if sigma < 1 else 'large'}: sigma^2 or "
                                         "1/sigma^2 leaves the range of float64, so every kernel value would be 0 "
                                         "or 1; use a width near the distances between rows, or \"auto\"")


def median_distance(X: np.ndarray) -> float:
    """The median Euclidean distance between distinct rows of X (all pairs i < j; pairs of equal rows
    left out), the "median heuristic" for a kernel width. `Degenerate` if all rows are equal.
    Cost O(m^2 n) for m rows: pass a sample (`kpca.rows.KernelRows.resolve_kernel`)."""
    X = np.asarray(X, dtype=np.float64)
    norms = squared_norms(X)
    d2 = norms[:, None] + norms[None, :] - 2.0 * (X @ X.T)
    upper = d2[np.triu_indices(X.shape[0], k=1)]
    positive = upper[upper > 64 * np.finfo(np.float64).eps * np.max(norms, initial=0.0)]
    if positive.size == 0:
        raise Degenerate("all rows of the sample are equal: no distance to set a kernel width from")
    return float(np.sqrt(np.median(positive)))


def _radial_argument(k):
    return np.clip(k, np.finfo(np.float64).eps, 1.0)


def _polynomial_inverse(spec, k):
    """Inner products t with ``(gamma t + offset)^degree = k``: the real root for odd degrees, the
    non-negative one for even degrees."""
    p = int(spec.degree)
    root = np.sign(k) * np.abs(k) ** (1.0 / p) if p % 2 else np.maximum(k, 0.0) ** (1.0 / p)
    return (root - spec.offset) / spec.gamma


def _polynomial_gram(G, spec):
    work = G.dtype.type
    _tiles.polynomial_from_gram(G, work(spec.gamma), work(spec.offset), int(spec.degree))


def _tanh_gram(G, spec):
    work = G.dtype.type
    _tiles.tanh_from_gram(G, work(spec.gamma), work(spec.offset))


KERNELS: dict[str, Kernel] = {
    kernel.name: kernel
    for kernel in (
        Kernel("gaussian", "exp(-||x - y||^2 / (2 sigma^2))", (_SIGMA,), True, _gaussian_profile,
               tile_map=_tiles.gaussian_tile, tile_scale=lambda spec: -0.5 / spec.sigma**2,
               inverse=lambda spec, k: -2.0 * spec.sigma**2 * np.log(_radial_argument(k)), check=_check_width),
        Kernel("laplacian", "exp(-||x - y|| / sigma), Euclidean norm", (_SIGMA,), True, _laplacian_profile,
               tile_map=_tiles.laplacian_tile, tile_scale=lambda spec: -1.0 / spec.sigma,
               inverse=lambda spec, k: (spec.sigma * np.log(_radial_argument(k))) ** 2, check=_check_width),
        Kernel("polynomial", "(gamma <x, y> + offset)^degree",
               (Param("degree", int, 2, low=1, high=64, description="integer power, 1 to 64"),
                Param("offset", float, 1.0, low=0.0, description="added to the scaled inner product (>= 0)"),
                _GAMMA), False, _polynomial_profile, gram_map=_polynomial_gram, inverse=_polynomial_inverse),
        Kernel("linear", "<x, y>", (), False, lambda spec, t: (t, np.ones_like(t)), inverse=lambda spec, k: k),
        Kernel("tanh", "tanh(gamma <x, y> + offset); not positive semi-definite in general",
               (_GAMMA, Param("offset", float, 0.0, description="added to the scaled inner product")),
               False, _tanh_profile, gram_map=_tanh_gram, definite=False),
    )
}
KERNEL_TYPES = tuple(KERNELS)


def _rbf_params(params: dict) -> dict:
    """scikit-learn's ``rbf`` parameters as the Gaussian kernel's: ``gamma`` g is ``sigma = 1 / sqrt(2 g)``."""
    params = dict(params)
    if "gamma" not in params:
        return params
    gamma = params.pop("gamma")
    if "sigma" in params:
        raise ParamError("kernel.gamma", "the rbf kernel takes sigma or gamma (sigma = 1 / sqrt(2 gamma)), not both")
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not np.isfinite(gamma) or gamma <= 0:
        raise ParamError("kernel.gamma", f"must be a finite number > 0, got {gamma!r}")
    return {**params, "sigma": float(1.0 / np.sqrt(2.0 * gamma))}


#: other names of kernels (scikit-learn's ``rbf``): name -> (the kernel of `KERNELS`, its parameters read
#: as that kernel's). A spec written back (`KernelSpec.to_dict`) names the kernel itself.
KERNEL_ALIASES: dict[str, tuple[str, Callable[[dict], dict]]] = {"rbf": ("gaussian", _rbf_params)}


class KernelSpec:
    """A kernel of `KERNELS` and its parameter values: ``KernelSpec("gaussian", sigma=3.0)``.

    Parameters are checked against the table (`kpca.params.ParamError`
    naming ``kernel.<param>``) and defaults filled in; they read as
    attributes (``spec.sigma``). `from_dict` / `to_dict` round-trip JSON.
    Immutable and hashable.
    """

    __slots__ = ("type", "_values")

    def __init__(self, type: str = "gaussian", **params: Any):
        kernel = KERNELS.get(type) if isinstance(type, str) else None
        if kernel is None:
            raise ParamError("kernel", f"unknown kernel type {type!r}; choose one of {', '.join(KERNEL_TYPES)}")
        values = with_defaults(kernel.params, check_params(kernel.params, params, "kernel", f"the {type} kernel"))
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "_values", tuple(values.items()))
        if kernel.check is not None and not self.unresolved:
            kernel.check(self)

    @property
    def unresolved(self) -> tuple[str, ...]:
        """Names of the parameters still ``"auto"``: the data must resolve them (`resolved`) before
        any kernel value can be computed."""
        return tuple(key for key, value in self._values if value == "auto")

    def resolved(self, sample: np.ndarray) -> KernelSpec:
        """This kernel with every ``"auto"`` parameter set from ``sample`` (rows of the data): a width
        is the rows' `median_distance`. Itself if nothing is ``"auto"``. Cost O(m^2 n) for m rows."""
        if not self.unresolved:
            return self
        values = dict(self._values)
        values.update({name: median_distance(sample) for name in self.unresolved})  # only widths are "auto"
        return KernelSpec(self.type, **values)

    def require_resolved(self) -> KernelSpec:
        """Itself, or ValueError naming the parameter that is still ``"auto"``."""
        if self.unresolved:
            raise ValueError(f"kernel.{self.unresolved[0]}: \"auto\" must be resolved from the data before kernel "
                             "values are computed (KernelSpec.resolved, KernelRows.resolve_kernel)")
        return self

    @classmethod
    def from_dict(cls, spec: Mapping) -> KernelSpec:
        """Build from ``{"type": "gaussian", "sigma": 3.0}`` (or an alias of `KERNEL_ALIASES`, such as
        ``{"type": "rbf", "gamma": 0.5}``); unknown keys raise `ParamError`."""
        spec = dict(spec)
        kind = spec.pop("type", "gaussian")
        if isinstance(kind, str) and kind in KERNEL_ALIASES:
            kind, read = KERNEL_ALIASES[kind]
            spec = read(spec)
        return cls(kind, **spec)

    def to_dict(self) -> dict:
        """JSON-able dict with ``type`` and the kernel's parameters."""
        return {"type": self.type, **dict(self._values)}

    @property
    def kernel(self) -> Kernel:
        """The table row of this kernel."""
        return KERNELS[self.type]

    @property
    def needs_norms(self) -> bool:
        """Whether the kernel needs the squared norms of its arguments (radial kernels)."""
        return self.kernel.radial

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("_"):
            for key, value in self._values:
                if key == name:
                    return value
        raise AttributeError(f"the {self.type} kernel has no parameter {name!r}")

    def __setattr__(self, name, value):
        raise AttributeError("KernelSpec is immutable")

    def __reduce__(self):
        return KernelSpec.from_dict, (self.to_dict(),)

    def __eq__(self, other) -> bool:
        return isinstance(other, KernelSpec) and (self.type, self._values) == (other.type, other._values)

    def __hash__(self) -> int:
        return hash((self.type, self._values))

    def __repr__(self) -> str:
        args = "".join(f", {key}={value!r}" for key, value in self._values)
        return f"KernelSpec({self.type!r}{args})"


def squared_norms(X: np.ndarray) -> np.ndarray:
    """Row-wise squared Euclidean norms, shape (m,), in X's dtype. Cost O(m n)."""
    return np.einsum("ij,ij->i", X, X)


def kernel_block(
    X: np.ndarray,
    Y: np.ndarray,
    spec: KernelSpec,
    x_sqnorms: np.ndarray | None = None,
    y_sqnorms: np.ndarray | None = None,
    threads: int | None = None,
) -> np.ndarray:
    """Kernel matrix block ``K[i, j] = k(X[i], Y[j])``.

    Parameters
    ----------
    X : ndarray of shape (b, n)
    Y : ndarray of shape (m, n), same dtype as X
    spec : KernelSpec
    x_sqnorms, y_sqnorms : ndarray of shape (b,) and (m,), optional
        Precomputed squared norms (radial kernels only).
    threads : int, optional
        Threads sharing the tiles, default `map_threads`.

    Returns
    -------
    ndarray of shape (b, m), dtype of X. Cost: one GEMM (2 b m n flops) plus
    O(b m) element-wise work (see `kernel_block_into`).
    """
    out = np.empty((X.shape[0], Y.shape[0]), dtype=X.dtype)
    return kernel_block_into(out, 0, X, Y, spec, x_sqnorms, y_sqnorms, threads=threads)


def kernel_block_into(
    out: np.ndarray,
    col0: int,
    X: np.ndarray,
    Y: np.ndarray,
    spec: KernelSpec,
    x_sqnorms: np.ndarray | None = None,
    y_sqnorms: np.ndarray | None = None,
    row_shift: np.ndarray | None = None,
    col_shift: np.ndarray | None = None,
    threads: int | None = None,
) -> np.ndarray:
    """Write ``k(X[i], Y[j]) + row_shift[i] + col_shift[j]`` into ``out[i, col0 + j]``.

    ``out`` is a C-contiguous (b, >= col0 + m) float array, so that a caller
    assembling rows against a chunked data set writes each chunk's block in
    place; the optional shifts (shapes (b,) and (m,)) fold the centring of
    eq. 5 into the same pass. The kernel is computed in X's dtype and
    written in out's (float32 work into float64 rows costs nothing extra).
    Returns ``out``.

    Radial blocks are computed tile by tile (`kpca._tiles.run_tiles`): a GEMM
    into a cache-sized buffer, then a jitted map that writes the kernel
    values once to ``out``, the tiles shared among ``threads`` (default
    `map_threads`) threads. Cost: 2 b m n flops plus O(b m).
    """
    if not (out.flags.c_contiguous and out.dtype.kind == "f" and out.shape[0] == X.shape[0]
            and out.shape[1] >= col0 + Y.shape[0]):
        raise ValueError("out: expected a C-contiguous float array with room for the block")
    spec.require_resolved()
    dtype = out.dtype
    if spec.kernel.radial:
        fn, args = _radial_arguments(X, Y, spec, dtype, x_sqnorms, y_sqnorms, row_shift, col_shift)
        _tiles.run_tiles(fn, out, col0, X, Y, *args, _threads(threads))
        return out
    out[:, col0 : col0 + Y.shape[0]] = _gram_kernel(X, Y, spec, dtype, row_shift, col_shift)
    return out


def kernel_left_product_into(
    acc: np.ndarray,
    col0: int,
    C: np.ndarray,
    X: np.ndarray,
    Y: np.ndarray,
    spec: KernelSpec,
    x_sqnorms: np.ndarray | None = None,
    y_sqnorms: np.ndarray | None = None,
    row_shift: np.ndarray | None = None,
    col_shift: np.ndarray | None = None,
    threads: int | None = None,
    T: np.ndarray | None = None,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """``acc[:, J] = T @ start[:, J] + C @ B`` for the columns ``J = col0 .. col0 + m``, with
    ``B[i, j] = k(X[i], Y[j]) + row_shift[i] + col_shift[j]`` never stored.

    ``acc`` is a C-contiguous (d, >= col0 + m) float array and ``C`` (d, b);
    ``T`` (d, d) defaults to the identity and ``start`` (shaped as ``acc``)
    to ``acc`` itself, so by default C @ B is added to ``acc``. The kernel is
    computed in X's dtype and multiplied with C in C's dtype (float32 C: a
    float32 GEMM, accumulated into ``acc``'s dtype). Returns ``acc``.

    Radial blocks go panel by panel (`kpca._tiles.run_panels`): each kernel
    tile is multiplied by its columns of C while it is in cache, so B never
    reaches memory; ``T @ start`` is formed panel by panel too, and the
    result does not depend on the thread count. Cost: ``2 b m (n + d)``
    (+ ``2 d^2 m`` with T) flops plus O(b m) element-wise work; memory
    O(d m) besides the tiles.
    """
    d, b, m = C.shape[0], X.shape[0], Y.shape[0]
    if not (acc.flags.c_contiguous and acc.dtype.kind == "f" and acc.shape[0] == d and acc.shape[1] >= col0 + m
            and C.shape[1] == b):
        raise ValueError(f"acc: expected a C-contiguous float array of {d} rows with room for {m} columns "
                         f"from column {col0}, and C of shape ({d}, {b})")
    start = acc if start is None else start
    if start.shape != acc.shape or (T is not None and T.shape != (d, d)):
        raise ValueError(f"T, start: expected shapes ({d}, {d}) and {acc.shape}")
    spec.require_resolved()
    dtype = C.dtype
    if spec.kernel.radial:
        fn, args = _radial_arguments(X, Y, spec, dtype, x_sqnorms, y_sqnorms, row_shift, col_shift)
        _tiles.run_panels(fn, acc, col0, np.ascontiguousarray(C), X, Y, *args, _threads(threads), T, start)
        return acc
    cols = slice(col0, col0 + m)
    first = start[:, cols] if T is None else T @ start[:, cols]
    acc[:, cols] = first + C @ _gram_kernel(X, Y, spec, dtype, row_shift, col_shift)
    return acc


def kernel_diagonal(X: np.ndarray, spec: KernelSpec) -> np.ndarray:
    """``k(x_i, x_i)`` for every row of X, shape (m,): ``f(0)`` (radial) or ``f(||x||^2)``. Cost O(m n)."""
    t = np.zeros(X.shape[0], dtype=X.dtype) if spec.kernel.radial else squared_norms(X)
    return np.asarray(spec.require_resolved().kernel.profile(spec, t)[0], dtype=X.dtype)


def kernel_and_slope(spec: KernelSpec, gram: np.ndarray, zn: np.ndarray, yn: np.ndarray):
    """Kernel values ``k`` and profile slopes ``f'`` (module table) of ``Z`` against ``Y``, both (b, c).

    ``gram = Z Y^T`` and the squared norms ``zn`` (b,), ``yn`` (c,), all
    float64. Radial kernels get ``t = ||z||^2 + ||y||^2 - 2 <z, y>``, with
    values below its rounding (``64 eps (||z||^2 + ||y||^2)``) set to 0, so
    that a point that equals a training point meets the profile's ``t = 0``
    case (the Laplacian's cone point). Cost O(b c).
    """
    kernel = spec.kernel
    if not kernel.radial:
        return kernel.profile(spec, gram)
    scale = zn[:, None] + yn[None, :]
    t = scale - 2.0 * gram
    t[t <= 64 * np.finfo(np.float64).eps * scale] = 0.0
    return kernel.profile(spec, t)


def _threads(threads: int | None) -> int:
    """Threads for the tiles: ``threads`` if given, else `map_threads`."""
    return map_threads() if threads is None else max(1, int(threads))


_RadialArguments = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.floating]  # xn, yn, a, c, scale


def _radial_arguments(X, Y, spec, dtype, x_sqnorms, y_sqnorms, row_shift,
                      col_shift) -> tuple[Callable[..., None], _RadialArguments]:
    """The jitted tile map of a radial kernel and its arguments after the tile:
    norms in X's dtype, shifts in ``dtype`` (zeros where not given), the scale."""
    work = X.dtype
    xn = squared_norms(X) if x_sqnorms is None else x_sqnorms
    yn = squared_norms(Y) if y_sqnorms is None else y_sqnorms
    a = np.zeros(X.shape[0], dtype) if row_shift is None else row_shift
    c = np.zeros(Y.shape[0], dtype) if col_shift is None else col_shift
    norms = [np.ascontiguousarray(v, dtype=work) for v in (xn, yn)]
    shifts = [np.ascontiguousarray(v, dtype=dtype) for v in (a, c)]
    kernel = spec.kernel
    return kernel.tile_map, (*norms, *shifts, work.type(kernel.tile_scale(spec)))


def _gram_kernel(X, Y, spec, dtype, row_shift, col_shift) -> np.ndarray:
    """The (b, m) block of a dot-product kernel in ``dtype``, shifted."""
    G = X @ Y.T
    if spec.kernel.gram_map is not None:
        spec.kernel.gram_map(G, spec)
    G = G.astype(dtype, copy=False)
    if row_shift is not None:
        G += np.asarray(row_shift, dtype)[:, None]
    if col_shift is not None:
        G += np.asarray(col_shift, dtype)[None, :]
    return G
