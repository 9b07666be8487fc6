"""The ``lanczos`` solver: the leading eigenpairs of K' without storing it, one pass over the data per iteration.

What it computes. The r leading eigenpairs ``K' v_i = lambda_i v_i`` of the
centred kernel matrix, to a residual tolerance, served like the exact
solver's (`kpca.solvers._exact.exact_components`): ``A`` (r x l) with rows
``v_i / sqrt(lambda_i)`` (unit feature-space norm, ``A K' A^T = I``), each
eigenvector's largest-magnitude entry positive, ``eigenvalues`` descending.
It is the exact reference where a dense eigendecomposition is impossible
(l = 20,000 to 100,000 and more).

The block product. K' is reached only through ``K' V`` for a block V
(l x k): since K' is symmetric, ``(K' V)^T = sum_p V[p, :]^T K'[p, :]`` over
row blocks p, and `kpca.rows.KernelRows.left_product` adds each term tile by
tile as the kernel is evaluated, so no kernel row is ever formed
(`block_product`). One block product is one pass over the kernel rows,
``2 l^2 (n + k)`` flops plus the kernel's element-wise map, the same order as
a KHA pass, in O(k l) memory.

The eigen-iteration: LOBPCG (Knyazev 2001), a block Krylov-type method in
the Lanczos family with one block product per iteration. Each iteration
takes the Rayleigh-Ritz solution on ``span[X, W, P]``: X the current k Ritz
vectors, W their (normalised) residuals, P the previous step's direction;
only K' W needs the data (K' X and K' P follow from the same linear
combinations). ``k = r + block``: the ``block`` guard vectors speed up the
r wanted ones, whose convergence then depends on ``lambda_{k+1} /
lambda_i`` rather than ``lambda_{r+1} / lambda_i``, and need not converge
themselves. Stopping test, on the r wanted pairs only:

    ||K' v_i - lambda_i v_i|| <= tol * max(lambda_i, noise * lambda_1 / tol),

where ``noise`` (`NOISE`, by the kernel's precision) is the rounding floor
of a product relative to ``lambda_1``, with a margin over the floor seen on
digits (float64 and float32 kernel tiles): a component whose eigenvalue is
below ``noise lambda_1 / tol`` counts as converged once its residual reaches
the floor, which it cannot go below. The reported figure
(`kpca.solvers.Iteration`, metric ``residual``) is the largest left side over the right side's bracket, so the
fit stops when it is <= tol; it equals ``max_i ||K' v_i - lambda_i v_i|| /
lambda_i`` whenever every lambda_i is above the floor.

Why this loop and not a library's (bench/lanczos.py counts the passes; its
figures are in bench/results/lanczos.json and docs/choosing-a-solver.md, *The lanczos
solver*): ARPACK's Lanczos (``scipy.sparse.linalg.eigsh``) makes one
single-vector product per pass; ``scipy.sparse.linalg.lobpcg`` stops only
when all k columns, guards included, meet its tolerance; this loop, the same
method, stops on the r wanted pairs, and so needs fewer passes to the same
residual. scipy's lobpcg also has no per-iteration hook, which progress
(eigenvalue estimates, residuals) and a cancel between iterations need. The
dense algebra (Gram matrices, the small eigenproblems) is scipy's.

Robustness. New directions are normalised, orthogonalised twice against
the basis and dropped if that left less than ``DROP`` of their squared norm
(near convergence successive steps align, and K' P, carried along by the
same combinations as P, would lose its accuracy); the iteration returns
the best iterate seen, and drops P when the residual grows ``GROWTH``-fold
above it (rounding taking over at the floor).

Start (``init``): ``subset`` (the default) takes the Nystrom extension of
the leading eigenvectors of ``K'_SS`` on a random subset S of m rows:
``K'_SS`` from the m points alone (`KernelRows.square`, no pass) and
``K'[:, S] U`` by one left product over the m rows (m / l of a pass),
O(m^2 + k l) memory; at m = l it is exact already. ``random``: Gaussian
vectors. With the default guard vectors the subset start saves passes where
the data have structure its subset sees (without guards it is sometimes
worse; bench/lanczos.py compares the two starts, its own m / l of a pass
counted); on structureless data (Gaussian noise) it saves nothing and costs
m / l of a pass.

Non-positive-definite kernels (tanh) and data with fewer than r directions
in feature space: the iteration converges to the largest eigenvalues
whatever their sign; components whose eigenvalue is not above
``1e-10 lambda_1`` (`kpca.solvers._ritz.RELATIVE_RANK_TOL`) are served as
zero rows (projections 0), their eigenvalues as computed, never NaN; the
worker names them in the model's warnings.

Cost: the centring pass, then ``iterations`` block products (the start's
included; plus m / l of one for the subset start), each ``2 l^2 (n + k)``
flops plus the kernel's map; O(l k^2) per iteration for the Rayleigh-Ritz
step. Memory O(k l): about 14 l x k float64 arrays at the peak (0.5 GiB at
l = 100,000 and k = 48; a smaller ``block`` takes less), plus the row
source's cache and tiles. bench/lanczos.py times a fit against one kha-smd
pass (docs/choosing-a-solver.md).
"""

