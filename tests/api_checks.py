"""Assertions on the service's error bodies, shared by the API tests."""


def assert_error(response, status: int, code: str, field: str | None) -> dict:
    """The response is ``status`` with ``{"error": {code, field, message}}`` as given and a message; returns the error."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == (code, field), error
    assert error["message"], error
    return error


def error_message(response, status: int, code: str, field: str | None) -> str:
    """`assert_error`, returning just the message."""
    return assert_error(response, status, code, field)["message"]
