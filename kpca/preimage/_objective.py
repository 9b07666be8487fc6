"""The pre-image objective and its gradient, from one pass over the points of the expansion.

A pre-image of a target ``Psi = sum_i gamma_i Phi(x_i)`` (`kpca.model.Target`)
is a point z of R^n minimising

    rho(z) = ||Psi - Phi(z)||^2 = gamma^T K gamma - 2 gamma . k(z, X) + k(z, z)

(seed 002 §4.2; Mika et al. 1999, seed 000 ref. [11]). With the kernel
profile ``f`` of `kpca.kernels` (radial ``k = f(||z - x||^2)``, dot product
``k = f(<z, x>)``), ``grad_z k = 2 f' (z - x)`` or ``f' x``, and
``grad_z k(z, z) = 2 f'(||z||^2) z`` for dot-product kernels (0 for radial
ones). With ``u = sum_i gamma_i f'_i`` and ``v = sum_i gamma_i f'_i x_i`` the
gradient of rho is ``-4 (z u - v)`` (radial) or ``-2 v + 2 f'(||z||^2) z``
(dot product). Setting the radial gradient to zero gives the fixed-point
iteration ``z <- v / u`` (`kpca.preimage.fixed_point`).
"""

from __future__ import annotations

import numpy as np

from kpca.kernels import KernelSpec, kernel_and_slope, squared_norms
from kpca.rows import KernelRows


def self_kernel(spec: KernelSpec, Z: np.ndarray):
    """``k(z, z)`` (b,) and its gradient (b, n). Cost O(b n)."""
    if spec.kernel.radial:
        return np.ones(Z.shape[0]), np.zeros_like(Z)
    t = squared_norms(Z)
    k, fp = spec.kernel.profile(spec, t)
    return k, 2.0 * fp[:, None] * Z


def kernel_moments(rows: KernelRows, Z: np.ndarray, G: np.ndarray):
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
        k, fp = kernel_and_slope(spec, Z @ Y.T, zn, squared_norms(Y))
        s0 += np.einsum("ij,ij->i", Gc, k)
        w = np.multiply(Gc, fp, out=fp)
        u += w.sum(axis=1)
        a += np.abs(w).sum(axis=1)
        v += w @ Y
    return s0, u, v, a


def rho_and_gradient(rows: KernelRows, Z: np.ndarray, G: np.ndarray, norm2: np.ndarray):
    """``rho(z)`` (b,) and its gradient (b, n) for targets (G = gamma, norm2 = ||Psi||^2). One pass."""
    return rho_gradient_and_slopes(rows, Z, G, norm2)[:2]


def rho_gradient_and_slopes(rows: KernelRows, Z: np.ndarray, G: np.ndarray, norm2: np.ndarray):
    """`rho_and_gradient` and the same pass's ``u = sum_i gamma_i f'_i`` (b,), whose inverse is the
    fixed-point step's length (`kpca.preimage.gradient.batched_descent`). One pass."""
    spec = rows.kernel
    Z = np.ascontiguousarray(Z, dtype=np.float64)
    s0, u, v, _ = kernel_moments(rows, Z, G)
    kzz, grad_kzz = self_kernel(spec, Z)
    rho = norm2 - 2.0 * s0 + kzz
    if spec.kernel.radial:
        grad = -4.0 * (Z * u[:, None] - v)
    else:
        grad = -2.0 * v + grad_kzz
    return rho, grad, u
