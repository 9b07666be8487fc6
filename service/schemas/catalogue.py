"""What the service offers, read from the registries of `kpca`: ``GET /v1/solvers`` and ``GET /v1/kernels``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from kpca.kernels import KERNELS
from kpca.params import Param
from kpca.solvers import SOLVERS


class ParamPublic(BaseModel):
    """One declared parameter."""

    name: str = Field(description="the parameter's name in params (or in the kernel object)")
    required: bool = Field(description="whether a request must give it")
    schema_: dict[str, Any] = Field(alias="schema", serialization_alias="schema",
                                    description="its JSON schema: type, bounds or choices, default, description")


class SolverPublic(BaseModel):
    """A registered solver (`kpca.solvers.SOLVERS`)."""

    name: str = Field(description="the value of solver in POST /v1/models")
    summary: str = Field(description="what the solver does and when to choose it")
    iterative: bool = Field(description="fits pass by pass (progress per pass, cancel and resume) or in one call")
    serves: str = Field(description="expansion: coefficients over all training rows; centres: m centres of its own")
    shardable: bool = Field(description="a fit can be sharded over several dask workers (placement.workers)")
    clusterable: bool = Field(description="spectral clustering (POST /v1/clusterings) can use it")
    params: list[ParamPublic] = Field(description="parameters the solver accepts in params")


class SolversPublic(BaseModel):
    solvers: list[SolverPublic] = Field(description="every registered solver, plugins included")


class KernelPublic(BaseModel):
    """A kernel of `kpca.kernels.KERNELS`."""

    type: str = Field(description="the value of kernel.type")
    formula: str = Field(description="k(x, y)")
    params: list[ParamPublic] = Field(description="parameters the kernel object accepts besides type")


class KernelsPublic(BaseModel):
    kernels: list[KernelPublic] = Field(description="every kernel")


def _params(declared: tuple[Param, ...]) -> list[ParamPublic]:
    return [ParamPublic(name=p.name, required=p.required, schema=p.json_schema()) for p in declared]


def solvers_public() -> SolversPublic:
    """Every registered solver with its parameters (plugins included). Cost O(solvers x parameters)."""
    return SolversPublic(solvers=[SolverPublic(name=s.name, summary=s.summary, iterative=s.iterative, serves=s.serves,
                                               shardable=s.shardable, clusterable=s.clusterable,
                                               params=_params(s.params)) for s in SOLVERS.values()])


def kernels_public() -> KernelsPublic:
    """Every kernel with its formula and parameters. Cost O(kernels x parameters)."""
    return KernelsPublic(kernels=[KernelPublic(type=k.name, formula=k.formula, params=_params(k.params))
                                  for k in KERNELS.values()])
