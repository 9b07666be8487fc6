"""A completed model as one portable archive: export (streamed) and import (verified, then atomic).

The archive is an uncompressed POSIX tar (PAX headers) of four regular files,
in this order::

    model.json       the model's record (`store.jobs.records.ModelRecord` document: configuration, history)
    checkpoint.npz   the checkpoint it serves from (the pass its record names; a sharded one joined)
    rows.npy         the training rows: its data set version, (n_rows, n_features) in the set's dtype
    manifest.json    format and version, names, the data set version's chunk row counts and checksum,
                     and the size and sha256 of every other member

Only the served checkpoint travels (`workers.serve` serves the pass the
record names, and a resume continues from it): older and "best" checkpoints are not needed
to serve, and the record keeps the whole history. The rows travel because a
kernel expansion is evaluated against them; their chunk row counts travel
too, so that the imported data set has the same version checksum
(`store.checksums` hashes chunk by chunk).

`ModelExport` streams the archive without building it in memory (the rows are
read chunk by chunk; a sharded checkpoint is joined once into an anonymous
temporary file). The manifest comes last because it holds the digests of the
members streamed before it; its size is fixed in advance (digests are 64 hex
characters), so the archive's total size is known before the first byte.

`import_archive` verifies everything before it creates anything
(`store.jobs.archive_format.verify_archive`): member names
(only the four above: no paths, links or duplicates), sizes and sha256 against
the manifest, the format version, the record, the checkpoint (every member's
declared shape and dtype against its stored bytes and a size limit before any
array is read, then its digests; it must serve the record's components over
the rows: the caller's ``check_served`` computes one projection,
`workers.archive.import_model` passes it), and the rows' version checksum.
Then it creates (or reuses, by checksum) the data set and claims the model's
name with the checkpoint already in place, so that the model appears completed
and servable at once; the record names that checkpoint (pass and digest) and
keeps no ``error`` text, whatever the archive's said. A failure on the way
removes what it created.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
from numpy.lib import format as npy_format

from store.atomic import SCHEMA_VERSION, fsync_dir, remove_tree
from store.datasets.open import Datasets, datasets_at
from store.datasets.records import DatasetInfo
from store.errors import Conflict, DamagedCheckpoint, NotFound
from store.jobs.archive_format import (
    CHECKPOINT,
    COPY_BYTES,
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    MEDIA_TYPE,
    MEMBERS,
    RECORD,
    ROWS,
    ServedCheck,
    open_rows,
    verify_archive,
)
from store.jobs.checkpoint_format import _VERSION_KEY, _encode, _write_npz
from store.jobs.checkpoints import CheckpointStore
from store.jobs.object_registry import ObjectJobRegistry
from store.jobs.open import Models, checkpoints_of, models_at
from store.jobs.records import CheckpointRef, ModelRecord
from store.names import validate_name
from store.objects.open import local_folder
from store.timestamps import utc_now

__all__ = ["MEDIA_TYPE", "MEMBERS", "ModelExport", "import_archive", "verify_archive"]

_BLOCK = tarfile.BLOCKSIZE
_MTIME = 0


# ------------------------------------------------------------------ export
@dataclass
class _Member:
    name: str
    size: int
    chunks: Callable[[], Iterator[bytes]]
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
    `Conflict`, and `DamagedCheckpoint` for a checkpoint missing or failing the
    digest its record names) come before the first byte. ``size`` is the archive's length;
    iterating yields its bytes (memory: one row chunk or 1 MiB); `close`
    releases the files. Cost: O(checkpoint bytes) read and hashed to verify it,
    then O(checkpoint bytes + rows bytes) read and hashed once while streaming.
    """

    def __init__(self, root: Path | str, name: str):
        where = str(root)
        registry = models_at(where)
        record = registry.get(name)
        if record.status != "completed":
            raise Conflict(f"model {name!r} is {record.status!r}: only a completed model can be exported; "
                           f"wait for its fit to end (GET /v1/models/{name}), or resume it "
                           f"(POST /v1/models/{name}/resume) and export it when it completes", field="name")
        checkpoints = checkpoints_of(registry)
        latest = record.checkpoint.pass_ if record.checkpoint is not None else checkpoints.latest_pass(name)
        if latest is None:
            raise Conflict(f"model {name!r} has no checkpoint to export", field="name")
        try:  # the archive must not carry damage: read the checkpoint back against its digests first
            checkpoints.verify(name, latest, record.checkpoint.sha256 if record.checkpoint is not None else None)
        except NotFound:
            raise DamagedCheckpoint(f"model {name!r} completed with its checkpoint of pass {latest}, which is "
                                    "missing; it cannot be exported. Resume the fit (it goes back to its last "
                                    "intact checkpoint) or fit it again", field="name",
                                    cause="FileNotFoundError") from None
        datasets = datasets_at(where)
        try:
            meta = datasets.get(record.dataset)
        except NotFound:
            raise Conflict(f"data set {record.dataset!r} of model {name!r} has been deleted, and the archive "
                           "must carry the training rows; it cannot be exported", field="name") from None
        version, ranges = datasets.chunk_ranges(record.dataset, record.dataset_version or meta.version)
        described = next(v for v in meta.versions if v.version == version)
        self.rows = datasets.open_array(record.dataset, version)
        self.name, self.pass_index, self.ranges = name, latest, ranges
        self._checkpoint = self._open_checkpoint(local_folder(where), checkpoints, name, latest)
        dtype = np.dtype(self.rows.dtype)
        n_rows, n_features = (int(s) for s in self.rows.shape)
        header = io.BytesIO()
        npy_format.write_array_header_1_0(header, {"descr": npy_format.dtype_to_descr(dtype),
                                                   "fortran_order": False, "shape": (n_rows, n_features)})
        self._rows_header = header.getvalue()
        self.dataset = {"name": record.dataset, "version": version, "checksum": described.checksum,
                        "n_rows": n_rows, "n_features": n_features, "dtype": dtype.name,
                        "chunk_rows": [stop - start for start, stop in ranges]}
        record_bytes = json.dumps(record.document(), indent=1).encode("utf-8")
        checkpoint_size = self._checkpoint.seek(0, io.SEEK_END)  # a file's, or an object's bytes in memory
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
    def _open_checkpoint(scratch: Path, checkpoints: CheckpointStore, name: str, pass_index: int) -> IO[bytes]:
        """The served checkpoint as an open file: the plain file itself (kept readable if a resume removes
        it meanwhile; an object's bytes in memory), or a sharded one joined into an anonymous temporary file in
        ``scratch``."""
        if checkpoints.parts_of(name, pass_index) is None:
            try:
                return checkpoints.open_file(name, pass_index)
            except FileNotFoundError:
                raise Conflict(f"model {name!r} changed while exporting; retry", field="name") from None
        state = checkpoints.load(name, pass_index)
        arrays = {key: _encode(key, value) for key, value in state.items()}
        arrays[_VERSION_KEY] = np.asarray(SCHEMA_VERSION, dtype=np.int64)
        handle = tempfile.TemporaryFile(dir=scratch)
        _write_npz(handle, arrays)
        handle.seek(0)
        return handle

    def _checkpoint_chunks(self) -> Iterator[bytes]:
        self._checkpoint.seek(0)
        while block := self._checkpoint.read(COPY_BYTES):
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


