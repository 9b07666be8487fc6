"""Declared parameters: one description of a parameter serves every layer that reads it.

A kernel (`kpca.kernels.KERNELS`), a solver (`kpca.solvers.SOLVERS`) and a
pre-image method (`kpca.preimage.METHODS`) each declare their parameters once
as `Param` objects: name, type, default, bounds or choices, and a sentence
for people. The estimator validates its arguments with them, the service
builds its request schemas and error messages from them, and the docs list
them; nothing else spells a parameter out again.

Validation raises `ParamError`, a ``ValueError`` that carries the dotted
``field`` at fault (``"kernel.sigma"``, ``"params.eta0"``), so that every
layer can name it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

REQUIRED = object()
"""Default of a parameter that has none: the caller must give it."""


class ParamError(ValueError):
    """A parameter value refused; ``field`` is its dotted name, the message starts with it."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = message


@dataclass(frozen=True)
class Param:
    """One declared parameter.

    Attributes
    ----------
    name : str
    kind : {float, int, str, bool}
        JSON type of the value; ints are accepted where floats are (not bools).
    default : object
        The value used when the parameter is left out; `REQUIRED` if it must
        be given, ``None`` if the fit chooses it from the data.
    low, high : float or None
        Bounds, inclusive unless ``low_open`` / ``high_open``.
    choices : tuple or None
        Allowed values (strings), instead of bounds.
    auto : bool
        Whether the string ``"auto"`` is accepted besides numbers (a value the
        fit resolves from the data, e.g. a kernel width).
    words : tuple of str
        Other strings accepted besides numbers, returned as they are (e.g.
        ``("all",)`` for a count that may be "every one there is"); the layer
        that uses the value resolves them.
    description : str
        What it means and what its default does, in words for users.
    """

    name: str
    kind: type
    default: Any = REQUIRED
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple | None = None
    auto: bool = False
    words: tuple[str, ...] = ()
    description: str = ""

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def check(self, value: Any, where: str = "") -> Any:
        """``value`` converted to the parameter's kind, or `ParamError` naming ``where.name``. Cost O(1).

        ``None`` is accepted for parameters the fit resolves (default None).
        """
        field = f"{where}.{self.name}" if where else self.name
        if value is None and self.default is None:
            return None
        if self.auto and value == "auto":
            return "auto"
        if isinstance(value, str) and value in self.words:
            return value
        if self.choices is not None:
            if value not in self.choices:
                raise ParamError(field, f"must be one of {', '.join(map(str, self.choices))}, got {value!r}")
            return value
        if self.kind is bool:
            if not isinstance(value, bool):
                raise ParamError(field, f"must be true or false, got {value!r}")
            return value
        if self.kind is str:
            if not isinstance(value, str):
                raise ParamError(field, f"must be a string, got {value!r}")
            return value
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            words = (["auto"] if self.auto else []) + list(self.words)
            expected = ("an integer" if self.kind is int else "a number") + "".join(f' or "{w}"' for w in words)
            raise ParamError(field, f"must be {expected}, got {value!r}")
        if self.kind is int:
            if not isinstance(value, numbers.Integral):
                raise ParamError(field, f"must be an integer, got {value!r}")
            value = int(value)
        else:
            value = float(value)
            if not math.isfinite(value):
                raise ParamError(field, f"must be finite, got {value!r}")
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            raise ParamError(field, f"must be {'>' if self.low_open else '>='} {self.low:g}, got {value!r}")
        if self.high is not None and (value >= self.high if self.high_open else value > self.high):
            raise ParamError(field, f"must be {'<' if self.high_open else '<='} {self.high:g}, got {value!r}")
        return value

    def json_schema(self) -> dict:
        """The JSON schema of the parameter (type, bounds, enum, default, description). Cost O(1)."""
        if self.choices is not None:
            schema: dict = {"enum": list(self.choices)}
        else:
            schema = {"type": {float: "number", int: "integer", str: "string", bool: "boolean"}[self.kind]}
            for bound, value, is_open in (("minimum", self.low, self.low_open), ("maximum", self.high, self.high_open)):
                if value is not None:
                    schema["exclusiveM" + bound[1:] if is_open else bound] = value
            if self.auto:  # an enum of one word, not a const: client generators parse a const in a union badly
                schema = {"anyOf": [schema, {"type": "string", "enum": ["auto"]}]}
            if self.words:
                schema = {"anyOf": [schema, {"enum": list(self.words)}]}
        if self.default is None:
            schema = {"anyOf": [schema, {"type": "null"}]}
        elif self.default is not REQUIRED:
            schema["default"] = self.default
        if self.description:
            schema["description"] = self.description
        return schema


def check_params(declared: Iterable[Param], given: Mapping[str, Any], where: str, owner: str) -> dict:
    """The given values checked against ``declared``: unknown names and missing required ones are
    `ParamError`s naming ``where.name``; values are converted (`Param.check`). Defaults are NOT
    filled in (see `with_defaults`). Cost O(number of parameters)."""
    by_name = {p.name: p for p in declared}
    for name in given:
        if name not in by_name:
            known = ", ".join(sorted(by_name)) or "none"
            raise ParamError(f"{where}.{name}" if where else name,
                             f"not a parameter of {owner} (its parameters: {known})")
    out = {}
    for name, param in by_name.items():
        if name in given:
            out[name] = param.check(given[name], where)
        elif param.required:
            raise ParamError(f"{where}.{name}" if where else name, f"required by {owner}")
    return out


def with_defaults(declared: Iterable[Param], values: Mapping[str, Any]) -> dict:
    """``values`` plus the declared default of every parameter left out (None for resolved ones). Cost O(n)."""
    out = {p.name: p.default for p in declared if not p.required}
    out.update(values)
    return out


def check_points(X, n_features: int, name: str = "X") -> np.ndarray:
    """X as a C-contiguous float64 array of shape (m, n_features) (one row may be given flat);
    ValueError naming ``name`` for another shape or a value that is not finite. O(m n)."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1 and X.size == n_features:
        X = X[None, :]
    if X.ndim != 2 or X.shape[1] != n_features:
        raise ValueError(f"{name}: expected shape (m, {n_features}), got {X.shape}")
    if not np.isfinite(X).all():
        raise ValueError(f"{name}: must be finite")
    return np.ascontiguousarray(X)
