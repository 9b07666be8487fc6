"""What AKPCA and DS-AKPCA (seed 003 §4-5, `kpca.solvers._akpca`, `kpca.solvers._ds_akpca`) share: the
kernel they are defined for, the data's scale, the step size rule, the divergence guard and the model
they serve.

Notation (seed 003). Training rows ``x_1..x_l`` in R^d, ``k`` components, the degree-2 feature map
``phi(x) = x x^T`` (kernel ``<x, y>^2``), ``M(.)`` a d^2-vector read as a d x d matrix. An encoder
``f(x) = A phi(x)`` (``y_j = x^T A_j x``) and the decoder ``g(y) = max(sqrt(lambda_1), 0) v_1`` of the
leading eigenpair of ``M(B^T y)``; training minimises the surrogate (eq. 17-18)
``sum_i ||M(B^T A phi(x_i)) - x_i x_i^T||_2`` (spectral norm) by stochastic subgradient descent.

Choices where the paper is silent (each documented where it is made):

* **No centring** (as the paper's §4): the decoder rebuilds ``x`` from an estimate of ``x x^T``, and
  centring either ``phi`` (removing the mean of ``x x^T``) or ``x`` (whose sign ``x x^T`` cannot tell)
  would lose what it needs. The worker's centring pass is not used.
* **Scale.** The data are divided by ``scale = sqrt(mean_i ||x_i||^2)`` (one pass at the start, kept in
  the state) and the model multiplies its reconstructions by it again: a data set multiplied by c > 0
  gives the same iterates, components of the scaled data and reconstructions c times the original's.
  (The paper divides by the largest norm instead, which one outlier can set.)
* **Sign, per row.** The encoder is even, ``f(-x) = f(x)`` (``y_j = x^T A_j x``), so no decoder of the
  codes alone can tell x from -x, and the paper's ``g(y) = max(sqrt(lambda_1), 0) v_1`` leaves the sign
  of ``v_1`` open (its MNIST pixels are non-negative, where any sensible rule picks the positive one).
  A model's reconstruction of a row x (`AutoencoderModel.reconstruct`: the ``/reconstruct`` and
  ``/denoise`` routes, the estimator's model, the convergence figure) takes the sign from x itself:
  ``x_hat = s g(f(x))`` with ``s = sign(g(f(x)) . x)`` (+1 at 0), the better of the two candidates
  ``+-g(f(x))`` for eq. 15's error ``||x - x_hat||^2``. The code of a row is thus its k numbers and
  one sign bit. Decoding codes alone (`AutoencoderModel.decode`, ``inverse_transform``) has no row to
  read the bit from and keeps the rule ``v_1 . mean >= 0``, ``mean`` the training rows' mean: right
  for data with a dominant mean (pixels), a coin toss per row for data centred at 0.
* **Spectral norm of a symmetric M** is ``|lambda|`` of its eigenvalue of largest magnitude, with
  subgradient ``sign(lambda) v v^T`` (the paper's ``u v^T``, eq. 19-20 and 24, with ``u = sign(lambda)
  v``; at the start ``M ~ -x x^T``, so the sign matters). The encoder and decoder matrices start
  symmetric and the subgradients are symmetric, so they stay symmetric.
* **Step size** (`STEP_RULE`): the stochastic Polyak step ``eta = gain * f_i / ||g_i||^2`` with
  ``f_i`` the row's surrogate, ``g_i`` its subgradient and ``gain = eta0 / sqrt(1 + pass)``. It is
  dimensionless: invariant to the data's scale and to the units of the parameters, so one default
  transfers across data sets, dimensions and k (the paper tuned a step by hand per data set and found
  the method "highly sensitive to the initial step size"). ``eta0`` = `DEFAULT_ETA0`.
* **Divergence guard** as the KHA family's: a parameter norm above `NORM_LIMIT` times the start's, or
  not finite, restarts the pass with ``eta0`` 4x smaller (at most 8 times).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np

from kpca.errors import Degenerate, Diverged
from kpca.params import Param, ParamError, check_points
from kpca.solvers._leading_pair import MAX_ITER, TOL
from kpca.solvers._state import AutoencoderState

KERNEL = {"type": "polynomial", "degree": 2, "offset": 0.0, "gamma": 1.0}
DEFAULT_ETA0 = 1.0
STEP_RULE = "eta = gain f_i / ||g_i||^2 (stochastic Polyak step), gain = eta0 / sqrt(1 + pass)"
NORM_LIMIT = 1e4
MAX_GAIN_REDUCTIONS = 8
GAIN_REDUCTION = 0.25
FIGURE = "relative_reconstruction_error"

ETA0 = Param("eta0", float, DEFAULT_ETA0, low=0.0, low_open=True, high=10.0,
             description="AKPCA: the fraction of the stochastic Polyak step taken (eta = eta0 / sqrt(1 + pass) "
                         "* f_i / ||g_i||^2, dimensionless, so the default transfers across data sets)")
LANCZOS_TOL = Param("lanczos_tol", float, TOL, low=0.0, low_open=True, high=0.1,
                    description="AKPCA: Lanczos stops once the leading eigenpair's residual is below this, "
                                "relative to the spectral norm")
LANCZOS_MAX_ITER = Param("lanczos_max_iter", int, MAX_ITER, low=2, high=1000,
                         description="AKPCA: most Lanczos vectors per eigenpair (at most d are used)")
OWN_PARAMS = (ETA0, LANCZOS_TOL, LANCZOS_MAX_ITER)


def check_kernel(kernel) -> None:
    """`ParamError` on ``kernel`` unless it is the degree-2 polynomial kernel ``<x, y>^2`` (a
    `kpca.kernels.KernelSpec` or its dict) that AKPCA is defined for."""
    spec = kernel.to_dict() if hasattr(kernel, "to_dict") else dict(kernel)
    if spec != KERNEL:
        raise ParamError("kernel", f"autoencoder KPCA is defined for the degree-2 polynomial kernel <x, y>^2 "
                                   f"only (seed 003 §4): use {KERNEL}, got {spec}")


def data_statistics(rows) -> tuple[float, np.ndarray]:
    """``(scale, mean / scale)`` of the training rows: ``scale = sqrt(mean_i ||x_i||^2)``. One pass over
    the chunks, O(l d). `Degenerate` if every row is 0."""
    total, sums, count = 0.0, np.zeros(rows.n_features), 0
    for _, chunk in rows.chunks():
        chunk = np.asarray(chunk, dtype=np.float64)
        total += float(np.einsum("ij,ij->", chunk, chunk))
        sums += chunk.sum(axis=0)
        count += chunk.shape[0]
    scale = float(np.sqrt(total / max(count, 1)))
    if not scale > 0 or not np.isfinite(scale):
        raise Degenerate("every training row is 0: autoencoder KPCA has nothing to reconstruct")
    return scale, sums / count / scale


def init_norm(d: int, k: int, factor: float) -> float:
    """Frobenius norm of each start matrix ``A_j``, ``B_j`` (data at unit mean squared norm):
    ``factor * sqrt(d / sqrt(k))``, ``factor`` the variant's ``INIT_SCALE``.

    Maintenance note: from a random start with ``||A_j||_F = rho`` the first
    Polyak steps move the parameters by about ``d / (2 rho^2 sqrt(k))`` times
    their norm (``y_j ~ rho sqrt(2) / d``); ``rho ~ sqrt(d / sqrt(k))`` keeps
    that move alike for every d and k. The factors (0.6 for AKPCA, 0.2 for
    DS-AKPCA, whose steps in the coefficients H, G are worse conditioned)
    were chosen with ``eta0`` on a grid (factors 0.1 to 1.2, eta0 0.25 to
    4) on digits (d = 16 and 64, k = 2, 8, 32, 20 passes, 500 rows for
    AKPCA and 300 for DS-AKPCA), as the factors whose relative
    reconstruction error stays near the grid's best in every case;
    DS-AKPCA is the more sensitive to its factor.
    """
    return factor * float(np.sqrt(d / np.sqrt(k)))


def unit_start_vector(seed: int, d: int) -> np.ndarray:
    """A fixed random unit vector (d,) of the seed: mixed into every Lanczos start (`lanczos_start`)."""
    r = np.random.default_rng([seed, 2**31 + 3]).normal(size=d)
    return r / np.linalg.norm(r)


@numba.njit(nogil=True, cache=True)
def lanczos_start(x, start_vector):
    """``x + ||x|| / 2 * start_vector`` (``start_vector`` alone for x = 0): near the leading eigenvector
    at the start, where ``M ~ -x x^T``, and never orthogonal to the others for a fixed random part."""
    norm = np.sqrt(x @ x)
    return x + (0.5 * norm if norm > 0 else 1.0) * start_vector


def check_rows_limit(name: str, context, limit: int | None = None) -> None:
    """`ParamError` on ``solver`` when ``context.n_rows`` exceeds ``limit`` (DS-AKPCA; None: no limit)."""
    if limit is not None and context.n_rows > limit:
        raise ParamError("solver", f"{name} keeps the training rows in memory and each of its steps runs "
                                   f"Lanczos over all of them (a pass costs O(l^2 d)), so it is limited to "
                                   f"{limit} rows (this data set has {context.n_rows}); use akpca")


def begin_pass(state: AutoencoderState) -> AutoencoderState:
    """The gain of the pass: ``eta0 / sqrt(1 + pass)`` (`STEP_RULE`), and the pass's surrogate sum reset. O(1)."""
    return state.replace(gain=np.array([state.eta0 / np.sqrt(1.0 + state.pass_)]), surrogate_sum=0.0)


