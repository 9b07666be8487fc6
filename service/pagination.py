"""Pages of the list routes (``GET /v1/datasets``, ``/v1/models``, ``/v1/clusterings``).

Every list is sorted by name. ``limit`` (1..1000, default `DEFAULT_LIMIT`)
bounds a page; ``next_cursor`` in the response is the last name of the page
when more follow (``None`` on the last page), and ``cursor=<that>`` asks for
the next one. The cursor is the plain name, so a page starts after it even
if that entry was deleted meanwhile; entries created or deleted while a
client walks the pages appear or not depending on where they sort.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

from fastapi import Query

from service.schemas.common import NAME_MAX_LENGTH, NAME_PATTERN
from service.schemas.errors import ErrorBody
from service.schemas.openapi import Responses

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000

PageLimit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"entries per page, 1 to {MAX_LIMIT}")]
PageCursor = Annotated[
    str | None,
    Query(pattern=NAME_PATTERN, max_length=NAME_MAX_LENGTH,
          description="the next_cursor of the previous page (a name: the page starts after it); omit for the first"),
]


def page(list_after: Callable[..., Sequence[Any]], cursor: str | None, limit: int) -> tuple[list, str | None]:
    """One page of a store's ``list(after, limit)``: the entries and the cursor of the next page
    (None on the last). One entry more than ``limit`` is read to know whether more follow.
    Cost: the store's listing plus ``limit + 1`` reads."""
    entries = list(list_after(after=cursor, limit=limit + 1))
    if len(entries) <= limit:
        return entries, None
    entries = entries[:limit]
    last = entries[-1]
    return entries, last["name"] if isinstance(last, dict) else last.name


#: the responses of a list route: a bad ``limit`` or ``cursor`` is a 422 in the service's error shape
LIST_RESPONSES: Responses = {422: {"model": ErrorBody,
                                   "description": "a limit or cursor the list refuses (the field is named)"}}
