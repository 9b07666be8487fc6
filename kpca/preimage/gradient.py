"""Pre-images by minimising rho with L-BFGS-B and its analytic gradient (seed 002 §4.2, which uses
gradient descent started at the Kwok–Tsang point); works for every kernel."""

from __future__ import annotations

import numpy as np

from kpca.errors import Stopped
from kpca.model import KernelModel, Target
from kpca.preimage._objective import rho_and_gradient, rho_gradient_and_slopes
from kpca.preimage.kwok_tsang import KWOK_TSANG_KERNELS, kwok_tsang_block


def _gradient_starts(model: KernelModel, Xb: np.ndarray, target: Target, n_neighbors: int) -> np.ndarray:
    """Of the Kwok–Tsang point (if the kernel allows) and x itself, the one with lower rho."""
    if model.kernel.type not in KWOK_TSANG_KERNELS:
        return Xb.copy()
    kt = kwok_tsang_block(model, target, n_neighbors)[0]
    Z = np.concatenate([kt, Xb])
    rho = rho_and_gradient(model.rows, Z, np.tile(target.gamma, (2, 1)), np.tile(target.norm2, 2))[0]
    b = Xb.shape[0]
    use_x = ~(rho[:b] <= rho[b:])  # also when the KT rho is not finite
    return np.where(use_x[:, None], Xb, kt)


def gradient_descent(model: KernelModel, X, *, init=None, max_iter: int = 200, tol: float = 1e-8,
                     n_neighbors: int = 10, components=None, stop=None) -> np.ndarray:
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
    components : ndarray of shape (m, r), optional
        Pre-images of these projections instead of X's (the estimator's
        ``inverse_transform``); X is then only a start.
    stop : callable, optional
        Asked before every function evaluation; True raises
        `kpca.errors.Stopped`.

    Returns
    -------
    ndarray of shape (m, n): per point the optimiser's result, or its start if
    that has the lower (or only finite) rho. Cost per function evaluation one
    kernel row and its gradient, O(l n); points are optimised one by one.
    """
    import scipy.optimize  # here, not at the top: its import would slow every API and worker start

    X = model.check_points(X)
    init = None if init is None else model.check_points(init, "init")
    if init is not None and init.shape != X.shape:
        raise ValueError(f"init: expected shape {X.shape} like X, got {init.shape}")
    components = model.check_components(components, X.shape[0])
    out = np.empty_like(X)
    step = model.block_rows()
    options = {"maxiter": int(max_iter), "ftol": float(tol), "gtol": float(tol)}
    for a in range(0, X.shape[0], step):
        Xb = X[a : a + step]
        target = model.target(Xb) if components is None else model.target_from_components(components[a : a + step])
        Z0 = _gradient_starts(model, Xb, target, n_neighbors) if init is None else init[a : a + step]
        for j in range(Xb.shape[0]):
            G, norm2 = target.gamma[j : j + 1], target.norm2[j : j + 1]

            def fun(z, G=G, norm2=norm2):
                if stop is not None and stop():
                    raise Stopped("the pre-image was asked to stop")
                rho, grad = rho_and_gradient(model.rows, z[None, :], G, norm2)
                return float(rho[0]), grad[0]

            z0 = Z0[j]
            rho0 = fun(z0)[0]
            with np.errstate(all="ignore"):
                res = scipy.optimize.minimize(fun, z0, jac=True, method="L-BFGS-B", options=options)
            finite = bool(np.isfinite(res.x).all() and np.isfinite(res.fun))
            improved = finite and (not np.isfinite(rho0) or res.fun <= rho0)
            out[a + j] = res.x if improved else z0
    return out


def batched_descent(model: KernelModel, X, *, init=None, n_iter: int = 10, n_neighbors: int = 10,
                    components=None) -> np.ndarray:
    """Pre-images by steepest descent on rho for all points at once, from the Kwok–Tsang start (seed
    002 §4.2: gradient descent started at the Kwok–Tsang point), a fixed number of steps.

    Each step moves every point along ``-grad rho`` (module note of `kpca.preimage._objective`) by its
    own step length ``t`` and keeps the move only where rho decreased; a kept move lengthens that
    point's step by 1.5, a refused one halves it. The first step of a radial kernel is the fixed-point
    step ``t = 1 / (4 |u|)`` (which takes ``z`` to ``v / u``); of a dot-product kernel
    ``0.1 (1 + ||z||) / ||grad rho||``. No tolerance test: the result is a deterministic function of X
    (what the tuner's finite differences need, `kpca.images.tuning`), and rho never increases.

    Parameters
    ----------
    model : KernelModel
    X : ndarray of shape (m, n)
    init : ndarray of shape (m, n), optional
        Starts; default the lower-rho of the Kwok–Tsang point and x (x for ``tanh``).
    n_iter : int, default 10
    n_neighbors : int, default 10
    components : ndarray of shape (m, r), optional
        The projections of X onto the model's components, where the caller has them (they are not
        computed again).

    Returns
    -------
    ndarray of shape (m, n). Cost ``n_iter + 1`` passes over the model's rows for every block of
    points, O(n_iter m l n).
    """
    X = model.check_points(X)
    init = None if init is None else model.check_points(init, "init")
    components = model.check_components(components, X.shape[0])
    out = np.empty_like(X)
    step = model.block_rows()
    radial = model.kernel.kernel.radial
    for a in range(0, X.shape[0], step):
        Xb = X[a : a + step]
        target = model.target(Xb) if components is None else model.target_from_components(components[a : a + step])
        Z = _gradient_starts(model, Xb, target, n_neighbors) if init is None else init[a : a + step].copy()
        G, norm2 = target.gamma, target.norm2
        rho, grad, u = rho_gradient_and_slopes(model.rows, Z, G, norm2)
        if radial:
            t = 1.0 / np.maximum(4.0 * np.abs(u), 1e-300)
        else:
            t = 0.1 * (1.0 + np.linalg.norm(Z, axis=1)) / np.maximum(np.linalg.norm(grad, axis=1), 1e-300)
        for _ in range(int(n_iter)):
            with np.errstate(all="ignore"):
                proposal = Z - t[:, None] * grad
                rho_new, grad_new = rho_and_gradient(model.rows, proposal, G, norm2)
            better = np.isfinite(rho_new) & np.isfinite(grad_new).all(axis=1) & (rho_new < rho)
            Z[better], rho[better], grad[better] = proposal[better], rho_new[better], grad_new[better]
            t = np.where(better, 1.5 * t, 0.5 * t)
        out[a : a + step] = Z
    return out
