"""Data-span autoencoder kernel PCA, ``ds-akpca`` (seed 003 §5): AKPCA with the rows of A and B in the
span of the training points in feature space, ``A = H Phi``, ``B = G Phi`` (eq. 21-22), H and G k x l.

For a row x (divided by the data's scale, `kpca.solvers._autoencoder`), with the training points
``x_1..x_l`` (the rows of P, scaled alike)::

    k_i = (x . x_i)^2,   y = H k  (the encoder),   z = G^T y,
    M = sum_i z_i x_i x_i^T - x x^T      (eq. 23; never formed:
    M w = P^T (z * (P w)) - x (x . w), O(l d) per product, §5.3),
    f = ||M||_2 = |lambda|, (lambda, v) of largest magnitude by Lanczos (`kpca.solvers._leading_pair`),
    s = sign(lambda),  q = df/dz / s = (P v)^2   (eq. 24),
    df/dG = s (H k) q^T   (eq. 25),      df/dH = s (G q) k^T   (eq. 26),
    H -= eta df/dH,  G -= eta df/dG,  eta = gain f / ||g||^2,
    ||g||^2 = ||H k||^2 ||q||^2 + ||G q||^2 ||k||^2.

The decoder ``g(y)`` is the leading (largest algebraic) eigenpair of ``sum_i z_i x_i x_i^T`` with
``z = G^T y``, by Lanczos over the same products. Per row: O(l d) per Lanczos product (about 10 to
40 of them), O(k l) for the updates; a pass is O(l^2 d) times the Lanczos iterations, so the data set
is limited to the service's dense limit (``exact_limit``, 3000 rows by default; checked at creation).
The state keeps the training points (l x d) so that a model is served from its checkpoint alone.

State: as AKPCA's (`kpca.solvers._akpca`), with ``encoder`` H (k, l), ``decoder`` G (k, l) and
``points`` (l, d), the training rows divided by ``scale``. A fit continued on appended rows
(``dataset_version``) trains on every row but keeps its expansion over the first l rows.

The start (``seed``): H and G Gaussian on ``min(l, max(64, 4 k))`` random columns and zero elsewhere
(a sparse start, as KHA's), each row scaled so that ``||A_j||_F = ||B_j||_F`` =
`kpca.solvers._autoencoder.init_norm` (``||A_j||_F^2 = h_j^T K h_j``, K the kernel matrix of the points).
"""

from __future__ import annotations

from functools import partial

import numba
import numpy as np

