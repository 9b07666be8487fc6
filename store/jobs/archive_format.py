"""The model archive's format and its verification on import (`store.jobs.archive`): member names, sizes and
sha256 against the manifest, the format version, the record, the rows against their data set checksum,
and the checkpoint against both: before any of its arrays is read, every member's declared shape and
dtype against its stored bytes, uncompressed, and all of them under a size limit set by the record
(`state_limit`: no zip bomb inflates); then a plain checkpoint of the record's solver over the rows'
width whose members match their digests, which must serve the record's components over the rows. That last check
runs the numerics, so the caller
passes it in (``check_served``, `workers.archive.check_served`); the store only reads the checkpoint.
Every refusal is `store.errors.Invalid` on field ``body`` saying what is wrong."""

from __future__ import annotations

import hashlib
import json
import math
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from store.checksums import chunk_digest, version_checksum
from store.errors import Invalid
from store.jobs.checkpoint_format import _PARTS_KEY, _VERSION_KEY, open_checked
from store.jobs.records import ModelRecord, migrate
from store.npy import read_header

FORMAT = "kpca-stream-model"
FORMAT_VERSION = 1
MEDIA_TYPE = "application/x-tar"
RECORD, CHECKPOINT, ROWS, MANIFEST = "model.json", "checkpoint.npz", "rows.npy", "manifest.json"
MEMBERS = (RECORD, CHECKPOINT, ROWS, MANIFEST)
#: largest JSON member accepted on import
MAX_JSON_BYTES = 16 * 2**20
COPY_BYTES = 2**20
FIELD = "body"
#: ``check_served(state, record, rows)``: raises ValueError, saying why, unless the checkpoint's state
#: serves ``record``'s components over ``rows`` (`workers.archive.check_served`)
ServedCheck = Callable[[dict, ModelRecord, np.ndarray], None]

@dataclass
class Verified:
    manifest: dict
    record: ModelRecord
    folder: Path  # holds the verified members
    checkpoint_sha256: str | None = None  # the checkpoint's digest (store.jobs.checkpoint_format)


def _refuse(message: str) -> Invalid:
    return Invalid(FIELD, f"archive refused: {message}")


def _check_member(info: tarfile.TarInfo, seen: set[str]) -> None:
    name = info.name
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise _refuse(f"member {name!r} has an absolute path; members are plain names ({', '.join(MEMBERS)})")
    if ".." in name.replace("\\", "/").split("/"):
        raise _refuse(f"member {name!r} reaches outside the archive ('..'); members are plain names")
    if info.issym() or info.islnk():
        raise _refuse(f"member {name!r} is a link (to {info.linkname!r}); only regular files are accepted")
    if not info.isreg():
        raise _refuse(f"member {name!r} is not a regular file")
    if name not in MEMBERS:
        raise _refuse(f"unexpected member {name!r}; an archive holds exactly {', '.join(MEMBERS)}")
    if name in seen:
        raise _refuse(f"member {name!r} appears twice")
    if name.endswith(".json") and info.size > MAX_JSON_BYTES:
        raise _refuse(f"member {name!r} is {info.size} bytes, more than {MAX_JSON_BYTES}")
    seen.add(name)


def _extract(path: Path, folder: Path) -> dict[str, tuple[int, str]]:
    """Copy the members of the tar at ``path`` into ``folder`` (checked by `_check_member`); their size and
    sha256. Cost O(archive bytes); memory 1 MiB."""
    found: dict[str, tuple[int, str]] = {}
    try:
        with tarfile.open(path, mode="r:") as archive:
            seen: set[str] = set()
            for info in archive:
                _check_member(info, seen)
                source = archive.extractfile(info)
                assert source is not None, "_check_member lets regular files only through"
                digest, copied = hashlib.sha256(), 0
                with open(folder / info.name, "xb") as out:
                    while block := source.read(COPY_BYTES):
                        digest.update(block)
                        copied += len(block)
                        out.write(block)
                if copied != info.size:
                    raise _refuse(f"member {info.name!r} is truncated ({copied} of {info.size} bytes)")
                found[info.name] = (copied, digest.hexdigest())
            _check_end(path, archive.offset)
    except (tarfile.TarError, EOFError) as exc:
        raise _refuse(f"not a readable tar archive, or a truncated one ({exc})") from None
    missing = [m for m in MEMBERS if m not in found]
    if missing:
        raise _refuse(f"members {missing} are missing (truncated?); an archive holds {', '.join(MEMBERS)}")
    return found


def _check_end(path: Path, offset: int) -> None:
    """After the last member (at ``offset``) a tar holds only its end, zero blocks: anything else (a
    truncated header of one more member, which `tarfile` takes for the end and skips) is refused. Cost:
    a read of the bytes after the last member (its end: 1 KiB from an export)."""
    with open(path, "rb") as handle:
        handle.seek(offset)
        while block := handle.read(COPY_BYTES):
            if block.count(0) != len(block):
                raise _refuse(f"bytes after the last member at offset {offset} are not the archive's end (zero "
                              "blocks): a truncated or damaged member follows; export the model again")


