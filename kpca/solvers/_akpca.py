"""Autoencoder kernel PCA, ``akpca`` (seed 003 §4): encoder ``y_j = x^T A_j x``, decoder
``g(y) = max(sqrt(lambda_1), 0) v_1`` of ``sum_j y_j B_j``, trained by stochastic subgradient descent
on the spectral-norm surrogate (eq. 17-20).

For a row x (divided by the data's scale, `kpca.solvers._autoencoder`)::

    y_j = x^T A_j x,   M = sum_j y_j B_j - x x^T,   f = ||M||_2 = |lambda|, (lambda, v) the eigenpair
    of M of largest magnitude (Lanczos, `kpca.solvers._leading_pair`), s = sign(lambda);
    df/dA_j = s (v^T B_j v) x x^T    (eq. 19),     df/dB_j = s y_j v v^T    (eq. 20);
    A_j -= eta df/dA_j,  B_j -= eta df/dB_j,  eta = gain f / ||g||^2,
    ||g||^2 = ||x||^4 sum_j (v^T B_j v)^2 + sum_j y_j^2.

One step per row, in the driver's blocks (`kpca.driver.run_passes`); per row O(k d^2) to form
``y`` and ``M``, the Lanczos products O(d^2) each, and O(k d^2) for the updates. Memory: two
k x d x d arrays, so d is limited (`MAX_ENTRIES`); DS-AKPCA (`kpca.solvers._ds_akpca`) is the
variant for large d.

State (a `kpca.solvers._state.AutoencoderState`; resuming from it is bit-exact):

================  ==========================================================================
field             value
================  ==========================================================================
encoder           (k, d, d) the symmetric matrices A_j
decoder           (k, d, d) the symmetric matrices B_j
scale, mean       the data's root mean squared norm; the rows' mean divided by it (d,)
start_vector      (d,) a fixed random unit vector of the seed, mixed into each Lanczos start
eta0, gain        the step size fraction and this pass's gain (1,) (`_autoencoder.STEP_RULE`)
lanczos_*         the Lanczos tolerance and iteration cap
surrogate_sum     sum of the surrogate f over the rows of the current pass so far
norm_limit        the divergence guard's bound on the parameter norm
t, pass, position steps, passes, rows of the pass done (the driver's); seed; n_rows; centring
================  ==========================================================================

The start (``seed``): each ``A_j`` and ``B_j`` the symmetric part of a Gaussian matrix, scaled to
Frobenius norm `kpca.solvers._autoencoder.init_norm`.
"""

from __future__ import annotations

import numba
import numpy as np

from kpca.params import ParamError
from kpca.solvers._autoencoder import (
    OWN_PARAMS,
    AutoencoderModel,
    audit,
    begin_pass,
    check_kernel,
    common_state,
    damped,
    data_statistics,
    diverged,
    gains,
    init_norm,
    lanczos_start,
    training_block,
    used,
)
from kpca.solvers._leading_pair import _lanczos
from kpca.solvers._registry import BLOCK_SIZE, PASSES, SEED, TOL, Solver, register
from kpca.solvers._state import AutoencoderState

NAME = "akpca"
MAX_ENTRIES = 2**25  # most entries k d^2 of each of A and B (256 MiB each in float64)
INIT_SCALE = 0.6  # the start's norms, `kpca.solvers._autoencoder.init_norm`


def start(rows, n_components: int, params: dict) -> AutoencoderState:
    """The random start (module docstring) after checking the kernel and the size k d^2.

    `kpca.params.ParamError` on ``kernel`` for any kernel but ``<x, y>^2``, on ``n_components``
    when ``k d^2`` exceeds `MAX_ENTRIES`. Cost: one pass over the data (its scale), O(k d^2).
    """
    check_kernel(rows.kernel)
    k, d = int(n_components), int(rows.n_features)
    if k * d * d > MAX_ENTRIES:
        raise ParamError("n_components", f"akpca keeps 2 k d^2 numbers; k = {k} with d = {d} features exceeds "
                                         f"{MAX_ENTRIES} per matrix: ask for fewer components or use ds-akpca")
    scale, mean = data_statistics(rows)
    rng = np.random.default_rng([int(params["seed"]), 2**31 + 4])
    rho = init_norm(d, k, INIT_SCALE)
    start = []
    for _ in ("encoder", "decoder"):
        G = rng.normal(size=(k, d, d))
        G = G + G.transpose(0, 2, 1)
        start.append(G * (rho / np.sqrt(np.einsum("jrs,jrs->j", G, G)))[:, None, None])
    encoder, decoder = start
    return common_state(NAME, rows, params, scale, mean, encoder, decoder)


