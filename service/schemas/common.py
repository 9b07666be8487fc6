"""Types shared by the resource schemas."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

#: Pattern of data set and model names: they become folder names in the store.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"

Name = Annotated[
    str,
    StringConstraints(pattern=NAME_PATTERN),
    Field(
        description="1-64 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit, without '..'",
        examples=["digits"],
    ),
]

#: A JSON number (ints accepted, booleans and strings refused); finiteness is checked later.
Number = Annotated[float, Field(strict=True)]