def parameter_norm(encoder: np.ndarray, decoder: np.ndarray) -> float:
    """``sqrt(||encoder||_F^2 + ||decoder||_F^2)``. O(size)."""
    return float(np.sqrt(np.sum(encoder ** 2) + np.sum(decoder ** 2)))


def diverged(state: AutoencoderState) -> bool:
    """True if the parameters are not finite or their norm exceeds the state's ``norm_limit``."""
    norm = parameter_norm(state.encoder, state.decoder)
    if not np.isfinite(norm):
        return True
    if state.norm_limit is None:  # every start sets it (`start`)
        raise ValueError(f"state: a {state.solver} state keeps its norm_limit; this one lacks it")
    return bool(norm > state.norm_limit)


def damped(pass_start: AutoencoderState) -> AutoencoderState:
    """The pass's start with eta0 and the gain GAIN_REDUCTION times smaller; `Diverged` after
    MAX_GAIN_REDUCTIONS."""
    reductions = int(pass_start.gain_reductions or 0) + 1
    if reductions > MAX_GAIN_REDUCTIONS:
        raise Diverged(f"the fit diverged (parameter norms above {pass_start.norm_limit:.3g} or not finite) "
                       f"even after reducing eta0 {MAX_GAIN_REDUCTIONS} times (it is now {pass_start.eta0:.3g}); "
                       "retry with a smaller eta0")
    return pass_start.replace(gain_reductions=reductions, eta0=pass_start.eta0 * GAIN_REDUCTION,
                              gain=pass_start.gain * GAIN_REDUCTION)