from __future__ import annotations

import numpy as np

from kpca import defaults
from kpca._dense import eigh
from kpca._threads import blas_limit
from kpca.errors import Stopped
from kpca.params import Param, ParamError
from kpca.solvers._registry import KERNEL_PRECISION, SEED, FitContext, Iteration, Solver, register
from kpca.solvers._ritz import RELATIVE_RANK_TOL, whitening
from kpca.solvers._state import ComponentsState

INITS = ("auto", "random", "subset")
GUARDS = 32  # default guard vectors (block)
INIT_ROWS = 1000  # default subset size of the start: min(l, max(INIT_ROWS, 4 k))
# Rounding floor of a block product's residual, relative to lambda_1, by the precision of the kernel rows.
NOISE = {np.dtype(np.float64): 1e-13, np.dtype(np.float32): 1e-7}
DROP = 1e-10  # a new direction is dropped if orthogonalisation left it less than this of its squared norm
GROWTH = 100.0  # the direction P is dropped when the residual grows this much above the best so far

TOL = Param("tol", float, 1e-6, low=0.0, low_open=True, high=1.0,
            description="relative residual tolerance: stop when ||K' v_i - lambda_i v_i|| <= tol lambda_i for the "
                        "wanted components (or the residual reaches the rounding floor)")
MAX_ITER = Param("max_iter", int, 100, low=1, high=10_000,
                 description="most iterations (one pass over the data each); the fit ends there, converged or not")
BLOCK = Param("block", int, None, low=0, high=1024,
              description="guard vectors iterated beside the n_components wanted ones: more cost a little more per "
                          "pass and O(l) memory each, and usually save passes (default 32)")
INIT = Param("init", str, "auto", choices=INITS,
             description="start: subset (the leading eigenvectors of the kernel of init_size random rows, extended "
                         "to all rows: init_size / l of a pass; exact when it is all rows), random (Gaussian "
                         "vectors), or auto (the default): subset")
INIT_SIZE = Param("init_size", int, None, low=1,
                  description="rows in the subset of init=subset, at most the data's rows (default min(rows, "
                              "max(1000, 4 (n_components + block))))")


def block_product(rows, V: np.ndarray, block_rows: int | None = None) -> np.ndarray:
    """``K' V`` (l, k) for V (l, k), one pass over the kernel rows without forming them.

    ``(K' V)^T = sum_p V[p, :]^T K'[p, :]`` over blocks p of ``block_rows``
    rows (`kpca.rows.KernelRows.left_product`; K' is symmetric). Cost
    ``2 l^2 (n + k)`` flops; memory O(k l) besides the tiles.
    """
    l, k = V.shape
    b = block_rows or defaults.default_block_size(l)
    VT = np.ascontiguousarray(V.T)
    out = np.zeros((k, l))
    for a in range(0, l, b):
        rows.left_product(np.arange(a, min(a + b, l)), VT[:, a : a + b], out)
    return np.ascontiguousarray(out.T)


