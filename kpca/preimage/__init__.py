"""Pre-images: from the kernel principal subspace back to input space (reconstruction, denoising).

A pre-image of a point x is a point z whose feature image is closest to the
projection of x plus the mean, ``Psi(x)`` (`kpca.model`): it minimises
``rho(z) = ||Psi(x) - Phi(z)||^2`` (`kpca.preimage._objective`).

Every method is declared once in `METHODS` (its function, the options a
request may set, and the kernels it supports); the service's schemas read
the table. Methods: ``fixed-point`` (Mika et al. 1999, radial kernels, with
restarts), ``kwok-tsang`` (closed form from the nearest training points),
``gradient`` (L-BFGS-B on rho, any kernel), ``learned`` (a kernel ridge map
from components to inputs, Bakir et al. 2004), ``decoder`` (the model's own,
for models that have one: autoencoder KPCA, `kpca.solvers.Solver.model`);
`reconstruct` dispatches (``"auto"``: the model's decoder if it has one, else
fixed point for the Gaussian kernel, else gradient). Every
method returns finite output for finite input, including points so far from
the data that every Gaussian ``k(z, x_i)`` underflows to 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kpca.model import KernelModel
from kpca.params import Param
from kpca.preimage.fixed_point import FIXED_POINT_KERNELS, fixed_point
from kpca.preimage.gradient import gradient_descent
from kpca.preimage.kwok_tsang import KWOK_TSANG_KERNELS, kwok_tsang
from kpca.preimage.learned import LearnedInverse, learned


@dataclass(frozen=True)
class Method:
    """A pre-image method: ``function(model, X, **options)``, the options a request may set
    (`kpca.params.Param`), further keyword arguments of the Python API, and the kernels it
    supports (None: all)."""

    name: str
    function: Callable
    summary: str
    options: tuple[Param, ...]
    python_options: tuple[str, ...] = ()
    kernels: tuple[str, ...] | None = None


N_NEIGHBORS = Param("n_neighbors", int, 10, low=1, high=1000,
                    description="nearest training points used by the Kwok-Tsang start")
TOL = Param("tol", float, None, low=0.0, low_open=True, description="convergence tolerance")

METHODS: dict[str, Method] = {m.name: m for m in (
    Method("fixed-point", fixed_point, "Mika et al.'s fixed-point iteration with restarts (radial kernels)",
           (Param("n_iter", int, 100, low=1, high=1000, description="fixed-point iterations per start"), TOL,
            Param("restarts", int, 3, low=1, high=20, description="starts per point"), N_NEIGHBORS),
           ("init", "rng", "stop"), FIXED_POINT_KERNELS),
    Method("kwok-tsang", kwok_tsang, "closed form from the distances to the nearest training points",
           (N_NEIGHBORS,), (), KWOK_TSANG_KERNELS),
    Method("gradient", gradient_descent, "L-BFGS-B on ||P Phi(x) - Phi(z)||^2 (any kernel)",
           (Param("max_iter", int, 200, low=1, high=5000, description="L-BFGS-B iterations per point"), TOL,
            N_NEIGHBORS), ("init", "stop")),
    Method("learned", learned, "a kernel ridge map from components to inputs, fitted once per model",
           (), ("inverse", "n_samples", "alpha", "gamma", "rng")),
    Method("decoder", lambda model, X: model.reconstruct(X),
           "the model's own decoder (autoencoder KPCA, whose models are not kernel expansions)", ()),
)}
PREIMAGE_METHODS = tuple(name for name in METHODS if name != "decoder")  # those of kernel expansions


def reconstruct(model: KernelModel, X, method: str = "auto", stop=None, **options) -> np.ndarray:
    """Pre-images of the projections of the rows of X.

    Parameters
    ----------
    model : KernelModel
    X : ndarray of shape (m, n)
    method : {"auto", "fixed-point", "kwok-tsang", "gradient", "learned"}
        "auto" is "fixed-point" for the Gaussian kernel, "gradient" otherwise.
    stop : callable, optional
        For the iterative methods (fixed point, gradient), asked between
        their steps: True raises `kpca.errors.Stopped`. The closed-form
        methods run to their end (one kernel row per point).
    **options
        Keyword arguments of the chosen method; an unknown one raises
        ValueError naming it.

    Returns
    -------
    ndarray of shape (m, n). Cost: the method's.
    """
    chosen = _chosen_method(model, method, options)
    if stop is not None and "stop" in chosen.python_options:
        options = {**options, "stop": stop}
    return chosen.function(model, X, **options)


def reconstruct_components(model, B, method: str = "auto", **options) -> np.ndarray:
    """Pre-images of given projections (the rows of B): scikit-learn's ``inverse_transform``.

    The method is chosen as in `reconstruct`. Decoder models decode B;
    ``learned`` maps B; the others find the point whose feature image is
    closest to ``Psi = sum_i gamma_i Phi(x_i)`` with gamma from B
    (`kpca.model.KernelModel.target_from_components`), where `reconstruct`
    would take x itself as a start, the training point nearest to Psi.

    Parameters
    ----------
    model : KernelModel or a model with its own decoder
    B : ndarray of shape (m, r)
    method, **options : as for `reconstruct`

    Returns
    -------
    ndarray of shape (m, n). Cost: the method's, plus O(m r l) for the nearest points.
    """
    chosen = _chosen_method(model, method, options)
    if chosen.name == "decoder":
        B = np.ascontiguousarray(B, dtype=np.float64)
        if B.ndim != 2 or B.shape[1] != model.n_components:
            raise ValueError(f"components: expected shape (m, {model.n_components}), got {B.shape}")
        return model.decode(B) * model.scale
    B = model.check_components(B)
    if chosen.name == "learned":
        inverse = options.pop("inverse", None) or LearnedInverse.fit(model, **options)
        return inverse.map_components(B)
    def nearest_block(Bb):
        return np.argmin(model.distances(model.target_from_components(Bb)), axis=1)[:, None]

    nearest = model.map_blocks(B, nearest_block, 1)[:, 0].astype(np.intp)
    starts = np.asarray(model.rows.take(nearest), dtype=np.float64)
    return chosen.function(model, starts, components=B, **options)


def _chosen_method(model, method: str, options: dict) -> Method:
    """The `Method` that ``method`` names for this model (`check_method` on its kernel and kind)."""
    own_decoder = not isinstance(model, KernelModel)
    kernel_type = None if own_decoder else model.kernel.type
    return check_method(kernel_type, own_decoder, method, options)


def check_method(kernel_type: str | None, own_decoder: bool, method: str, options) -> Method:
    """The `Method` that ``method`` names for a model of kernel ``kernel_type`` ("auto": the model's
    decoder if it has one, else fixed point for the Gaussian kernel, else gradient), checked before any
    work: ValueError naming ``method`` (unknown, not for this kind of model, or not for this kernel) or
    ``options.<name>`` (the first option the method does not take). Pure, so the service can run it on
    the model's record for every route that computes pre-images. Cost O(options)."""
    asked = method
    if method == "auto":
        method = "decoder" if own_decoder else "fixed-point" if kernel_type == "gaussian" else "gradient"
    chosen = METHODS.get(method)
    if chosen is None:
        raise ValueError(f"method: unknown pre-image method {method!r}; choose one of {PREIMAGE_METHODS} or 'auto'")
    if own_decoder != (method == "decoder"):
        raise ValueError(f"method: {method!r} does not apply to this model; use 'auto' "
                         + ("(its own decoder)" if own_decoder else "(the decoder is for autoencoder KPCA models)"))
    if chosen.kernels is not None and kernel_type is not None and kernel_type not in chosen.kernels:
        raise ValueError(f"method: {method!r} needs a kernel among {', '.join(chosen.kernels)}, not "
                         f"{kernel_type!r}; use method='gradient' or 'auto'")
    allowed = {p.name for p in chosen.options} | set(chosen.python_options)
    extra = sorted(set(options) - allowed)
    if extra:
        raise ValueError(f"options.{extra[0]}: not an option of the {method} method"
                         + (" (the one 'auto' chooses for this model)" if asked == "auto" else ""))
    return chosen


#: Options that multiply a method's work per row (each start, each iteration costs a kernel row).
WORK_OPTIONS = {"fixed-point": ("restarts", "n_iter"), "gradient": ("max_iter",)}


def work_per_row(method: str, options) -> dict[str, int]:
    """The factors by which ``method`` (a name of `METHODS`, resolved: not "auto") multiplies the work of
    one kernel row per input row: each of its `WORK_OPTIONS` with its value in ``options`` or its
    default (an empty dict for the closed-form methods: one kernel row). Pure, O(options)."""
    chosen = METHODS[method]
    defaults = {p.name: p.default for p in chosen.options}
    return {name: int(options.get(name) or defaults[name]) for name in WORK_OPTIONS.get(method, ())}


__all__ = ["METHODS", "PREIMAGE_METHODS", "Method", "reconstruct", "reconstruct_components",
           "fixed_point", "kwok_tsang", "gradient_descent", "learned", "LearnedInverse"]
