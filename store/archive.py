"""A completed model as one portable archive: export (streamed) and import (verified, then atomic).

The archive is an uncompressed POSIX tar (PAX headers) of four regular files,
in this order::

    model.json       the model's record (`store.records.ModelRecord` document: configuration, history)
    checkpoint.npz   the checkpoint it serves from (its latest pass; a sharded one joined from its parts)
    rows.npy         the training rows: its data set version, (n_rows, n_features) in the set's dtype
    manifest.json    format and version, names, the data set version's chunk row counts and checksum,
                     and the size and sha256 of every other member

Only the served checkpoint travels (`workers.serve` serves the latest pass,
and a resume continues from it): older and "best" checkpoints are not needed
to serve, and the record keeps the whole history. The rows travel because a
kernel expansion is evaluated against them; their chunk row counts travel
too, so that the imported data set has the same version checksum
(`store.checksums` hashes chunk by chunk).

`ModelExport` streams the archive without building it in memory (the rows are
read chunk by chunk; a sharded checkpoint is joined once into an anonymous
temporary file). The manifest comes last because it holds the digests of the
members streamed before it; its size is fixed in advance (digests are 64 hex
characters), so the archive's total size is known before the first byte.

`import_archive` verifies everything before it creates anything: member names
(only the four above: no paths, links or duplicates), sizes and sha256 against
the manifest, the format version, the record, the checkpoint (it must serve
the record's components over the rows: one projection is computed), and the
rows' version checksum. Then it creates (or reuses, by checksum) the data set
and claims the model's name with the checkpoint already in place, so that the
model appears completed and servable at once; a failure on the way removes
what it created.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import shutil
import tarfile
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
from numpy.lib import format as npy_format
from pydantic import ValidationError

from store.atomic import SCHEMA_VERSION, fsync_dir, remove_tree
from store.checkpoint_format import _PARTS_KEY, _VERSION_KEY, _encode, _write_npz
from store.checkpoints import CheckpointStore
from store.checksums import chunk_digest, version_checksum
from store.datasets import DatasetStore
from store.errors import Conflict, Invalid, NotFound
from store.models import ModelRegistry
from store.names import validate_name
from store.records import ModelRecord, migrate
from store.timestamps import utc_now

FORMAT = "kpca-stream-model"
FORMAT_VERSION = 1
MEDIA_TYPE = "application/x-tar"
RECORD, CHECKPOINT, ROWS, MANIFEST = "model.json", "checkpoint.npz", "rows.npy", "manifest.json"
MEMBERS = (RECORD, CHECKPOINT, ROWS, MANIFEST)
#: largest JSON member accepted on import
MAX_JSON_BYTES = 16 * 2**20
_BLOCK = tarfile.BLOCKSIZE
_COPY_BYTES = 2**20
_MTIME = 0
FIELD = "body"


# ------------------------------------------------------------------ export
@dataclass
class _Member:
    name: str
    size: int
    chunks: object  # callable () -> iterator of bytes
    digest: str | None = None


def _tar_header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode, info.type = size, _MTIME, 0o644, tarfile.REGTYPE
    return info.tobuf(format=tarfile.PAX_FORMAT)


def _padding(size: int) -> bytes:
    return b"\0" * (-size % _BLOCK)


class ModelExport:
    """The archive of completed model ``name`` under data folder ``root``, ready to stream.

    Creating it checks that the model can be exported and opens what it
    streams (the checkpoint file; a sharded checkpoint is joined into an
    anonymous temporary file under ``root``), so that the refusals (`NotFound`,
    `Conflict`) come before the first byte. ``size`` is the archive's length;
    iterating yields its bytes (memory: one row chunk or 1 MiB); `close`
    releases the files. Cost: O(checkpoint bytes + rows bytes) read and hashed
    once while streaming.
    """

    def __init__(self, root: Path | str, name: str):
        root = Path(root)
        registry = ModelRegistry(root)
        record = registry.get(name)
        if record.status != "completed":
            raise Conflict(f"model {name!r} is {record.status!r}: only a completed model can be exported; "
                           f"wait for its fit to end (GET /v1/models/{name}), or resume it "
                           f"(POST /v1/models/{name}/resume) and export it when it completes", field="name")
        checkpoints = CheckpointStore.of(registry)
        latest = checkpoints.latest_pass(name)
        if latest is None:
            raise Conflict(f"model {name!r} has no checkpoint to export", field="name")
        datasets = DatasetStore(root)
        try:
            meta = datasets.get(record.dataset)
        except NotFound:
            raise Conflict(f"data set {record.dataset!r} of model {name!r} has been deleted, and the archive "
                           "must carry the training rows; it cannot be exported", field="name") from None
        version, ranges = datasets.chunk_ranges(record.dataset, record.dataset_version or meta["version"])
        described = next(v for v in meta["versions"] if v["version"] == version)
        self.rows = datasets.open_array(record.dataset, version)
        self.name, self.pass_index, self.ranges = name, latest, ranges
        self._checkpoint = self._open_checkpoint(root, checkpoints, name, latest)
        dtype = np.dtype(self.rows.dtype)
        n_rows, n_features = (int(s) for s in self.rows.shape)
        header = io.BytesIO()
        npy_format.write_array_header_1_0(header, {"descr": npy_format.dtype_to_descr(dtype),
                                                   "fortran_order": False, "shape": (n_rows, n_features)})
        self._rows_header = header.getvalue()
        self.dataset = {"name": record.dataset, "version": version, "checksum": described["checksum"],
                        "n_rows": n_rows, "n_features": n_features, "dtype": dtype.name,
                        "chunk_rows": [stop - start for start, stop in ranges]}
        record_bytes = json.dumps(record.document(), indent=1).encode("utf-8")
        checkpoint_size = os.fstat(self._checkpoint.fileno()).st_size
        self._members = [
            _Member(RECORD, len(record_bytes), lambda: iter([record_bytes])),
            _Member(CHECKPOINT, checkpoint_size, self._checkpoint_chunks),
            _Member(ROWS, len(self._rows_header) + n_rows * n_features * dtype.itemsize, self._rows_chunks),
        ]
        manifest_size = len(self._manifest(placeholder=True))
        self.size = sum(len(_tar_header(m.name, m.size)) + m.size + len(_padding(m.size)) for m in self._members)
        self.size += len(_tar_header(MANIFEST, manifest_size)) + manifest_size + len(_padding(manifest_size))
        self.size += 2 * _BLOCK
        self._manifest_size = manifest_size

    @staticmethod
    def _open_checkpoint(root: Path, checkpoints: CheckpointStore, name: str, pass_index: int) -> IO[bytes]:
        """The served checkpoint as an open file: the plain file itself (kept readable if a resume removes
        it meanwhile), or a sharded one joined into an anonymous temporary file."""
        if checkpoints.parts_of(name, pass_index) is None:
            path = root / "models" / name / "checkpoints" / f"pass-{pass_index:05d}.npz"
            try:
                return open(path, "rb")
            except FileNotFoundError:
                raise Conflict(f"model {name!r} changed while exporting; retry", field="name") from None
        state = checkpoints.load(name, pass_index)
        arrays = {key: _encode(key, value) for key, value in state.items()}
        arrays[_VERSION_KEY] = np.asarray(SCHEMA_VERSION, dtype=np.int64)
        handle = tempfile.TemporaryFile(dir=root)
        _write_npz(handle, arrays)
        handle.seek(0)
        return handle

    def _checkpoint_chunks(self) -> Iterator[bytes]:
        self._checkpoint.seek(0)
        while block := self._checkpoint.read(_COPY_BYTES):
            yield block

    def _rows_chunks(self) -> Iterator[bytes]:
        yield self._rows_header
        for start, stop in self.ranges:
            yield np.ascontiguousarray(self.rows[start:stop]).tobytes()

    def _manifest(self, placeholder: bool = False) -> bytes:
        members = [{"name": m.name, "size": m.size, "sha256": "0" * 64 if placeholder else m.digest}
                   for m in self._members]
        return json.dumps({"format": FORMAT, "format_version": FORMAT_VERSION, "model": self.name,
                           "pass": self.pass_index, "dataset": self.dataset, "members": members},
                          indent=1).encode("utf-8")

    def __iter__(self) -> Iterator[bytes]:
        try:
            for member in self._members:
                yield _tar_header(member.name, member.size)
                digest, written = hashlib.sha256(), 0
                for block in member.chunks():
                    digest.update(block)
                    written += len(block)
                    yield block
                if written != member.size:
                    raise RuntimeError(f"{member.name}: {written} bytes streamed, {member.size} announced")
                member.digest = digest.hexdigest()
                yield _padding(member.size)
            manifest = self._manifest()
            if len(manifest) != self._manifest_size:
                raise RuntimeError("the manifest's size changed while streaming")
            yield _tar_header(MANIFEST, len(manifest)) + manifest + _padding(len(manifest))
            yield b"\0" * (2 * _BLOCK)
        finally:
            self.close()

    def close(self) -> None:
        """Release the open checkpoint file (and remove a joined temporary one)."""
        self._checkpoint.close()

    def write_to(self, path: Path | str) -> None:
        """Write the whole archive to ``path`` (not atomically: a convenience for tests and tools)."""
        with open(path, "wb") as out:
            for block in self:
                out.write(block)


# ------------------------------------------------------------------ import
@dataclass
class _Verified:
    manifest: dict
    record: ModelRecord
    folder: Path  # holds the verified members


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
                digest, copied = hashlib.sha256(), 0
                with open(folder / info.name, "xb") as out:
                    while block := source.read(_COPY_BYTES):
                        digest.update(block)
                        copied += len(block)
                        out.write(block)
                if copied != info.size:
                    raise _refuse(f"member {info.name!r} is truncated ({copied} of {info.size} bytes)")
                found[info.name] = (copied, digest.hexdigest())
    except (tarfile.TarError, EOFError) as exc:
        raise _refuse(f"not a readable tar archive, or a truncated one ({exc})") from None
    missing = [m for m in MEMBERS if m not in found]
    if missing:
        raise _refuse(f"members {missing} are missing (truncated?); an archive holds {', '.join(MEMBERS)}")
    return found


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


def _open_rows(path: Path, dataset: dict) -> np.ndarray:
    """The rows member as a read-only memory map, its header checked against the manifest."""
    try:
        with open(path, "rb") as handle:
            version = npy_format.read_magic(handle)
            if version != (1, 0):
                raise ValueError(f".npy format version {version} is not 1.0")
            shape, fortran, dtype = npy_format.read_array_header_1_0(handle)
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


def _check_checkpoint(path: Path, record: ModelRecord, rows: np.ndarray, n_features: int) -> None:
    """The checkpoint must be a plain one that serves ``record``'s components over ``rows``: the served model
    is built and one row projected. Cost: loading the checkpoint, the solver's components and one kernel row."""
    from kpca.kernels import KernelSpec
    from kpca.model import served_model
    from kpca.rows import KernelRows

    if record.n_features is not None and record.n_features != n_features:
        raise _refuse(f"{RECORD} has n_features {record.n_features}, {ROWS} {n_features} columns")
    try:
        with np.load(path, allow_pickle=False) as archive:
            if _VERSION_KEY not in archive.files or _PARTS_KEY in archive.files:
                raise ValueError("not a plain checkpoint")
            state = {k: (archive[k].item() if archive[k].ndim == 0 else archive[k])
                     for k in archive.files if not k.startswith("__")}
    except Exception as exc:  # zipfile.BadZipFile, ValueError, KeyError...
        raise _refuse(f"{CHECKPOINT} is not a readable checkpoint ({exc})") from None
    if state.get("solver") not in (None, record.solver):
        raise _refuse(f"{CHECKPOINT} was written by solver {state.get('solver')!r}, {RECORD} says {record.solver!r}")
    try:
        kernel = KernelSpec.from_dict(record.fit_kernel)
        model = served_model(state, KernelRows(rows, kernel), kernel)
        projected = np.asarray(model.project(np.asarray(rows[:1], dtype=np.float64)))
    except Exception as exc:  # any mismatch of shapes or keys between the record, the checkpoint and the rows
        raise _refuse(f"{CHECKPOINT} does not serve {RECORD} over {ROWS}: {exc}") from None
    if projected.shape != (1, record.n_components) or not np.isfinite(projected).all():
        raise _refuse(f"{CHECKPOINT} serves {projected.shape[-1]} components, {RECORD} says {record.n_components}")