# ------------------------------------------------------------------ import
def _matching_version(meta: DatasetInfo, dataset: dict) -> int | None:
    """The version of an existing data set (its metadata) holding exactly the archive's rows, or None."""
    if meta.dtype != dataset["dtype"] or meta.n_features != dataset["n_features"]:
        return None
    return next((v.version for v in meta.versions if v.checksum == dataset["checksum"]), None)


def _create_dataset(datasets: Datasets, name: str, rows: np.ndarray, dataset: dict) -> DatasetInfo:
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
        if meta.checksum != dataset["checksum"]:
            raise RuntimeError(f"data set {name!r} was committed with checksum {meta.checksum}, the archive's "
                               f"is {dataset['checksum']}")
        return meta
    except BaseException:
        with contextlib.suppress(NotFound):
            datasets.delete(name)
        raise


def import_archive(root: Path | str, path: Path | str, name: str | None = None, dataset: str | None = None,
                   owner: str | None = None, *, check_served: ServedCheck) -> ModelRecord:
    """Import the model archive at ``path`` into data folder ``root``: the stored, completed record.

    ``name`` (default the archive's model name) names the model; ``dataset``
    (default the archive's data set name) the data set of its training rows:
    an existing set holding the same rows (same version checksum) is reused,
    else a new one is created. ``owner`` is recorded as the model's owner.
    ``check_served(state, record, rows)`` raises ValueError unless the archive's
    checkpoint serves its record's components over its rows (the store runs no
    numerics: `workers.archive.import_model` passes `workers.archive.check_served`).

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
    archive's bytes read about three times (extract and hash, verify, upload as chunks), ``check_served``,
    plus one commit of the rows.
    """
    where = str(root)
    registry, datasets = models_at(where), datasets_at(where)
    work = local_folder(where) / ".imports" / uuid.uuid4().hex
    work.mkdir(parents=True)
    created_dataset = None
    try:
        verified = verify_archive(path, work, check_served)
        manifest, source = verified.manifest, verified.manifest["dataset"]
        model_name = validate_name(name if name is not None else verified.record.name, field="name")
        dataset_name = validate_name(dataset if dataset is not None else source["name"], field="dataset")
        with contextlib.suppress(NotFound):
            registry.get(model_name)
            raise Conflict(f"model {model_name!r} already exists; import under another name (name=...) or "
                           "delete it first", field="name")
        rows = open_rows(work / ROWS, source)
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
            "created_at": now, "updated_at": now, "error": None,  # a completed model has none; never keep one
            "checkpoint": CheckpointRef(pass_=manifest["pass"], sha256=verified.checkpoint_sha256)})
        try:
            _claim(registry, record, work / CHECKPOINT, manifest["pass"])
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


