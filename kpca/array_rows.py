"""Kernel passes on any array library of the array API standard: CuPy on a GPU, numpy (or
``array_api_strict``) everywhere else, from one code path.

`ArrayRows` is a `kpca.rows.KernelRows` whose full passes -- the centring pass (with a product,
`fit_centering_times`) and ``C K'`` (`times`), the passes of the default fit's start and of its
Rayleigh-Ritz passes (`kpca.solvers._rayleigh_ritz`) -- run in the array namespace ``xp``: the data
is copied to ``xp``'s device once, each block of ``b`` rows is ``X_b Y^T`` (one matrix product),
the kernel's elementwise map and the centring (seed 000 eq. 5) on the device, multiplied by its
columns of C on the device; only C and the d x l product travel. Everything else (row access, the
stochastic steps, the Nystrom landmarks) is `KernelRows`'s, on the host. Written once against the
standard (`array_api_compat`), so the tests run it on numpy and on ``array_api_strict`` and a GPU
differs only by its namespace.

`namespace` picks the library for a ``device`` setting: ``"gpu"`` is CuPy (an error saying what is
missing where there is none, a `kpca.params.ParamError`), ``"cpu"`` numpy, ``"auto"`` CuPy where a CUDA device is
visible, else
None (the numba tiles of `KernelRows`).

Cost per pass: ``2 l^2 (n + d)`` flops on the device, ``O(b l)`` device memory per block, ``O(d l)``
transferred.
"""

from __future__ import annotations

import numpy as np

from kpca.kernels import KernelSpec
from kpca.params import ParamError
from kpca.rows import Centering, KernelRows

DEVICES = ("auto", "cpu", "gpu")
BLOCK_ROWS = 1024


def _cupy():
    try:
        import cupy

        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:  # not installed, no driver, no device
        return None


def namespace(device: str):
    """The array namespace for ``device`` (`DEVICES`): CuPy's (``"gpu"``, or ``"auto"`` where a CUDA
    device is visible), None for the numba tiles (``"cpu"``, or ``"auto"`` without a device), or a
    `kpca.params.ParamError` on ``device`` naming what is missing. O(1) after the first call."""
    if device not in DEVICES:
        raise ParamError("device", f"must be one of {', '.join(DEVICES)}, got {device!r}")
    if device == "cpu":
        return None
    cupy = _cupy()
    if cupy is None:
        if device == "gpu":
            raise ParamError("device", "gpu asked for, but no CUDA device is visible to CuPy (install the [gpu] extra, "
                                       "cupy-cuda12x or cupy-cuda13x, on a machine with an NVIDIA GPU), or use cpu")
        return None
    from array_api_compat import array_namespace

    return array_namespace(cupy.empty(0))


def _kernel_map(xp, spec: KernelSpec, G, xn, yn):
    """The kernel values of a block from its Gram matrix ``G = X Y^T`` (and the squared norms of a
    radial kernel's arguments), elementwise in ``xp`` (`kpca.kernels.KERNELS`' formulas)."""
    if spec.type in ("gaussian", "laplacian"):
        norms = xn[:, None] + yn[None, :]
        d2 = norms - 2.0 * G  # below its own rounding it is 0, as in the numba tiles (`kpca._tiles`)
        d2 = xp.where(d2 > (64 * float(xp.finfo(G.dtype).eps)) * norms, d2, 0.0)
        if spec.type == "gaussian":
            return xp.exp(d2 * (-0.5 / spec.sigma**2))
        return xp.exp(xp.sqrt(d2) * (-1.0 / spec.sigma))
    if spec.type == "linear":
        return G
    if spec.type == "polynomial":
        return (spec.gamma * G + spec.offset) ** int(spec.degree)
    if spec.type == "tanh":
        return xp.tanh(spec.gamma * G + spec.offset)
    raise ValueError(f"kernel: no array-API form for {spec.type!r}")