def _directions(V: np.ndarray, bases: list, images: list | None = None, AV: np.ndarray | None = None):
    """New orthonormal directions from the columns of V: each normalised, then made orthogonal to the
    orthonormal ``bases`` (classical Gram-Schmidt, twice), then whitened, keeping only directions that
    retained more than ``DROP`` of their squared norm. With ``images`` (the bases' K' products) and AV
    (K' V), the same combinations give the directions' images. Returns ``(Q, AQ)`` (AQ None without
    AV), with 0 to d columns. O(l d (d + sum of the bases' widths))."""
    if V.shape[1] == 0:
        return V, AV
    scale = np.linalg.norm(V, axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    V = V / scale
    AV = None if AV is None else AV / scale
    for _ in range(2):
        for i, Q in enumerate(bases):
            c = Q.T @ V
            V = V - Q @ c
            if AV is not None:
                if images is None:
                    raise ValueError("images: the bases' K' products are needed to carry AV")
                AV = AV - images[i] @ c
    G = V.T @ V
    w, U = eigh(0.5 * (G + G.T))
    keep = w > DROP
    T = U[:, keep] / np.sqrt(w[keep])
    return V @ T, None if AV is None else AV @ T


def _rayleigh_ritz(blocks: list, images: list, k: int):
    """The k leading Ritz pairs of K' on span(blocks): ``(lam, X, AX, C)`` with ``X = S C``,
    ``AX = (K' S) C``, S the blocks side by side, ``C^T S^T S C = I``; dependent directions of S
    are dropped (`whitening`). Cost O(l d^2) for d columns in all."""
    G = np.block([[Bi.T @ Bj for Bj in blocks] for Bi in blocks])
    H = np.block([[Bi.T @ Aj for Aj in images] for Bi in blocks])
    T = whitening(G)
    M = T.T @ (0.5 * (H + H.T)) @ T
    q = min(k, M.shape[0])
    lam, beta = eigh(M, subset_by_index=[M.shape[0] - q, M.shape[0] - 1])
    C = T @ beta[:, ::-1]
    return lam[::-1].copy(), _combine(blocks, C), _combine(images, C), C


def _combine(blocks: list, C: np.ndarray) -> np.ndarray:
    """``[B_1 B_2 ...] C`` without stacking the blocks."""
    out, at = None, 0
    for B in blocks:
        term = B @ C[at : at + B.shape[1]]
        out = term if out is None else out + term
        at += B.shape[1]
    if out is None:
        raise ValueError("blocks: nothing to combine")
    return out


def lobpcg(product, X0: np.ndarray, n_wanted: int, tol: float, max_iter: int, noise: float = 1e-13,
           on_iteration=None):
    """The leading eigenpairs of a symmetric operator by LOBPCG, stopping on the first ``n_wanted``.

    Parameters
    ----------
    product : callable
        ``product(V) -> K' V`` for V of shape (l, d); called once for the
        start and once per iteration.
    X0 : ndarray of shape (l, k)
        Start, k >= n_wanted (the rest are guard vectors).
    tol, noise : float
        The stopping test of the module docstring.
    max_iter : int
        Most iterations: products, the start's included.
    on_iteration : callable, optional
        ``on_iteration(iteration, eigenvalues, residual) -> bool`` after each
        iteration (1 after the start's product), with the wanted eigenvalue
        estimates and the figure of the module docstring; True raises
        `kpca.errors.Stopped`.

    Returns
    -------
    eigenvalues : ndarray of shape (n_wanted,), descending
    vectors : ndarray of shape (l, n_wanted), orthonormal Ritz vectors
    images : ndarray of shape (l, n_wanted)
        ``product(vectors)`` as computed in the iteration (no extra product).
    iterations : int
        Products taken.
    residual : float
        The figure at the end (<= tol when converged).
    """
    k = X0.shape[1]
    X, _ = _directions(X0, [])
    if X.shape[1] < k:  # a start of lower rank: fill it up at random
        extra, _ = _directions(np.random.default_rng(k).normal(size=(X.shape[0], k - X.shape[1])), [X])
        X = np.hstack([X, extra])
    lam, X, AX, _ = _rayleigh_ritz([X], [product(X)], k)
    P = AP = None
    iteration, best = 1, None
    while True:
        R = AX - X * lam
        norms = np.linalg.norm(R, axis=0)
        scale = float(np.max(np.abs(lam)))  # lambda_1, unless an indefinite K' starts with Ritz values <= 0
        floor = noise * scale
        bracket = np.maximum(lam[:n_wanted], floor / tol)  # > 0 where scale > 0
        residual = float(np.max(norms[:n_wanted] / bracket)) if scale > 0 else 0.0
        if on_iteration is not None and on_iteration(iteration, lam[:n_wanted].copy(), residual):
            raise Stopped(f"stopped after {iteration} iterations")
        if best is None or residual <= best[0]:
            best = (residual, lam[:n_wanted], X[:, :n_wanted], AX[:, :n_wanted])
        elif residual > GROWTH * best[0]:  # rounding took over the direction P: restart without it
            P = AP = None
        if residual <= tol or iteration >= max_iter:
            break
        converged = np.zeros(k, dtype=bool)
        converged[:n_wanted] = norms[:n_wanted] <= tol * bracket[:n_wanted]
        W, _ = _directions(R[:, ~converged & (norms > floor)], [X])
        if W.shape[1] == 0:  # no new direction: the iteration stagnates at the floor
            break
        AW = product(W)
        iteration += 1
        blocks, images = [X, W], [AX, AW]
        if P is not None:
            P, AP = _directions(P, [X, W], [AX, AW], AP)
            if P.shape[1]:
                blocks.append(P)
                images.append(AP)
        lam, X_new, AX_new, C = _rayleigh_ritz(blocks, images, k)
        # the next direction: the part of the step outside the old X
        P, AP = _combine(blocks[1:], C[k:]), _combine(images[1:], C[k:])
        X, AX = X_new, AX_new
    residual, lam, X, AX = best
    return lam, X, AX, iteration, residual


def _start(rows, k: int, params: dict) -> np.ndarray:
    """The start X0 (l, k): the Nystrom extension of a random subset's leading eigenvectors
    (``init="subset"``), filled up with Gaussian columns, or Gaussian columns alone."""
    l = rows.n_rows
    rng = np.random.default_rng([params["seed"], 2**31 + 3])
    X0 = rng.normal(size=(l, k))
    if params["init"] != "subset":
        return X0
    m = int(params["init_size"])
    S = np.sort(rng.choice(l, size=m, replace=False))
    K_SS = np.asarray(rows.square(S), dtype=np.float64)
    d, U = eigh(0.5 * (K_SS + K_SS.T), subset_by_index=[m - min(k, m), m - 1])
    keep = d > RELATIVE_RANK_TOL * max(float(d[-1]), 0.0)
    U = U[:, keep][:, ::-1]
    if U.shape[1]:
        out = np.zeros((U.shape[1], l))
        rows.left_product(S, np.ascontiguousarray(U.T), out)  # (K'[:, S] U)^T, m / l of a pass
        X0[:, : U.shape[1]] = out.T
    return X0


def components(eigenvalues: np.ndarray, V: np.ndarray, KV: np.ndarray | None = None):
    """``A`` (r, l): rows ``v_i / sqrt(lambda_i)``, each v_i's largest-magnitude entry made positive;
    zero rows where lambda_i is not above ``RELATIVE_RANK_TOL lambda_1`` (as `exact_components`
    does for lambda_i <= 0). With ``KV`` (K' V as the iteration computed it) also ``A K'`` (r, l),
    the same scaling of KV: the training rows' projections as served, which differ from
    ``diag(lambda) A`` by the Ritz residual. O(r l)."""
    r = V.shape[1]
    signs = np.sign(V[np.abs(V).argmax(axis=0), np.arange(r)])
    signs = np.where(signs == 0, 1.0, signs)
    kept = eigenvalues > RELATIVE_RANK_TOL * max(float(eigenvalues[0]), 0.0)
    scale = signs * np.where(kept, 1.0 / np.sqrt(np.where(kept, eigenvalues, 1.0)), 0.0)
    A = np.ascontiguousarray((V * scale).T)
    return A if KV is None else (A, np.ascontiguousarray((KV * scale).T))


def _fit(rows, n_components: int, params: dict, context: FitContext, report=None) -> ComponentsState:
    """The centring pass, the start, then LOBPCG iterations of one block product each (module docstring)."""
    centering = rows.fit_centering().require_variance()
    r = int(n_components)
    k = min(r + int(params["block"]), rows.n_rows)
    noise = NOISE.get(np.dtype(rows.dtype), NOISE[np.dtype(np.float32)])

    def on_iteration(iteration, eigenvalues, residual):
        if report is None:
            return False
        return bool(report(Iteration(iteration, params["max_iter"], eigenvalues, "residual", residual)))

    # the tiles run in numba's threads, each with one BLAS thread (as kpca.driver.run_passes does)
    with blas_limit(1):
        X0 = _start(rows, k, params)
        eigenvalues, V, KV, iterations, residual = lobpcg(lambda V: block_product(rows, V), X0, r, params["tol"],
                                                          params["max_iter"], noise, on_iteration)
    A, AK = components(eigenvalues, V, KV)
    return ComponentsState(solver="lanczos", A=A, AK=AK, eigenvalues=eigenvalues, n_rows=rows.n_rows,
                           iterations=iterations, residual=residual, converged=bool(residual <= params["tol"]),
                           centering=centering.to_state())


def _resolve(params: dict, context: FitContext) -> dict:
    """``block``, ``init`` and ``init_size`` from the data's size; `ParamError` on an ``init_size``
    above the rows. O(1)."""
    out = dict(params)
    r, l = context.n_components, context.n_rows
    if out["block"] is None:
        out["block"] = GUARDS
    k = min(r + out["block"], l)
    if out["init"] == "auto":
        out["init"] = "subset"
    if out["init_size"] is not None and out["init_size"] > l:
        raise ParamError("init_size", f"must be at most the number of rows l = {l}, got {out['init_size']}")
    if out["init"] == "subset" and out["init_size"] is None:
        out["init_size"] = min(l, max(INIT_ROWS, 4 * k))
    return out


register(Solver(
    "lanczos",
    "exact leading eigenpairs of the centred kernel matrix without storing it (LOBPCG, one pass over the data "
    "per iteration, O(k l) memory): the exact reference for data sets too large for the exact solver",
    params=(TOL, MAX_ITER, SEED, BLOCK, INIT, INIT_SIZE, KERNEL_PRECISION), clusterable=True, fit=_fit,
    resolve=_resolve))
