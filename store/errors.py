"""Errors raised by `store/`, each naming a machine-readable code and the field at fault.

The service maps them to HTTP statuses: `NotFound` -> 404, `Conflict` -> 409,
`Invalid` -> 400/422. Anything else escaping `store/` is a bug (a 500).
"""

from __future__ import annotations


class StoreError(Exception):
    """Base class: a request the store refuses, with a message a user can act on.

    Attributes
    ----------
    code : str
        Machine-readable kind (``"not_found"``, ``"conflict"``, ``"invalid"``).
    message : str
        Human-readable explanation.
    field : str or None
        The request field at fault (``"name"``, ``"rows"``, ``"index"``, ...).
    """

    code: str = "store_error"

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, field={self.field!r})"


class NotFound(StoreError):
    """A named resource does not exist: ``NotFound("dataset", "x")`` -> "dataset 'x' not found".

    ``message`` replaces that default text when the resource needs more words
    (``"data set 'x' has no version 3; its versions are 1..2"``)."""

    code = "not_found"

    def __init__(self, kind: str, name: str, field: str | None = None, message: str | None = None):
        super().__init__(message or f"{kind} {name!r} not found", field=field)
        self.kind = kind
        self.name = name


class Conflict(StoreError):
    """The request clashes with the stored state (name taken, set already committed, ...)."""

    code = "conflict"


class Invalid(StoreError):
    """Client input at fault; ``field`` names it: ``Invalid("rows", "empty chunk")``."""

    code = "invalid"

    def __init__(self, field: str, message: str):
        super().__init__(message, field=field)


class Corrupt(Conflict):
    """Stored rows fail their digest (or cannot be decoded): ``Corrupt("d", 2, [3])``.

    The message names the data set, the version read and the (upload) chunk
    indices whose rows are damaged, and says how to repair: upload those
    chunks again with their original rows and commit, or delete the set.
    Pickles (it crosses dask task boundaries).
    """

    code = "corrupt"

    def __init__(self, dataset: str, version: int | None, chunks, reason: str = "digest mismatch"):
        self.dataset, self.version, self.reason = dataset, version, reason
        self.chunks = sorted({int(c) for c in chunks})
        shown = ", ".join(str(c) for c in self.chunks[:20]) + (", ..." if len(self.chunks) > 20 else "")
        of_version = f" of version {version}" if version else ""
        super().__init__(
            f"data set {dataset!r}: stored chunk(s) [{shown}]{of_version} are corrupt ({reason}); repair by "
            f"uploading chunk(s) [{shown}] again with their original rows (PUT /v1/datasets/{dataset}/chunks/"
            f"{{index}}) and committing (POST /v1/datasets/{dataset}/commit), or delete the data set",
            field="dataset",
        )

    def __reduce__(self):
        return (type(self), (self.dataset, self.version, self.chunks, self.reason))


class Damaged(Conflict):
    """A stored document or file is damaged (unreadable, missing, or failing its digest): code ``corrupt``,
    a 409. ``Damaged("data set 'x': its meta.json cannot be read ...; delete it", field="name")``.

    ``cause`` names the kind of the underlying failure (``"JSONDecodeError"``, ``"FileNotFoundError"``,
    ``"digest mismatch"``). Pickles with its fields (it crosses dask task boundaries).
    """

    code = "corrupt"

    def __init__(self, message: str, field: str | None = "name", cause: str = ""):
        super().__init__(message, field=field)
        self.cause = cause

    def __reduce__(self):
        return (type(self), (self.message, self.field, self.cause))


class DamagedCheckpoint(Damaged, ValueError):
    """A checkpoint that is missing where a record names it, unreadable, or failing its digests: a 409
    ``corrupt`` on ``name`` (the job's). Also a `ValueError`, what a damaged checkpoint raised before it
    had a class of its own."""
