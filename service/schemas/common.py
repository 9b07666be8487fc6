"""Types shared by the resource schemas."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

#: Pattern of data set and model names: they become folder names in the store. The same rule as
#: `store.names.validate_name` (a letter or digit, then A-Z a-z 0-9 . _ -, never two dots in a row),
#: written without look-arounds so that every JSON-schema regex engine reads it alike; the length
#: (1-64) is `NAME_MAX_LENGTH`, stated beside it as ``maxLength``.
NAME_PATTERN = r"^[A-Za-z0-9](\.?[A-Za-z0-9_-])*\.?$"
NAME_MAX_LENGTH = 64

Name = Annotated[
    str,
    StringConstraints(pattern=NAME_PATTERN, min_length=1, max_length=NAME_MAX_LENGTH),
    Field(
        description="1-64 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit, without '..'",
        examples=["digits"],
    ),
]

#: A JSON number (ints accepted, booleans and strings refused); finiteness is checked later.
Number = Annotated[float, Field(strict=True)]
