"""``GET /v1/solvers`` and ``GET /v1/kernels``: what a model request may name, with every parameter."""

from __future__ import annotations

from fastapi import APIRouter

from service.schemas.catalogue import KernelsPublic, SolversPublic, kernels_public, solvers_public
from service.security import READ, access

router = APIRouter(prefix="/v1", tags=["catalogue"])


@router.get("/solvers", openapi_extra=access(READ))
def list_solvers() -> SolversPublic:
    """The registered solvers (plugins included): what each computes, how it runs, its parameters."""
    return solvers_public()


@router.get("/kernels", openapi_extra=access(READ))
def list_kernels() -> KernelsPublic:
    """The kernels, their formulas and parameters."""
    return kernels_public()