def _claim(registry: Models, record: ModelRecord, checkpoint: Path, pass_index: int) -> None:
    """Create the imported model's record, its checkpoint (the verified file at ``checkpoint``) in place first:
    renamed into the model's folder under the registry's lock, or put as an object before the record is
    created once (`ObjectJobRegistry.create`). `Conflict` on ``name`` if the model exists."""
    if isinstance(registry, ObjectJobRegistry):
        checkpoints = checkpoints_of(registry)
        registry.create(record, before=lambda: checkpoints.place_file(record.name, pass_index, checkpoint))
        return
    folder = registry.folders.path(record.name)
    target = folder / "checkpoints" / f"pass-{pass_index:05d}.npz"

    def place_checkpoint() -> Path:
        remove_tree(folder / "checkpoints")  # leftovers of an earlier model of that name
        target.parent.mkdir()
        os.rename(checkpoint, target)
        fsync_dir(target.parent)
        return target

    registry.folders.claim(record.name, registry.document, record.document(), before=place_checkpoint,
                           under_lock=True, attempts=5)


#: what `sweep_imports` leaves alone: an import may still be writing or verifying anything younger
STALE_IMPORT_S = 3600.0


def sweep_imports(root: Path | str, older_than_s: float = STALE_IMPORT_S, now: float | None = None) -> list[str]:
    """Remove what interrupted imports left in ``root/.imports`` (a body streamed there, a verification
    folder) when it was last changed over ``older_than_s`` seconds before ``now``; the names removed.
    Run at start-up: an import cut short by a crash otherwise keeps its bytes forever. (The data set a
    crashed import was filling stays listed as ``open``; delete it if it is not wanted.) Cost: one
    listing of the folder."""
    folder = Path(root) / ".imports"
    now = time.time() if now is None else now
    removed = []
    for entry in sorted(folder.iterdir()) if folder.is_dir() else ():
        try:
            if now - entry.lstat().st_mtime <= older_than_s:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        except FileNotFoundError:  # another process swept it first
            continue
        removed.append(entry.name)
    return removed