def step(state: AutoencoderState, rows, indices: np.ndarray) -> AutoencoderState:
    """One subgradient step per row ``indices`` of the data, in order; pure (new arrays). O(b k d^2)."""
    X = training_block(rows, indices, state.scale)
    A, B = state.encoder.copy(), state.decoder.copy()
    f = _train_rows(A, B, X, float(state.gain[0]), state.start_vector, float(state.lanczos_tol),
                    int(state.lanczos_max_iter))
    b = len(indices)
    return state.replace(encoder=A, decoder=B, t=state.t + b, position=state.position + b,
                         surrogate_sum=float(state.surrogate_sum) + float(f.sum()))


def model(state: AutoencoderState, rows=None, kernel=None) -> AutoencoderModel:
    """The served model: `encode` ``y_j = x^T A_j x``, `decode` ``g(y)`` (`AutoencoderModel`). O(k d^2) per row."""
    A, B = np.ascontiguousarray(state.encoder), np.ascontiguousarray(state.decoder)
    mean, start_vector = np.asarray(state.mean, dtype=np.float64), state.start_vector
    tol, max_iter = float(state.lanczos_tol), int(state.lanczos_max_iter)
    return AutoencoderModel(NAME, encode=lambda Xs: _codes(A, np.ascontiguousarray(Xs)),
                            decode=lambda Y: _decode(B, np.ascontiguousarray(Y, dtype=np.float64), mean,
                                                     start_vector, tol, max_iter),
                            scale=float(state.scale), n_components=A.shape[0], n_features=A.shape[1])


def encode(state: AutoencoderState, Xs: np.ndarray) -> np.ndarray:
    """Codes ``y_j = x^T A_j x`` (m, k) of rows Xs already divided by the state's scale."""
    return _codes(np.ascontiguousarray(state.encoder), np.ascontiguousarray(Xs, dtype=np.float64))


@numba.njit(nogil=True, cache=True)
def _codes(A, X):
    """``Y[i, j] = X[i]^T A[j] X[i]``, shape (m, k)."""
    Y = np.empty((X.shape[0], A.shape[0]))
    for i in range(X.shape[0]):
        x = X[i]
        for j in range(A.shape[0]):
            Y[i, j] = x @ (A[j] @ x)
    return Y


@numba.njit(nogil=True, cache=True)
def _train_rows(A, B, X, gain, start_vector, tol, max_iter):
    """Eq. 17-20, one row of X after the other, updating A and B in place; returns the surrogate f of
    each row (before its step)."""
    k, d = A.shape[0], A.shape[1]
    no_U, no_c = np.empty((0, d)), np.empty(0)
    surrogate = np.empty(X.shape[0])
    y, c = np.empty(k), np.empty(k)
    for i in range(X.shape[0]):
        x = np.ascontiguousarray(X[i])
        D = np.zeros((d, d))
        for j in range(k):
            y[j] = x @ (A[j] @ x)
            D += y[j] * B[j]
        value, v, _ = _lanczos(D, no_U, no_c, x, lanczos_start(x, start_vector), True, tol, max_iter)
        surrogate[i] = abs(value)
        for j in range(k):
            c[j] = v @ (B[j] @ v)
        xx = x @ x
        g2 = xx * xx * (c @ c) + y @ y
        if value == 0.0 or not g2 > 0.0:
            continue
        move = gain * value / g2  # sign(lambda) * eta
        for j in range(k):
            a, b = move * c[j], move * y[j]
            for r in range(d):
                for s in range(d):
                    A[j, r, s] -= a * x[r] * x[s]
                    B[j, r, s] -= b * v[r] * v[s]
    return surrogate


@numba.njit(nogil=True, cache=True)
def _decode(B, Y, mean, start_vector, tol, max_iter):
    """``g(y) = max(sqrt(lambda_1), 0) v_1`` of ``sum_j y_j B_j`` for the rows of Y, sign by ``v_1 . mean >= 0``."""
    k, d = B.shape[0], B.shape[1]
    no_U, no_c, no_x = np.empty((0, d)), np.empty(0), np.empty(0)
    out = np.zeros((Y.shape[0], d))
    start = lanczos_start(mean, start_vector)
    for i in range(Y.shape[0]):
        D = np.zeros((d, d))
        for j in range(k):
            D += Y[i, j] * B[j]
        value, v, _ = _lanczos(D, no_U, no_c, no_x, start, False, tol, max_iter)
        if value > 0.0:
            out[i] = np.sqrt(value) * (-v if v @ mean < 0.0 else v)
    return out


register(Solver(
    NAME, "autoencoder KPCA: a degree-2 polynomial encoder x^T A_j x and the decoder "
          "max(sqrt(lambda_1), 0) v_1 of sum_j y_j B_j, trained on the spectral-norm surrogate by stochastic "
          "subgradient descent; reconstructs x itself, not phi(x). Kernel {type: polynomial, degree: 2, offset: 0, "
          "gamma: 1} only; keeps 2 k d^2 numbers",
    params=(PASSES, SEED, BLOCK_SIZE, TOL, *OWN_PARAMS), start=start, step=step, begin_pass=begin_pass,
    diverged=diverged, damped=damped, model=model, used=used, gains=gains, audit=audit,
    state_type=AutoencoderState))
