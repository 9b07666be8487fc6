"""The checkpoint files' format (`store.jobs.checkpoints`): the ``np.savez`` layout without pickles, the
encoding of a state's values, and the checks of a sharded checkpoint's parts against its manifest.
Every reader here verifies what it reads back (schema version, pass, bounds, keys, shapes, dtypes,
digests) and names the file it refuses.

Digests: every file written holds ``__sha256__``, a JSON object mapping each other member to the
sha256 of its dtype, shape and bytes (`member_digest`); a member read back is checked against it
(`CheckedArchive`). The *checkpoint digest* of a file is the sha256 of that JSON (sorted keys,
`checkpoint_digest`): what a job record names (``checkpoint.sha256``). A sharded manifest also holds
``__part_sha256__``, the checkpoint digest of each part in order, so the manifest's digest covers its
parts. Files written before digests were kept have no ``__sha256__`` and are read unchecked."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO

import numpy as np

from store.atomic import SCHEMA_VERSION
from store.npy import NpzArchive

_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_VERSION_KEY = "__schema_version__"
_PASS_KEY = "__pass__"
_FIRST_KEY = "__first__"
_STOP_KEY = "__stop__"
_PARTS_KEY = "__parts__"
_DIGEST_KEY = "__sha256__"
_PART_DIGESTS_KEY = "__part_sha256__"


def member_digest(array: np.ndarray) -> str:
    """sha256 hex digest of an array's dtype, shape and bytes (C order). Cost O(array bytes)."""
    digest = hashlib.sha256(f"{array.dtype.str}|{tuple(array.shape)}|".encode("ascii"))
    digest.update(np.ascontiguousarray(array).data)
    return digest.hexdigest()


def checkpoint_digest(digests: dict[str, str]) -> str:
    """The checkpoint digest of a file whose members have ``digests`` (module docstring). Cost O(members)."""
    return hashlib.sha256(json.dumps(digests, sort_keys=True).encode("ascii")).hexdigest()


class CheckedArchive:
    """An open ``.npz`` whose members are checked against its ``__sha256__`` when read.

    ``files`` lists the members but ``__sha256__``; ``archive[key]`` reads one and raises `ValueError`
    naming the file and the member if it does not match its digest; ``digest`` is the file's
    checkpoint digest (None for a file written before digests were kept). Cost: as ``np.load``'s
    members, plus one sha256 of each member read.
    """

    def __init__(self, archive, path: Path):
        self._archive, self._path = archive, path
        self.files = [key for key in archive.files if key != _DIGEST_KEY]
        self.digests = None
        if _DIGEST_KEY in archive.files:
            raw = archive[_DIGEST_KEY]
            digests = json.loads(str(raw.item())) if raw.ndim == 0 and raw.dtype.kind == "U" else None
            if not isinstance(digests, dict) or sorted(digests) != sorted(self.files):
                raise ValueError(f"{path}: its members {sorted(self.files)} do not match its {_DIGEST_KEY}")
            self.digests = digests
        self.digest = None if self.digests is None else checkpoint_digest(self.digests)

    def __getitem__(self, key: str) -> np.ndarray:
        array = self._archive[key]
        if self.digests is not None and member_digest(array) != self.digests.get(key):
            raise ValueError(f"{self._path}: member {key!r} does not match its sha256 (damaged)")
        return array


@contextlib.contextmanager
def open_checked(path: Path) -> Iterator[CheckedArchive]:
    """The ``.npz`` at ``path`` (`store.npy.NpzArchive`, no pickles) as a `CheckedArchive`; `FileNotFoundError`
    if it is missing."""
    with NpzArchive(path) as archive:
        yield CheckedArchive(archive, path)