from kpca.solvers._autoencoder import (
    OWN_PARAMS,
    AutoencoderModel,
    audit,
    begin_pass,
    check_kernel,
    check_rows_limit,
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

NAME = "ds-akpca"
_START_COLUMNS = 64
INIT_SCALE = 0.2  # the start's norms, `kpca.solvers._autoencoder.init_norm`
_BLOCK_ENTRIES = 2**22  # entries of one (rows x l) working array of the encoder


def resolve(params: dict, context) -> dict:
    """The parameters as given (their defaults need no data); `kpca.params.ParamError` on ``solver``
    when the data set has more than ``context.exact_limit`` rows."""
    check_rows_limit(NAME, context, context.exact_limit)
    return params


def start(rows, n_components: int, params: dict) -> AutoencoderState:
    """The sparse random start (module docstring). `kpca.params.ParamError` on ``kernel`` for any kernel
    but ``<x, y>^2``. Cost: one pass over the data (its scale and the points), O(s^2 d + k s)."""
    check_kernel(rows.kernel)
    k, l = int(n_components), int(rows.n_rows)
    scale, mean = data_statistics(rows)
    points = np.ascontiguousarray(np.concatenate([np.asarray(c, dtype=np.float64) for _, c in rows.chunks()]) / scale)
    rng = np.random.default_rng([int(params["seed"]), 2**31 + 5])
    s = min(l, max(_START_COLUMNS, 4 * k))
    rho = init_norm(points.shape[1], k, INIT_SCALE)
    start = []
    for _ in ("encoder", "decoder"):
        cols = np.sort(rng.choice(l, size=s, replace=False))
        K = (points[cols] @ points[cols].T) ** 2
        C = rng.normal(size=(k, s))
        norms = np.sqrt(np.maximum(np.einsum("js,st,jt->j", C, K, C), 1e-300))
        start.append(np.zeros((k, l)))
        start[-1][:, cols] = C * (rho / norms)[:, None]
    encoder, decoder = start
    return common_state(NAME, rows, params, scale, mean, encoder, decoder, points=points)


def step(state: AutoencoderState, rows, indices: np.ndarray) -> AutoencoderState:
    """One subgradient step per row ``indices`` of the data, in order; pure (new arrays).
    O(b l d) per Lanczos iteration, plus O(b k l)."""
    X = training_block(rows, indices, state.scale)
    H, G = state.encoder.copy(), state.decoder.copy()
    f = _train_rows(H, G, state.points, X, float(state.gain[0]), state.start_vector,
                    float(state.lanczos_tol), int(state.lanczos_max_iter))
    b = len(indices)
    return state.replace(encoder=H, decoder=G, t=state.t + b, position=state.position + b,
                         surrogate_sum=float(state.surrogate_sum) + float(f.sum()))


def encode(state: AutoencoderState, Xs: np.ndarray) -> np.ndarray:
    """Codes ``y = H k(x)`` (m, k) of rows Xs already divided by the state's scale; memory O(block l)."""
    H, P = np.asarray(state.encoder), np.asarray(state.points)
    Xs = np.asarray(Xs, dtype=np.float64)
    out = np.empty((Xs.shape[0], H.shape[0]))
    step = max(1, _BLOCK_ENTRIES // max(P.shape[0], 1))
    for a in range(0, Xs.shape[0], step):
        out[a : a + step] = ((Xs[a : a + step] @ P.T) ** 2) @ H.T
    return out


def model(state: AutoencoderState, rows=None, kernel=None) -> AutoencoderModel:
    """The served model from the state alone (its points): `encode`, and the decoder over the points."""
    G, P = np.ascontiguousarray(state.decoder), np.ascontiguousarray(state.points)
    mean, start_vector = np.asarray(state.mean, dtype=np.float64), state.start_vector
    tol, max_iter = float(state.lanczos_tol), int(state.lanczos_max_iter)
    return AutoencoderModel(NAME, encode=partial(encode, state),
                            decode=lambda Y: _decode(G, P, np.ascontiguousarray(Y, dtype=np.float64), mean,
                                                     start_vector, tol, max_iter),
                            scale=float(state.scale), n_components=G.shape[0], n_features=P.shape[1])


@numba.njit(nogil=True, cache=True)
def _train_rows(H, G, P, X, gain, start_vector, tol, max_iter):
    """Eq. 23-26, one row of X after the other, updating H and G in place; returns the surrogate f of
    each row (before its step)."""
    k, l = H.shape
    no_D = np.empty((0, 0))
    surrogate = np.empty(X.shape[0])
    for i in range(X.shape[0]):
        x = np.ascontiguousarray(X[i])
        kx = P @ x
        kx *= kx
        Hk = H @ kx
        z = G.T @ Hk
        value, v, _ = _lanczos(no_D, P, z, x, lanczos_start(x, start_vector), True, tol, max_iter)
        surrogate[i] = abs(value)
        q = P @ v
        q *= q
        Gq = G @ q
        g2 = (Hk @ Hk) * (q @ q) + (Gq @ Gq) * (kx @ kx)
        if value == 0.0 or not g2 > 0.0:
            continue
        move = gain * value / g2  # sign(lambda) * eta
        for j in range(k):
            a, b = move * Hk[j], move * Gq[j]
            for col in range(l):
                G[j, col] -= a * q[col]
                H[j, col] -= b * kx[col]
    return surrogate


@numba.njit(nogil=True, cache=True)
def _decode(G, P, Y, mean, start_vector, tol, max_iter):
    """``g(y) = max(sqrt(lambda_1), 0) v_1`` of ``P^T diag(G^T y) P`` for the rows of Y, sign by
    ``v_1 . mean >= 0``."""
    d = P.shape[1]
    no_D, no_x = np.empty((0, 0)), np.empty(0)
    out = np.zeros((Y.shape[0], d))
    start = lanczos_start(mean, start_vector)
    for i in range(Y.shape[0]):
        z = G.T @ np.ascontiguousarray(Y[i])
        value, v, _ = _lanczos(no_D, P, z, no_x, start, False, tol, max_iter)
        if value > 0.0:
            out[i] = np.sqrt(value) * (-v if v @ mean < 0.0 else v)
    return out


register(Solver(
    NAME, "data-span autoencoder KPCA: AKPCA with A = H Phi and B = G Phi over the training "
          "points, O(k l) memory and Lanczos products O(l d) per step: for many features and few rows "
          "(limited to exact_limit rows). Kernel {type: polynomial, degree: 2, offset: 0, gamma: 1} only",
    params=(PASSES, SEED, BLOCK_SIZE, TOL, *OWN_PARAMS), start=start, step=step, begin_pass=begin_pass,
    diverged=diverged, damped=damped, resolve=resolve, model=model, used=used, gains=gains, audit=audit,
    state_type=AutoencoderState))