def verify_archive(path: Path | str, folder: Path) -> _Verified:
    """Extract the archive at ``path`` into the empty ``folder`` and verify it (module docstring);
    `Invalid` on field ``body`` naming what is wrong. Cost O(archive bytes) read, written and hashed,
    plus `_check_checkpoint`."""
    found = _extract(Path(path), folder)
    manifest = _read_json(folder, MANIFEST)
    _check_manifest(manifest, found)
    record = _check_record(_read_json(folder, RECORD))
    dataset = manifest["dataset"]
    rows = _open_rows(folder / ROWS, dataset)
    _check_rows(rows, dataset)
    _check_checkpoint(folder / CHECKPOINT, record, rows, dataset["n_features"])
    return _Verified(manifest, record, folder)


def _matching_version(meta: dict, dataset: dict) -> int | None:
    """The version of an existing data set (its metadata) holding exactly the archive's rows, or None."""
    if meta.get("dtype") != dataset["dtype"] or meta.get("n_features") != dataset["n_features"]:
        return None
    for version in meta.get("versions") or ():
        if version.get("checksum") == dataset["checksum"]:
            return int(version["version"])
    return None


def _create_dataset(datasets: DatasetStore, name: str, rows: np.ndarray, dataset: dict) -> dict:
    """A new data set ``name`` holding ``rows`` as version 1, cut into the archive's chunks. Cost O(rows)."""
    try:
        datasets.create(name, dataset["n_features"], dataset["dtype"])
    except Conflict:
        raise Conflict(f"data set {name!r} was created meanwhile; import again", field="dataset") from None
    try:
        start = 0
        for index, count in enumerate(dataset["chunk_rows"]):
            datasets.put_chunk(name, index, np.asarray(rows[start:start + count]))
            start += count
        meta = datasets.commit(name)
        if meta["checksum"] != dataset["checksum"]:
            raise RuntimeError(f"data set {name!r} was committed with checksum {meta['checksum']}, the archive's "
                               f"is {dataset['checksum']}")
        return meta
    except BaseException:
        with contextlib.suppress(NotFound):
            datasets.delete(name)
        raise


