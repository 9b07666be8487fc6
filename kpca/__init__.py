"""Pure numerics of kernel PCA by the Kernel Hebbian Algorithm family.

No I/O, no HTTP, no dask: kernels (numba), feature-space centring, solvers
(state dict + step functions), the pass driver, metrics, and a scikit-learn
estimator. Works on any row source with ``shape`` and row slicing.
"""

from kpca.kernels import KernelSpec, kernel_block
from kpca.rows import Centering, KernelRows
from kpca.solvers import SOLVERS

__all__ = ["KernelSpec", "kernel_block", "KernelRows", "Centering", "SOLVERS"]
