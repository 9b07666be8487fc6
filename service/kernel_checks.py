"""Checks of a job's kernel against its data set, made when the job is asked for (the numbers live in
`kpca.kernel_scale`; this module only fetches what they need from the store)."""

from __future__ import annotations

from kpca.kernel_scale import check_kernel_scale, sample_max_sq_norm
from kpca.kernels import KernelSpec
from store.dataset_meta import DatasetInfo


def check_kernel_on_data(datasets, dataset: DatasetInfo, kernel: dict, params: dict | None = None) -> None:
    """A dot-product kernel whose values overflow or underflow on the data set's scale (its largest
    squared row norm over a sample, `kpca.kernel_scale`) in the fit's kernel precision
    (``params.kernel_precision``, float64 by default) is a 422 naming the parameter, now rather than a
    failed fit. Cost: reading up to 3 windows of rows when the kernel is polynomial or tanh."""
    spec = KernelSpec.from_dict(kernel)
    if spec.type not in ("polynomial", "tanh"):
        return
    n_rows = dataset.n_rows
    rows = datasets.open_array(dataset.name, dataset.version)
    precision = (params or {}).get("kernel_precision")
    precision = precision if precision in ("float32", "float64") else "float64"
    check_kernel_scale(spec, sample_max_sq_norm(rows, n_rows), precision, n_rows)
