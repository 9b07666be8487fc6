"""What a job (a model's fit, a clustering) shows through the API: its stored record without what only
the service needs (``schema_version``, ``owner``, the exact limit of its placement), with the kernel the
fit used in ``params_used.kernel``.

The stored records (`store.jobs.records.JobRecord` and its kinds) are the service's own; the API's view of
each kind is made from the record type's own fields (`public_model`: their types and descriptions,
less `PRIVATE_FIELDS`), so the two cannot drift apart, and built from a record by `JobPublic.of`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema, create_model

from kpca.params import Param
from store.jobs.records import FitError, JobRecord
from store.quarantine import DamagedEntry

#: fields of a stored record that the API does not show
PRIVATE_FIELDS = ("schema_version", "owner", "fit_kernel")

WORKERS = Param(
    "workers", int, None, low=1, high=4096, words=("all",),
    description="dask workers one KHA-family fit is sharded over: an integer, or \"all\" (every worker that offers "
                "fits); left out: all when the data set has at least KPCA_SHARD_MIN_ROWS rows, else 1. Each pass's "
                "record says how many ran it")


DEVICE = Param("device", str, "auto", choices=("auto", "cpu", "gpu"),
               description="where the fit's full passes run: gpu, a CUDA GPU of the worker (through CuPy: the [gpu] "
                           "extra); cpu, the worker's cores; auto, a GPU where the worker sees one. A sharded fit runs "
                           "on cores")


class PlacementPublic(BaseModel):
    """Where a job runs, as asked (``placement`` of a model request)."""

    model_config = ConfigDict(extra="forbid")

    workers: Annotated[int | str | None, PlainValidator(lambda value: WORKERS.check(value, "placement")),
                       WithJsonSchema(WORKERS.json_schema())] = None
    device: Annotated[str, PlainValidator(lambda value: DEVICE.check(value, "placement")),
                      WithJsonSchema(DEVICE.json_schema())] = "auto"


class JobPublic(BaseModel):
    """The base of a job's public view (`public_model`)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    @classmethod
    def of(cls, record: JobRecord, **extra: Any):
        """The public view of ``record`` (``extra``: fields of the view the record does not hold, such as a
        page of labels). Cost O(record size)."""
        document = record.document()
        used = document.get("params_used")
        if used is not None and document.get("fit_kernel") is not None:
            document["params_used"] = {**used, "kernel": document["fit_kernel"]}
        placement = document.get("placement") or {}
        document["placement"] = {"workers": placement.get("workers"), "device": placement.get("device", "auto")}
        return cls.model_validate({**document, **extra})


def public_model(name: str, record_type: type[JobRecord], doc: str, base: type[JobPublic] = JobPublic):
    """The public view of a kind of job: a `JobPublic` named ``name`` with every field of ``record_type``
    but `PRIVATE_FIELDS`, ``placement`` as asked (`PlacementPublic`) and ``params_used`` with the fitted
    kernel. Cost O(fields), once, at import."""
    fields: dict[str, Any] = {field: (info.annotation, info) for field, info in record_type.model_fields.items()
                              if field not in PRIVATE_FIELDS}
    fields["placement"] = (PlacementPublic, Field(default_factory=PlacementPublic,
                                                  description="where the job runs, as asked"))
    fields["params_used"] = (dict[str, Any] | None, Field(
        default=None, description="every parameter's value in the fit, defaults resolved; kernel: the kernel the "
                                  "fit used (\"auto\" resolved); n_rows: the rows it fits"))
    model = create_model(name, __base__=base, __module__=__name__, **fields)
    model.__doc__ = doc
    return model


class JobDamaged(BaseModel):
    """A job in a list whose record cannot be read (quarantined, `store.quarantine`): its name, status
    ``corrupt`` and, in ``error``, which file, why, and what to do (delete it). ``GET`` of it is a 409
    ``corrupt`` with the same message."""

    name: str = Field(description="the job's name")
    status: Literal["corrupt"] = Field(default="corrupt", description="corrupt: its record cannot be read")
    error: FitError = Field(description="code corrupt; the message names the damaged file and what to do")

    @classmethod
    def of(cls, entry: DamagedEntry) -> "JobDamaged":
        """The list entry of a damaged job. O(1)."""
        return cls(name=entry.name, error=FitError(code="corrupt", message=entry.message))


def listed(entry: JobRecord | DamagedEntry, view):
    """A list's entry: ``view(record)`` for a readable job, `JobDamaged` for a damaged one. O(record size)."""
    return JobDamaged.of(entry) if isinstance(entry, DamagedEntry) else view(entry)