def import_archive(root: Path | str, path: Path | str, name: str | None = None, dataset: str | None = None,
                   owner: str | None = None) -> ModelRecord:
    """Import the model archive at ``path`` into data folder ``root``: the stored, completed record.

    ``name`` (default the archive's model name) names the model; ``dataset``
    (default the archive's data set name) the data set of its training rows:
    an existing set holding the same rows (same version checksum) is reused,
    else a new one is created. ``owner`` is recorded as the model's owner.

    Raises
    ------
    Invalid
        Field ``body``: the archive is refused (module docstring), the message says why; field
        ``name`` / ``dataset``: a bad name.
    Conflict
        Field ``name``: a model of that name exists. Field ``dataset``: a data set of that name exists
        with other rows.

    Notes
    -----
    Everything is verified in a hidden folder ``root/.imports/{hex}`` before anything is created; that
    folder is always removed. A new data set is deleted again if the model cannot be claimed. Cost: the
    archive's bytes read about three times (extract and hash, verify, upload as chunks) plus one
    commit of the rows.
    """
    root = Path(root)
    registry, datasets = ModelRegistry(root), DatasetStore(root)
    work = root / ".imports" / uuid.uuid4().hex
    work.mkdir(parents=True)
    created_dataset = None
    try:
        verified = verify_archive(path, work)
        manifest, source = verified.manifest, verified.manifest["dataset"]
        model_name = validate_name(name if name is not None else verified.record.name, field="name")
        dataset_name = validate_name(dataset if dataset is not None else source["name"], field="dataset")
        with contextlib.suppress(NotFound):
            registry.get(model_name)
            raise Conflict(f"model {model_name!r} already exists; import under another name (name=...) or "
                           "delete it first", field="name")
        rows = _open_rows(work / ROWS, source)
        try:
            meta = datasets.get(dataset_name)
        except NotFound:
            meta = None
        if meta is not None:
            version = _matching_version(meta, source)
            if version is None:
                raise Conflict(f"data set {dataset_name!r} exists and holds other rows than the archive's "
                               "(no version with the same checksum); import with dataset=ANOTHER_NAME",
                               field="dataset")
        else:
            meta = _create_dataset(datasets, dataset_name, rows, source)
            created_dataset, version = dataset_name, 1
        del rows
        now = utc_now()
        record = verified.record.model_copy(update={
            "name": model_name, "dataset": dataset_name, "dataset_version": version,
            "dataset_checksum": source["checksum"], "n_features": source["n_features"], "owner": owner,
            "created_at": now, "updated_at": now})
        folder = registry.folders.path(model_name)
        target = folder / "checkpoints" / f"pass-{manifest['pass']:05d}.npz"

        def place_checkpoint() -> Path:
            remove_tree(folder / "checkpoints")  # leftovers of an earlier model of that name
            target.parent.mkdir()
            os.rename(work / CHECKPOINT, target)
            fsync_dir(target.parent)
            return target

        try:
            registry.folders.claim(model_name, registry.document, record.document(), before=place_checkpoint,
                                   under_lock=True, attempts=5)
        except Conflict as exc:
            raise Conflict(f"{exc.message}; import under another name (name=...) or delete it first"
                           if "already exists" in exc.message else exc.message, field="name") from None
        created_dataset = None
        return registry.get(model_name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if created_dataset is not None:
            with contextlib.suppress(NotFound):
                datasets.delete(created_dataset)
