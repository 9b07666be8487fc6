"""Pure numerics of kernel PCA: no I/O, no HTTP, no dask.

Kernels (one table, `kpca.kernels.KERNELS`), feature-space centring and
kernel rows on demand (`kpca.rows`), solvers (one registry,
`kpca.solvers.SOLVERS`: a state dict plus a step, or a one-shot fit), the
pass driver (`kpca.driver`), the served model (`kpca.model`), pre-images
(`kpca.preimage`), metrics, spectral clustering (`kpca.clustering` over the
rows of the normalised affinity, `kpca.affinity`), and two scikit-learn estimators
(`from kpca import KernelHebbianPCA`, and `from kpca import KernelPCA`, scikit-learn's
own class's drop-in; imported on first use, so that ``import kpca`` does not load
scikit-learn). That is the core; `kpca.images`
(denoising and hyperresolution of images by patches) and `kpca.sharded` (the
passes of a fit over row shards) are wings on it, which the core never imports.
"""

from kpca.kernels import KERNELS, KernelSpec, kernel_block
from kpca.rows import Centering, KernelRows
from kpca.solvers import SOLVERS

__all__ = ["KERNELS", "KernelSpec", "kernel_block", "KernelRows", "Centering", "SOLVERS", "KernelHebbianPCA",
           "KernelPCA"]


def __getattr__(name: str):
    """``kpca.KernelHebbianPCA`` and ``kpca.KernelPCA``, imported from `kpca.estimator` and
    `kpca.kernel_pca` on first use."""
    if name == "KernelHebbianPCA":
        from kpca.estimator import KernelHebbianPCA

        return KernelHebbianPCA
    if name == "KernelPCA":
        from kpca.kernel_pca import KernelPCA

        return KernelPCA
    raise AttributeError(f"module 'kpca' has no attribute {name!r}")