def _check_bounds(first: object, stop: object) -> tuple[int, int]:
    bounds = []
    for label, value in (("first", first), ("stop", stop)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{label} must be an integer, got {type(value).__name__}")
        bounds.append(int(value))
    if not 0 <= bounds[0] < bounds[1]:
        raise ValueError(f"columns first={first}, stop={stop} must satisfy 0 <= first < stop")
    return bounds[0], bounds[1]


def _check_parts(parts: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """``parts`` as a list of int pairs, contiguous from 0, each non-empty."""
    try:
        bounds = [_check_bounds(*pair) for pair in parts]
    except TypeError as error:
        raise ValueError(f"parts must be a sequence of (first, stop) integer pairs: {error}") from None
    if not bounds:
        raise ValueError("parts must name at least one part")
    expected = 0
    for first, stop in bounds:
        if first != expected:
            raise ValueError(f"parts must be contiguous from 0 in order: part ({first}, {stop}) "
                             f"should start at {expected}")
        expected = stop
    return bounds


def _part_name(first: int, stop: int) -> str:
    return f"{first:012d}-{stop:012d}.npz"


def _inconsistent(path: Path, detail: str) -> ValueError:
    return ValueError(f"inconsistent checkpoint {path}: {detail}; delete it or resume from an earlier pass")


def _check_version(archive, path: Path) -> None:
    if _VERSION_KEY not in archive.files:
        raise ValueError(f"{path}: not a checkpoint (no {_VERSION_KEY})")
    version = int(archive[_VERSION_KEY])
    if version > SCHEMA_VERSION:
        raise ValueError(f"{path}: unsupported schema_version {version}")


def _read_state(archive, skip=frozenset()) -> dict:
    """Every non-reserved member of an open checkpoint but those named in ``skip`` (left unread), 0-d
    arrays as Python scalars."""
    state = {}
    for key in archive.files:
        if key.startswith("__") or key in skip:
            continue
        value = archive[key]
        state[key] = value.item() if value.ndim == 0 else value
    return state


def _bounds_of(archive, path: Path) -> list[tuple[int, int]] | None:
    """The ``__parts__`` bounds of an open manifest (checked), or None for a plain checkpoint."""
    if _PARTS_KEY not in archive.files:
        return None
    recorded = archive[_PARTS_KEY]
    if recorded.ndim != 2 or recorded.shape[1] != 2 or recorded.dtype.kind not in "iu":
        raise _inconsistent(path, f"{_PARTS_KEY} has shape {recorded.shape} and dtype {recorded.dtype}")
    try:
        return _check_parts([(int(first), int(stop)) for first, stop in recorded])
    except ValueError as error:
        raise _inconsistent(path, str(error)) from None


@contextlib.contextmanager
def _open_part(path: Path, pass_index: int, first: int, stop: int,
               opener: Callable[[Path], NpzArchive] = NpzArchive) -> Iterator[CheckedArchive]:
    """An open part file (``opener(path)``: `store.jobs.checkpoint_places`), checked to record ``pass_index``,
    ``first`` and ``stop``."""
    try:
        loaded = opener(path)
    except FileNotFoundError:
        raise _inconsistent(path, "the part is missing") from None
    with loaded:
        archive = CheckedArchive(loaded, path)
        _check_version(archive, path)
        for key, expected in ((_PASS_KEY, pass_index), (_FIRST_KEY, first), (_STOP_KEY, stop)):
            if key not in archive.files:
                raise _inconsistent(path, f"the part records no {key}")
            recorded = archive[key]
            if recorded.ndim != 0 or recorded.dtype.kind not in "iu" or int(recorded) != expected:
                raise _inconsistent(path, f"the part records {key} = {recorded!r}, expected {expected}")
        yield archive


def _check_part_keys(path: Path, keys: set[str], expected: set[str] | None) -> None:
    if expected is not None and keys != expected:
        raise _inconsistent(path, f"the part has keys {sorted(keys)}, the previous parts {sorted(expected)}")


def _check_part_array(path: Path, key: str, array: np.ndarray, like: np.ndarray | None, width: int) -> None:
    """``array`` (of a part ``width`` columns wide) has that last axis and matches ``like`` (another part's)."""
    if array.ndim == 0 or array.shape[-1] != width:
        raise _inconsistent(path, f"{key!r} has shape {array.shape}, expected a last axis of {width}")
    if like is not None and (array.dtype != like.dtype or array.shape[:-1] != like.shape[:-1]):
        raise _inconsistent(path, f"{key!r} has dtype {array.dtype} and shape {array.shape}, another part "
                                  f"{like.dtype} and {like.shape}")


def _slice_columns(path: Path, archive, key: str, first: int, stop: int) -> np.ndarray:
    """Columns [first, stop) of member ``key`` of an open plain checkpoint, copied."""
    if key.startswith("__") or key not in archive.files:
        raise ValueError(f"{path}: no array {key!r}")
    array = archive[key]
    if array.ndim == 0 or stop > array.shape[-1]:
        raise ValueError(f"{path}: columns first={first}, stop={stop} are out of range for {key!r} "
                         f"of shape {array.shape}")
    return np.ascontiguousarray(array[..., first:stop])


def _check_keys(state: dict) -> dict:
    if not isinstance(state, dict):
        raise TypeError(f"state must be a dict, got {type(state).__name__}")
    for key in state:
        if not isinstance(key, str) or not _KEY.fullmatch(key) or key.startswith("__"):
            raise ValueError(
                f"state key {key!r}: use letters, digits, '_', '.', '-' and do not start with '__'"
            )
    return state


def _encode(key: str, value: object) -> np.ndarray:
    """A state value as the array stored for it (scalars as 0-d arrays)."""
    if isinstance(value, bool):
        return np.asarray(value, dtype=np.bool_)
    if isinstance(value, int):
        if -(2**63) <= value < 2**63:
            return np.asarray(value, dtype=np.int64)
        if 0 <= value < 2**64:
            return np.asarray(value, dtype=np.uint64)
        raise ValueError(f"state[{key!r}] = {value} does not fit in 64 bits; store it as an array of words")
    if isinstance(value, float):
        return np.asarray(value, dtype=np.float64)
    if isinstance(value, str):
        return np.asarray(value, dtype=np.str_)
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.dtype.hasobject:
            raise TypeError(f"state[{key!r}] has an object dtype, which cannot be stored without pickles")
        return array
    raise TypeError(
        f"state[{key!r}] is a {type(value).__name__}; use a numpy array or an int, float, bool or str"
    )


def _write_npz(handle: IO[bytes], arrays: dict[str, np.ndarray]) -> str:
    """The ``np.savez`` layout (stored zip of ``{key}.npy`` members), without its keyword-name clashes,
    plus ``__sha256__`` (module docstring); the file's checkpoint digest. Cost O(bytes) written and hashed."""
    digests = {key: member_digest(array) for key, array in arrays.items()}
    with zipfile.ZipFile(handle, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for key, array in [*arrays.items(), (_DIGEST_KEY, np.asarray(json.dumps(digests, sort_keys=True)))]:
            with archive.open(f"{key}.npy", mode="w", force_zip64=True) as member:
                np.lib.format.write_array(member, array, allow_pickle=False)
    return checkpoint_digest(digests)


def _check_expected(archive: CheckedArchive, path: Path, expect: str | None) -> None:
    """ValueError unless the open checkpoint's digest is ``expect`` (when given)."""
    if expect is not None and archive.digest != expect:
        raise ValueError(f"{path}: its digest {archive.digest} is not the {expect} its record names")


def _part_digests(archive: CheckedArchive, bounds) -> list[str] | None:
    """The parts' checkpoint digests a manifest records (None for a plain checkpoint or an older manifest)."""
    if bounds is None or _PART_DIGESTS_KEY not in archive.files:
        return None
    recorded = [str(d) for d in archive[_PART_DIGESTS_KEY]]
    if len(recorded) != len(bounds):
        raise ValueError(f"{_PART_DIGESTS_KEY} names {len(recorded)} parts, {_PARTS_KEY} {len(bounds)}")
    return recorded


def _check_part_digest(path: Path, part: CheckedArchive, recorded: list[str] | None, number: int) -> None:
    if recorded is not None and part.digest != recorded[number]:
        raise _inconsistent(path, "the part is not the one its manifest names (its digest differs)")
