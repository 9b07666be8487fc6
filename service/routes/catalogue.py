"""``GET /v1/solvers`` and ``GET /v1/kernels``: what a model request may name, with every parameter."""

from __future__ import annotations

from fastapi import APIRouter

from service.schemas.catalogue import KernelsPublic, SolversPublic, kernels_public, solvers_public

router = APIRouter(prefix="/v1", tags=["catalogue"])


@router.get("/solvers")
def list_solvers() -> SolversPublic:
    """The registered solvers (plugins included): what each computes, how it runs, its parameters."""
    return solvers_public()


@router.get("/kernels")
def list_kernels() -> KernelsPublic:
    """The kernels, their formulas and parameters."""
    return kernels_public()
