"""The arrays a user names on the command line: a ``.npy`` file, or a CSV (or whitespace-separated) text file of
numbers, one row per sample, read as the service reads a CSV upload (a first line without any number is a
header, skipped). A file that is neither is a `BadFile` saying which line and column, and what to give
instead: never a traceback."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

_NUMBER = re.compile(r"^[\s\"']*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?[\s\"']*$|^\s*[-+]?(nan|inf|infinity)\s*$",
                     re.IGNORECASE)


class BadFile(ValueError):
    """A file that is not a 2-D table of numbers; the message names the file, the place and what to do."""


def load_table(path) -> np.ndarray:
    """A 2-D float array from ``path``: ``.npy`` (a 1-D array is one row), else CSV or whitespace-separated
    text of numbers with an optional header line; `BadFile` otherwise, and for a value that is not finite
    (naming its line, counted from 1 as an editor counts, and column). O(file size)."""
    path = Path(path)
    if path.suffix.lower() == ".npy":
        return _npy(path)
    return _text(path)


def _npy(path: Path) -> np.ndarray:
    try:
        array = np.load(path, allow_pickle=False)
    except ValueError as exc:  # pickled objects, or not a .npy file at all
        raise BadFile(f"{path}: not a .npy file of numbers ({exc}); save the rows with numpy.save of a 2-D "
                      "float array, or give a CSV file") from None
    if array.dtype.kind not in "fiub" or array.ndim not in (1, 2):
        raise BadFile(f"{path}: a {array.ndim}-D array of {array.dtype}; give a 2-D array of numbers "
                      "(one row per sample)")
    array = array.reshape(1, -1) if array.ndim == 1 else array
    _finite(path, array, first_line=None)
    return array


def _text(path: Path) -> np.ndarray:
    try:
        lines = path.read_text().splitlines()
    except UnicodeDecodeError:
        raise BadFile(f"{path}: neither a .npy file nor text; give a .npy array or a CSV of numbers") from None
    numbered = [(i + 1, line) for i, line in enumerate(lines) if line.strip()]
    if not numbered:
        raise BadFile(f"{path}: no rows; give one row of numbers per line")
    delimiter = "," if "," in numbered[0][1] else None
    header = not any(_NUMBER.match(field) for field in _fields(numbered[0][1], delimiter))
    data = numbered[1:] if header else numbered
    if not data:
        raise BadFile(f"{path}: a header line and no rows of numbers")
    rows, width = [], None
    for number, line in data:
        fields = _fields(line, delimiter)
        if width is None:
            width = len(fields)
        if len(fields) != width:
            raise BadFile(f"{path} line {number}: {len(fields)} values where the first row has {width}")
        try:
            rows.append([float(field.strip().strip("\"'")) for field in fields])
        except ValueError:
            column = next(j for j, f in enumerate(fields) if not _NUMBER.match(f)) + 1
            raise BadFile(f"{path} line {number}, column {column}: {fields[column - 1].strip()!r} is not a "
                          "number") from None
    array = np.array(rows, dtype=np.float64)
    _finite(path, array, first_line=[number for number, _ in data])
    return array


def _fields(line: str, delimiter: str | None) -> list[str]:
    return line.split(delimiter) if delimiter else line.split()


def _finite(path: Path, array: np.ndarray, first_line: list[int] | None) -> None:
    """`BadFile` naming the first value that is NaN or infinite: its line (a text file) or row (a .npy), and
    column, counted from 1."""
    if array.dtype.kind != "f":
        return
    bad = np.argwhere(~np.isfinite(array))
    if bad.size:
        row, column = (int(v) for v in bad[0])
        where = f"line {first_line[row]}" if first_line is not None else f"row {row + 1} of {array.shape[0]}"
        raise BadFile(f"{path} {where}, column {column + 1}: {array[row, column]}; every value must be finite "
                      "(remove or impute the rows that are not)")


__all__ = ["BadFile", "load_table"]