def _read_json(folder: Path, member: str) -> dict:
    try:
        doc = json.loads((folder / member).read_text("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _refuse(f"{member} is not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise _refuse(f"{member} is not a JSON object")
    return doc


def _check_manifest(manifest: dict, found: dict[str, tuple[int, str]]) -> None:
    if manifest.get("format") != FORMAT:
        raise _refuse(f"{MANIFEST}: format is {manifest.get('format')!r}, not {FORMAT!r}")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise _refuse(f"{MANIFEST}: format_version {version!r} is not supported (this service reads version "
                      f"{FORMAT_VERSION}); export the model again with a matching kpca-stream")
    listed = manifest.get("members")
    if not isinstance(listed, list) or not all(isinstance(m, dict) for m in listed):
        raise _refuse(f"{MANIFEST}: members must be a list of {{name, size, sha256}}")
    names = [m.get("name") for m in listed]
    if sorted(names, key=str) != sorted(m for m in MEMBERS if m != MANIFEST):
        raise _refuse(f"{MANIFEST}: members lists {names}, expected {[m for m in MEMBERS if m != MANIFEST]}")
    for entry in listed:
        size, digest = found[entry["name"]]
        if entry.get("size") != size:
            raise _refuse(f"member {entry['name']!r} has {size} bytes, the manifest says {entry.get('size')!r}")
        if entry.get("sha256") != digest:
            raise _refuse(f"member {entry['name']!r} does not match its sha256 in the manifest (damaged or "
                          "altered); export the model again")
    dataset = manifest.get("dataset")
    keys = ("name", "version", "checksum", "n_rows", "n_features", "dtype", "chunk_rows")
    if not isinstance(dataset, dict) or any(k not in dataset for k in keys):
        raise _refuse(f"{MANIFEST}: dataset must hold {', '.join(keys)}")
    chunk_rows = dataset["chunk_rows"]
    if not isinstance(chunk_rows, list) or not chunk_rows or \
            not all(isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in chunk_rows):
        raise _refuse(f"{MANIFEST}: dataset.chunk_rows must be a list of positive integers")
    if not isinstance(manifest.get("pass"), int) or not 0 <= manifest["pass"] < 10**9:
        raise _refuse(f"{MANIFEST}: pass must be an integer from 0")


def _check_record(doc: dict) -> ModelRecord:
    try:
        record = ModelRecord.model_validate(migrate(doc))
    except (ValidationError, TypeError, ValueError) as exc:
        raise _refuse(f"{RECORD} is not a valid model record: {exc}") from None
    if record.status != "completed":
        raise _refuse(f"{RECORD}: status is {record.status!r}; only completed models are imported")
    return record


def open_rows(path: Path, dataset: dict) -> np.ndarray:
    """The rows member as a read-only memory map, its header checked against the manifest."""
    try:
        with open(path, "rb") as handle:
            shape, fortran, dtype = read_header(handle, versions=((1, 0),))  # in any thread (store.npy)
            offset = handle.tell()
    except Exception as exc:  # ValueError, EOFError, SyntaxError: not a .npy header
        raise _refuse(f"{ROWS} is not a .npy array ({exc})") from None
    expected = (dataset["n_rows"], dataset["n_features"])
    if fortran or dtype.name != dataset["dtype"] or dtype.name not in ("float32", "float64") or shape != expected:
        raise _refuse(f"{ROWS} holds {dtype} {shape}{' (Fortran order)' if fortran else ''}; the manifest says "
                      f"{dataset['dtype']} {expected}")
    if offset + math.prod(shape) * dtype.itemsize != path.stat().st_size:
        raise _refuse(f"{ROWS} has {path.stat().st_size - offset} data bytes, not {math.prod(shape) * dtype.itemsize}")
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)


def _check_rows(rows: np.ndarray, dataset: dict) -> None:
    """The rows' chunk row counts and version checksum against the manifest; finite values. Cost O(rows)."""
    if sum(dataset["chunk_rows"]) != rows.shape[0]:
        raise _refuse(f"{MANIFEST}: dataset.chunk_rows add up to {sum(dataset['chunk_rows'])}, not the "
                      f"{rows.shape[0]} rows of {ROWS}")
    digests, start = [], 0
    for count in dataset["chunk_rows"]:
        chunk = np.asarray(rows[start:start + count])
        if not np.isfinite(chunk).all():
            raise _refuse(f"{ROWS}: rows {start} to {start + count - 1} contain NaN or infinity")
        digests.append(chunk_digest(chunk))
        start += count
    if version_checksum(digests) != dataset["checksum"]:
        raise _refuse(f"{ROWS} does not match the data set checksum in the manifest")


#: a checkpoint's members may hold at most this many bytes per (r + 2) x (l + n + n^2 + 2) of its model
#: (r components, l rows, n features): generous for every solver's state, and still a bound
STATE_BYTES_PER_CELL = 512
STATE_BYTES_FLOOR = 16 * 2**20


def state_limit(record: ModelRecord, dataset: dict) -> int:
    """The most bytes a checkpoint's members may hold once read, for ``record``'s model over the manifest's
    ``dataset`` (module constants). Cost O(1)."""
    r, l, n = record.n_components, dataset["n_rows"], dataset["n_features"]
    return STATE_BYTES_FLOOR + STATE_BYTES_PER_CELL * (r + 2) * (l + n + n * n + 2)


def _check_members(path: Path, record: ModelRecord, dataset: dict) -> None:
    """Before any array is read: every member of the checkpoint must be stored uncompressed (so that it
    inflates to exactly its stored bytes), be a ``.npy`` whose header's shape and dtype account for
    exactly those bytes (no objects), and all of them together stay under `state_limit`. Cost: the
    zip's directory and each member's header (a few hundred bytes each)."""
    limit, total = state_limit(record, dataset), 0
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                name = info.filename
                where = f"{CHECKPOINT}: member {name!r}"
                if info.file_size > limit - total:
                    raise _refuse(f"{where} declares {info.file_size} bytes once inflated; a checkpoint of "
                                  f"{record.n_components} components over {dataset['n_rows']} rows of "
                                  f"{dataset['n_features']} features holds at most {limit} bytes in all")
                if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
                    raise _refuse(f"{where} is compressed (it would inflate from {info.compress_size} to "
                                  f"{info.file_size} bytes); checkpoints are stored uncompressed, at most "
                                  f"{limit} bytes in all")
                with archive.open(info) as member:
                    shape, _fortran, dtype = read_header(member)  # in any thread (store.npy)
                    header_bytes = member.tell()
                if dtype.hasobject:
                    raise _refuse(f"{where} holds Python objects ({dtype}); a checkpoint holds numbers and text")
                declared = math.prod(shape) * dtype.itemsize
                if header_bytes + declared != info.file_size:
                    raise _refuse(f"{where} declares {dtype} {tuple(shape)} ({declared} bytes) but stores "
                                  f"{info.file_size - header_bytes} bytes")
                total += info.file_size
    except Invalid:
        raise
    except Exception as exc:  # zipfile.BadZipFile, ValueError of a .npy header...
        raise _refuse(f"{CHECKPOINT} is not a readable checkpoint ({exc})") from None


def _check_checkpoint(path: Path, record: ModelRecord, rows: np.ndarray, dataset: dict,
                      check_served: ServedCheck) -> str | None:
    """The checkpoint must be a plain one, of ``record``'s solver, whose members are what they declare
    (`_check_members`, before any is read) and match their digests, and that serves ``record``'s
    components over ``rows`` (``check_served``; its ValueError is the refusal). Its checkpoint digest
    (None for a file without digests). Cost: `_check_members`, loading the checkpoint, ``check_served``."""
    n_features = dataset["n_features"]
    if record.n_features is not None and record.n_features != n_features:
        raise _refuse(f"{RECORD} has n_features {record.n_features}, {ROWS} {n_features} columns")
    _check_members(path, record, dataset)
    try:
        with open_checked(path) as archive:
            if _VERSION_KEY not in archive.files or _PARTS_KEY in archive.files:
                raise ValueError("not a plain checkpoint")
            entries = {}  # the checkpoint's encoding of a solver state (`kpca.solvers.SolverState.to_checkpoint`)
            for key in archive.files:
                if not key.startswith("__"):
                    value = archive[key]
                    entries[key] = value.item() if value.ndim == 0 else value
            digest = archive.digest
    except Exception as exc:  # zipfile.BadZipFile, ValueError, KeyError...
        raise _refuse(f"{CHECKPOINT} is not a readable checkpoint ({exc})") from None
    solver = entries.get("solver")
    if solver not in (None, record.solver):
        raise _refuse(f"{CHECKPOINT} was written by solver {solver!r}, {RECORD} says {record.solver!r}")
    try:
        check_served(entries, record, rows)
    except ValueError as exc:
        raise _refuse(str(exc)) from None
    return digest


def verify_archive(path: Path | str, folder: Path, check_served: ServedCheck) -> Verified:
    """Extract the archive at ``path`` into the empty ``folder`` and verify it (module docstring), the
    checkpoint's serving by ``check_served``; `Invalid` on field ``body`` naming what is wrong. Cost
    O(archive bytes) read, written and hashed, plus `_check_checkpoint`."""
    found = _extract(Path(path), folder)
    manifest = _read_json(folder, MANIFEST)
    _check_manifest(manifest, found)
    record = _check_record(_read_json(folder, RECORD))
    dataset = manifest["dataset"]
    rows = open_rows(folder / ROWS, dataset)
    _check_rows(rows, dataset)
    digest = _check_checkpoint(folder / CHECKPOINT, record, rows, dataset, check_served)
    return Verified(manifest, record, folder, digest)