class ArrayRows(KernelRows):
    """`KernelRows` whose full passes run in the array namespace ``xp`` (module docstring).

    Parameters
    ----------
    source : array-like (l, n)
        The training data (host); copied to ``xp``'s device once, in ``compute_dtype``.
    kernel : KernelSpec
    xp : array namespace
        Of the array API standard (`array_api_compat.array_namespace`, ``array_api_strict``, CuPy's).
    block_rows : int
        Rows of K' formed on the device at a time (``block_rows x l`` entries of device memory).
    options : passed to `KernelRows`.
    """

    def __init__(self, source, kernel: KernelSpec, xp, block_rows: int = BLOCK_ROWS, **options):
        super().__init__(source, kernel, **options)
        self.xp, self.block_rows = xp, int(block_rows)
        self._device_data = None

    def use_precision(self, dtype) -> None:
        """`KernelRows.use_precision`; the device's copy of the data is made again, in ``dtype``."""
        super().use_precision(dtype)
        self._device_data = None

    def _data(self):
        """The data and its squared norms on the device (copied on first use)."""
        if self._device_data is None:
            xp = self.xp
            host = np.concatenate([chunk for _, chunk in self.chunks(local=True)])
            host = host.astype(self.compute_dtype, copy=False)
            Y = xp.asarray(host)
            self._device_data = (Y, xp.sum(Y * Y, axis=1))
        return self._device_data

    def _products(self, left: np.ndarray, row_shift=None, col_shift=None):
        """``left K~`` (d, l) on the device, for K~ the raw kernel (shifts None) or eq. 5's centred one
        (``K~[i, j] = K[i, j] + row_shift[i] + col_shift[j]``); returned as a float64 host array."""
        xp = self.xp
        Y, yn = self._data()
        dtype = Y.dtype
        L = xp.asarray(np.ascontiguousarray(left, dtype=self.compute_dtype))
        shifts = None  # (row_shift, col_shift) on the device
        if row_shift is not None or col_shift is not None:
            if row_shift is None or col_shift is None:
                raise ValueError("row_shift, col_shift: give both (eq. 5's centring) or neither")
            shifts = tuple(xp.asarray(np.asarray(v, dtype=self.compute_dtype)) for v in (row_shift, col_shift))
        out = xp.zeros((L.shape[0], self.n_rows), dtype=dtype)
        for a in range(0, self.n_rows, self.block_rows):
            b = min(a + self.block_rows, self.n_rows)
            X, xn = Y[a:b, :], yn[a:b]
            K = _kernel_map(xp, self.kernel, xp.matmul(X, xp.matrix_transpose(Y)), xn, yn)
            if shifts is not None:
                rows_shift, cols_shift = shifts
                K = K + rows_shift[a:b][:, None] + cols_shift[None, :]
            out = out + xp.matmul(L[:, a:b], K)
        return np.asarray(_to_host(out), dtype=np.float64)

    def _centring_pass(self, left: np.ndarray, block_size: int) -> np.ndarray:
        """`KernelRows._centring_pass` on the device: ``left K`` (raw), the column means from its first
        row (ones) and the diagonal from the kernel's own formula."""
        out = self._products(left)
        column_means = out[0] / self.n_rows
        grand_mean = float(column_means.mean())
        diag_sum = float(sum(np.sum(self._diagonal(chunk)) for _, chunk in self.chunks()))
        self.centering = Centering(column_means=column_means, grand_mean=grand_mean,
                                   mean_diagonal=diag_sum / self.n_rows - grand_mean)
        return out

    def _diagonal(self, chunk: np.ndarray) -> np.ndarray:
        from kpca.kernels import kernel_diagonal

        return kernel_diagonal(np.asarray(chunk, dtype=np.float64), self.kernel)

    def times(self, C: np.ndarray, block_size: int = BLOCK_ROWS) -> np.ndarray:
        """``C K'`` (d, l) for C (d, l): one pass on the device (`kpca.rows.KernelRows.times`)."""
        c = self._require_centering()
        return self._products(C, c.grand_mean - c.column_means, -c.column_means)


def _to_host(array):
    """A device array as a numpy array (CuPy's ``.get()``; the standard's ``__dlpack__`` elsewhere)."""
    get = getattr(array, "get", None)
    if get is not None:
        return get()
    try:
        return np.from_dlpack(array)
    except (TypeError, RuntimeError, BufferError):
        return np.asarray(array)
