"""The OpenAPI document, completed with the error responses that FastAPI does not derive itself."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

#: FastAPI's ``responses=`` of a route: status code -> that response's OpenAPI (``model``, ``description``,
#: ``content``), the type FastAPI declares for it
Responses = dict[int | str, dict[str, Any]]

#: Responses of every operation that reads a request body (JSON, .npy, CSV, PNG, or none at all).
BODY_ERRORS = {
    "400": "request body could not be parsed (not UTF-8, not JSON, malformed .npy or CSV)",
    "415": "Content-Type is not one this operation accepts",
}
_WRITES = frozenset({"post", "put", "patch"})
_ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}


def document_body_errors(schema: dict[str, Any]) -> dict[str, Any]:
    """Add the 400 and 415 error responses (`BODY_ERRORS`) to every POST/PUT/PATCH operation of an
    OpenAPI ``schema`` that does not document them yet; returns ``schema``, changed in place.

    Cost O(operations)."""
    for operations in schema.get("paths", {}).values():
        for method, operation in operations.items():
            if method not in _WRITES or not isinstance(operation, dict):
                continue
            responses = operation.setdefault("responses", {})
            for code, description in BODY_ERRORS.items():
                responses.setdefault(code, {"description": description,
                                            "content": {"application/json": {"schema": _ERROR_REF}}})
    return schema


def without_item_schemas(schema: dict[str, Any]) -> dict[str, Any]:
    """Remove ``itemSchema`` (an OpenAPI 3.2 keyword that FastAPI writes for event streams) from every
    response content of an OpenAPI 3.1 ``schema`` that has a ``schema`` of its own: 3.1 readers,
    schemathesis among them, would otherwise check the whole stream against ``schema``. Returns
    ``schema``, changed in place. Cost O(responses)."""
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict):
                continue
            for response in operation.get("responses", {}).values():
                for content in response.get("content", {}).values():
                    if "schema" in content:
                        content.pop("itemSchema", None)
    return schema


def install_openapi(app: FastAPI) -> None:
    """Make ``app.openapi()`` return the generated document completed by `document_body_errors` and
    `without_item_schemas`."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = without_item_schemas(document_body_errors(generate()))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
