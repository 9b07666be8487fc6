"""Checks of a job request against its data set, made when the job is asked for, so that a fit the data
cannot take is a 422 naming the field now rather than a failed fit later. The rules live in `kpca`
(`kpca.fitting.FitRequest.checked_params`, `kpca.clustering.check_clustering`, `kpca.kernel_scale`); this
module fetches what they need from the store."""

from __future__ import annotations

from kpca.clustering import check_clustering
from kpca.fitting import FitRequest
from kpca.kernel_scale import check_kernel_scale, sample_max_sq_norm
from kpca.kernels import KernelSpec
from kpca.preimage import check_method
from kpca.solvers import get_solver
from service.errors import ApiError
from store.datasets.records import DatasetInfo


def check_kernel_on_data(datasets, dataset: DatasetInfo, kernel: KernelSpec, precision: str = "float64") -> None:
    """A dot-product kernel whose values overflow or underflow on the data set's scale (its largest
    squared row norm over a sample, `kpca.kernel_scale`) in the fit's kernel ``precision`` (the
    resolved ``params.kernel_precision``) is a 422 naming the parameter, now rather than a failed fit.
    Cost: reading up to 3 windows of rows when the kernel is polynomial or tanh."""
    if kernel.type not in ("polynomial", "tanh"):
        return
    n_rows = dataset.n_rows
    rows = datasets.open_array(dataset.name, dataset.version)
    check_kernel_scale(kernel, sample_max_sq_norm(rows, n_rows), precision, n_rows)


def checked_fit_params(datasets, dataset: DatasetInfo, kernel: KernelSpec, solver: str, n_components: int, params: dict,
                       exact_limit: int) -> dict:
    """The solver's parameters of a model request checked against its data set
    (`kpca.fitting.FitRequest.checked_params`: ``n_components`` below the rows, ``init_size`` in range, a
    dense solver's limit; then `check_kernel_on_data` in the precision the fit will take), converted, as
    the record keeps them; `kpca.params.ParamError` naming the field. Cost: `check_kernel_on_data` plus
    O(parameters)."""
    request = FitRequest(solver, n_components, params, exact_limit)
    checked = request.checked_params(dataset.n_rows, kernel)
    check_kernel_on_data(datasets, dataset, kernel, request.kernel_precision(dataset.n_rows))
    return checked


def checked_clustering_params(datasets, dataset: DatasetInfo, kernel: KernelSpec, solver: str, n_clusters: int,
                              params: dict, exact_limit: int) -> dict:
    """`checked_fit_params` of a clustering request, after `kpca.clustering.check_clustering` (the number
    of clusters, a clusterable solver, an affinity kernel). Cost O(parameters)."""
    check_clustering(n_clusters, dataset.n_rows, kernel, solver, params)
    return checked_fit_params(datasets, dataset, kernel, solver, n_clusters, params, exact_limit)


def fit_kernel(job):
    """The kernel model ``job`` (its record) was fitted with (its resolved width where it had "auto"). O(1)."""
    return getattr(job, "fit_kernel", None) or job.kernel


def own_decoder(job) -> bool:
    """Whether model ``job`` (its record) decodes with its own decoder (autoencoder KPCA), not pre-images. O(1)."""
    return get_solver(job.solver).model is not None


def checked_preimage(job, method: str, options: dict | None) -> str:
    """The pre-image method a serving request on model ``job`` (its record) will run, checked before
    any work by `kpca.preimage.check_method` against the kernel the model was fit with and its kind
    (its own decoder or a kernel expansion): one validation for ``/reconstruct``, ``/denoise``,
    ``/denoise-image`` and ``/transform``. A 422 naming ``method`` or ``options.<name>`` otherwise.
    Cost O(options)."""
    try:
        return check_method(fit_kernel(job).type, own_decoder(job), method, options or {}).name
    except ValueError as exc:
        message = str(exc)
        field = message.split(":", 1)[0] if message.startswith("options.") else "method"
        raise ApiError(422, "invalid", message, field) from None
