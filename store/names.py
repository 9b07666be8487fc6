"""Validation of resource names, so that no name can address a path outside the data folder."""

from __future__ import annotations

import re

from store.errors import Invalid

_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def validate_name(name: object, field: str = "name") -> str:
    """Check that ``name`` is a safe resource name and return it unchanged.

    A name is 1 to 64 characters from ``A-Z a-z 0-9 _ . -``, starts with a
    letter or digit and does not contain ``".."``; so it is always a single
    path component that is neither hidden nor a parent reference. Cost O(len).

    Parameters
    ----------
    name : object
        Candidate name (anything; only ``str`` can pass).
    field : str
        Field named in the error.

    Returns
    -------
    str
        ``name``.

    Raises
    ------
    Invalid
        If ``name`` is not such a string.
    """
    if not isinstance(name, str):
        raise Invalid(field, f"{field} must be a string, got {type(name).__name__}")
    if not _NAME_PATTERN.fullmatch(name) or ".." in name:
        raise Invalid(
            field,
            f"invalid {field} {name!r}: use 1-64 characters from A-Z a-z 0-9 _ . -, "
            "starting with a letter or digit, without '..'",
        )
    return name
