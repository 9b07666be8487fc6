"""Checks of checkpoints read back (`store.jobs.checkpoints.CheckpointStore` inherits them): verify a whole
checkpoint against its digests (`store.jobs.checkpoint_format`), find the last intact one for a resume,
identify a file for caches, and the `store.errors.DamagedCheckpoint` a damaged one raises."""

from __future__ import annotations

import logging
import zipfile
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np

from store.errors import DamagedCheckpoint, Invalid, NotFound
from store.folders import ResourceFolders
from store.jobs.checkpoint_format import (
    CheckedArchive,
    _bounds_of,
    _check_expected,
    _check_part_digest,
    _open_part,
    _part_digests,
    _part_name,
)
from store.jobs.checkpoint_places import FolderPlace, ObjectPlace

log = logging.getLogger(__name__)

#: what reading a damaged checkpoint file raises (besides our own ValueErrors): a truncated or altered zip
_UNREADABLE = (ValueError, zipfile.BadZipFile, EOFError, OSError, KeyError)
MAX_PASS = 10**9


class CheckpointVerification:
    """What `CheckpointStore` does to check the checkpoints it reads back (it supplies ``_dir``,
    ``_parts_dir``, ``_passes``, ``_open_manifest``, ``_jobs``, ``_field`` and ``_place``)."""

    # What `CheckpointStore` supplies, declared for the type checker.
    _jobs: ResourceFolders
    _field: str
    _place: FolderPlace | ObjectPlace

    def _dir(self, model: str) -> Path:
        raise NotImplementedError

    def _file(self, model: str, pass_index: int) -> Path:
        """The file of pass ``pass_index`` of ``model``: a plain checkpoint, or a sharded one's manifest."""
        return self._dir(model) / f"pass-{pass_index:05d}.npz"

    @staticmethod
    def _parts_dir(folder: Path, pass_index: int) -> Path:
        raise NotImplementedError

    def _passes(self, model: str) -> dict[int, Path]:
        raise NotImplementedError

    def _open_manifest(self, model: str, pass_index: int) -> AbstractContextManager[CheckedArchive]:
        raise NotImplementedError

    def verify(self, model: str, pass_index: int, expect: str | None = None) -> str | None:
        """Read every member of checkpoint ``pass_index`` (and of its parts) and check it against its
        digest, and the file against ``expect`` if given; its checkpoint digest (None for a file
        written before digests were kept). `NotFound` if it is missing, `DamagedCheckpoint` as `load`.
        Cost O(checkpoint bytes) read and hashed; memory one member."""
        pass_index = _check_pass(pass_index)
        path = self._file(model, pass_index)
        try:
            with self._open_manifest(model, pass_index) as archive:
                _check_expected(archive, path, expect)
                for key in archive.files:
                    archive[key]
                bounds, digest = _bounds_of(archive, path), archive.digest
                recorded = _part_digests(archive, bounds)
            for number, (first, stop) in enumerate(bounds or ()):
                part_path = self._parts_dir(path.parent, pass_index) / _part_name(first, stop)
                with _open_part(part_path, pass_index, first, stop, self._place.open) as part:
                    _check_part_digest(part_path, part, recorded, number)
                    for key in part.files:
                        part[key]
        except _UNREADABLE as exc:
            raise self._damaged(model, pass_index, exc) from None
        return digest

    def latest_intact(self, model: str) -> int | None:
        """The highest pass of ``model`` whose checkpoint passes `verify` (a damaged later one is logged and
        skipped: a resume goes back to the last intact checkpoint), or None if none does. Cost: `verify`
        of each checkpoint tried, from the latest down."""
        for pass_index in sorted(self._passes(model), reverse=True):
            try:
                self.verify(model, pass_index)
            except NotFound:
                continue
            except DamagedCheckpoint as exc:
                log.warning("skipping a damaged checkpoint: %s", exc.message)
                continue
            return pass_index
        return None

    def damaged_back_to(self, model: str, pass_index: int, sha256: str | None = None) -> int | None:
        """For a job that completed with checkpoint ``pass_index`` (of digest ``sha256`` if known): None if
        that checkpoint is intact (`verify`), else the pass a resume goes back to, that of the last intact
        checkpoint (`latest_intact`; 0 if none is: the fit starts over). Cost: `verify` of that checkpoint,
        and `latest_intact` when it is damaged."""
        try:
            self.verify(model, pass_index, expect=sha256)
            return None
        except (NotFound, DamagedCheckpoint):
            return self.latest_intact(model) or 0

    def identity(self, model: str, pass_index: int) -> tuple | None:
        """What changes whenever checkpoint ``pass_index``'s file does (device, inode, size, mtime and
        ctime in ns: see `store.datasets.integrity`), for caches of what was built from it; None if it
        is missing. Cost one ``stat``."""
        return self._place.identity(self._file(model, _check_pass(pass_index)))

    def _damaged(self, model: str, pass_index: int, exc: Exception) -> DamagedCheckpoint:
        detail = str(exc) or type(exc).__name__
        route = f"/v1/{self._jobs.folder.name}/{model}"
        return DamagedCheckpoint(f"{self._field} {model!r}: its checkpoint of pass {pass_index} is damaged "
                                 f"({detail}); resume it (POST {route}/resume, body {{}}) to go back to its last "
                                 f"intact checkpoint and run the passes after it again (a fit made in one go is "
                                 f"made again), or delete it (DELETE {route})", field="name",
                                 cause=type(exc).__name__)



def _check_pass(pass_index: object) -> int:
    if isinstance(pass_index, bool) or not isinstance(pass_index, (int, np.integer)):
        raise Invalid("pass", "pass must be an integer")
    if not 0 <= pass_index < MAX_PASS:
        raise Invalid("pass", f"pass must be between 0 and {MAX_PASS - 1}, got {pass_index}")
    return int(pass_index)