def used(state: AutoencoderState) -> dict:
    """What the fit settled on besides its parameters: eta0 after any reduction by `damped`, and how
    many reductions. O(1)."""
    return {key: getattr(state, key) for key in ("eta0", "gain_reductions") if getattr(state, key) is not None}


def gains(state: AutoencoderState) -> np.ndarray:
    """The gain of the current pass, (1,) (`STEP_RULE`)."""
    return state.gain


def common_state(name: str, rows, params: dict, scale: float, mean: np.ndarray, encoder: np.ndarray,
                 decoder: np.ndarray, points: np.ndarray | None = None) -> AutoencoderState:
    """The state both variants start from (see their module docstrings): the fields they share, their
    ``encoder`` and ``decoder``, ``points`` (DS-AKPCA), and the divergence guard's bound from their norm."""
    own = getattr(rows, "centering", None)  # kept for the worker's resume, not used (no centring)
    return AutoencoderState(
        solver=name, n_rows=int(rows.n_rows), t=0, pass_=0, position=0, seed=int(params["seed"]),
        eta0=float(params["eta0"]), gain=np.array([float(params["eta0"])]),
        lanczos_tol=float(params["lanczos_tol"]), lanczos_max_iter=int(params["lanczos_max_iter"]),
        scale=float(scale), mean=np.asarray(mean, dtype=np.float64),
        start_vector=unit_start_vector(int(params["seed"]), int(rows.n_features)),
        centering={} if own is None else own.to_state(), encoder=encoder, decoder=decoder, points=points,
        surrogate_sum=0.0, norm_limit=NORM_LIMIT * parameter_norm(encoder, decoder))


def training_block(rows, indices: np.ndarray, scale: float) -> np.ndarray:
    """Rows ``indices`` of the data divided by ``scale``, float64 C-contiguous (b, d)."""
    return np.ascontiguousarray(np.asarray(rows.take(indices), dtype=np.float64) / scale)


