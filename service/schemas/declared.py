"""Request types built from the registries of `kpca`: kernels, solvers, pre-image methods.

A kernel's parameters, a solver's parameters and a pre-image method's
options are declared once, in `kpca` (`kpca.params.Param`); this module turns
those declarations into pydantic types and JSON schemas, so that the API
validates and documents exactly what the numerics accept. Values are checked
by the declarations themselves (`kpca.params.ParamError`, which names the
dotted field; `service.errors` reports it). Solvers registered by plugins
after import appear in the schema too: it is built when first asked for.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    WithJsonSchema,
    create_model,
)

from kpca.kernels import KERNELS, KernelSpec
from kpca.params import Param, ParamError, check_params
from kpca.solvers import SOLVERS, get_solver
from store.jobs.records import kernel_json_schema


def _kernel(value: Any) -> KernelSpec:
    if not isinstance(value, dict):
        raise ParamError("kernel", 'must be an object such as {"type": "gaussian", "sigma": 3.0}')
    if "type" not in value:
        raise ParamError("kernel", f"type: field required (one of {', '.join(KERNELS)})")
    return KernelSpec.from_dict(value)


Kernel = Annotated[KernelSpec, PlainValidator(_kernel), PlainSerializer(KernelSpec.to_dict, return_type=dict),
                   WithJsonSchema(kernel_json_schema())]
"""A kernel as ``{"type": ..., parameters}``, parsed once, here, into a `kpca.kernels.KernelSpec` (checked
against `kpca.kernels.KERNELS`, defaults filled in)."""


def _solver(name: str) -> str:
    return get_solver(name).name


def _solver_enum(schema: dict) -> None:
    schema["enum"] = list(SOLVERS)
    schema["description"] = "the solver: " + "; ".join(f"{s.name}: {s.summary}" for s in SOLVERS.values())


SolverName = Annotated[str, AfterValidator(_solver), Field(json_schema_extra=_solver_enum)]
"""The name of a registered solver (`kpca.solvers.SOLVERS`)."""


def _params_schema(schema: dict) -> None:
    properties: dict[str, dict] = {}
    users: dict[str, list[str]] = {}
    for solver in SOLVERS.values():
        for param in solver.params:
            properties.setdefault(param.name, param.json_schema())
            users.setdefault(param.name, []).append(solver.name)
    for name, solvers in users.items():
        text = properties[name].get("description", "")
        properties[name]["description"] = f"{text} (solvers: {', '.join(solvers)})".strip()
    schema.update(type="object", properties=properties, additionalProperties=False,
                  description="solver parameters; each solver reads those it declares, the others are refused. "
                              "Left out: the default, reported in params_used")


SolverParams = Annotated[dict[str, Any], Field(default_factory=dict, json_schema_extra=_params_schema)]
"""Solver parameters, checked against the chosen solver's declaration by `check_solver_params`."""


def check_solver_params(solver: str, params: dict) -> None:
    """`kpca.params.ParamError` naming ``params.<name>`` unless every parameter belongs to the solver
    and has a valid type and range (data-dependent checks come later, with the data set). ``workers``,
    a solver parameter until schema version 3 of the records, is refused with where it went."""
    if "workers" in params:
        raise ParamError("params.workers", 'where a fit runs is no longer a parameter of its solver: send it as '
                                           'placement.workers, e.g. {"placement": {"workers": 2}} (a model\'s; '
                                           'clusterings run on one worker)')
    check_params(get_solver(solver).params, params, "params", f"solver {solver}")


def options_model(name: str, params: tuple[Param, ...], doc: str) -> type[BaseModel]:
    """A pydantic model of optional fields, one per declared parameter (None: the default applies)."""
    fields: dict[str, Any] = {}  # field name -> (type, FieldInfo), as `pydantic.create_model` takes them
    for param in params:
        kind: Any = float if param.kind is float else param.kind
        bounds: dict[str, Any] = {}  # Field's keyword -> bound (a number, or allow_inf_nan's bool)
        if param.low is not None:
            bounds["gt" if param.low_open else "ge"] = param.low
        if param.high is not None:
            bounds["lt" if param.high_open else "le"] = param.high
        if kind is float:
            bounds["allow_inf_nan"] = False
        fields[param.name] = (kind | None, Field(default=None, description=param.description, **bounds))
    model = create_model(name, __config__=ConfigDict(extra="forbid"), **fields)
    model.__doc__ = doc
    return model