@dataclass
class AutoencoderModel:
    """A fitted autoencoder KPCA model as it is served (`kpca.solvers.Solver.model`).

    Parameters
    ----------
    solver : str
    encode : callable
        ``encode(Xs) -> Y``: codes (m, k) of rows already divided by ``scale``.
    decode : callable
        ``decode(Y) -> Xs``: the decoder ``g`` (m, d), in the scaled units.
    scale : float
        The training data's root mean squared norm (module docstring).
    n_components, n_features : int

    `project` gives the codes ``y = f(x / scale)``; `reconstruct` gives
    ``s scale g(f(x / scale))`` with the sign s of each row taken from the
    row (module docstring, *Sign, per row*), the pre-image method
    ``decoder`` (``auto`` for these models, `kpca.preimage.reconstruct`);
    `figure` is the error of what `reconstruct` returns.
    """

    solver: str
    encode: Callable[[np.ndarray], np.ndarray]
    decode: Callable[[np.ndarray], np.ndarray]
    scale: float
    n_components: int
    n_features: int
    eigenvalues: np.ndarray | None = None

    def check_points(self, X, name: str = "X") -> np.ndarray:
        """X as a C-contiguous float64 array of shape (m, d); ValueError naming ``name`` otherwise."""
        return check_points(X, self.n_features, name)

    def project(self, X) -> np.ndarray:
        """Codes ``f(x / scale)`` of the rows of X, shape (m, k)."""
        return self.encode(self.check_points(X) / self.scale)

    def reconstruct(self, X) -> np.ndarray:
        """``s scale g(f(x / scale))`` for the rows x of X, shape (m, d), each row's sign ``s = +-1``
        making its inner product with x non-negative (module docstring, *Sign, per row*). O(m d)
        besides the encoder and decoder."""
        X = self.check_points(X)
        rebuilt = self.decode(self.project(X)) * self.scale
        rebuilt[np.einsum("ij,ij->i", rebuilt, X) < 0] *= -1.0
        return rebuilt

    def figure(self, X) -> tuple[str, float]:
        """The relative reconstruction error ``sum ||x - x_hat||^2 / sum ||x||^2`` on rows X (a
        sample of training rows), ``x_hat`` what `reconstruct` serves: seed 003 eq. 15, the objective
        the surrogate bounds."""
        X = self.check_points(X)
        denominator = float(np.sum(X * X))
        error = float(np.sum((self.reconstruct(X) - X) ** 2))
        return FIGURE, error / denominator if denominator > 0 else error


AUDIT_ROWS = 512  # training rows an autoencoder model's audit reconstructs (`audit`)


def audit(state: AutoencoderState, rows) -> list[str]:
    """What a fitted autoencoder KPCA model says of its reconstructions (`kpca.solvers.Solver.audit`),
    measured on a fixed-seed sample of `AUDIT_ROWS` training rows, relative errors ``sum ||x - x_hat||^2
    / sum ||x||^2``: where decoding the codes alone (``inverse_transform``, whose sign rule reads the
    training mean, module docstring *Sign, per row*) does worse than returning 0 (error 1), and where
    the served reconstruction (sign from the row) does no better than the rows' mean, each with the
    figures. Issue 51: on data centred at 0 the codes decoded to errors of 1.8-2.0, unsaid. Cost: the
    sample's encoding and decoding, O(s k d^2)."""
    from kpca.solvers._registry import served_model  # the registry imports this module's users

    X = np.asarray(rows.sample(AUDIT_ROWS), dtype=np.float64)
    model = served_model(state, rows)
    norm = float(np.sum(X * X))
    if not norm > 0:
        return []
    served = float(np.sum((model.reconstruct(X) - X) ** 2)) / norm
    codes = float(np.sum((model.decode(model.project(X)) * model.scale - X) ** 2)) / norm
    mean = np.asarray(state.mean, dtype=np.float64) * float(state.scale)
    baseline = float(np.sum((X - mean) ** 2)) / norm
    notes = []
    if codes > 1.0:
        notes.append(f"decoding codes alone (inverse_transform, a reconstruct of components) rebuilds the training "
                     f"rows with relative error {codes:.3g}, worse than returning 0 (1.0): the encoder is even, x and "
                     f"-x share a code, and the sign rule reads the rows' mean, which is near 0 here; reconstructing "
                     f"rows themselves (the reconstruct and denoise routes, model_.reconstruct) takes the sign from "
                     f"the row: relative error {served:.3g}")
    if served >= baseline:
        notes.append(f"the model reconstructs the training rows with relative error {served:.3g}, no better than "
                     f"their mean ({baseline:.3g}): fit more passes or components, or use a kernel PCA solver with "
                     f"a pre-image method")
    return notes
