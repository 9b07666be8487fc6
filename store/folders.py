"""The folders of one kind of named resource: path, lock, listing and claiming a name.

Every resource kind keeps one folder per resource under the data folder
``root``::

    {kind_folder}/{name}/          the resource; ``name`` passed `validate_name`
    {kind_folder}/{name}/.lock     flock: shared or exclusive, see `ResourceFolders.locked`
    {kind_folder}/.{name}.deleted-{hex}   a tombstone while `store.atomic.remove_tree` runs

`DatasetStore` keeps one for ``datasets/``; `CheckpointStore` one for
``models/``, for the path of a model's checkpoints.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from store.atomic import atomic_write_json, file_lock, read_json, try_file_lock
from store.errors import Conflict, Invalid, NotFound
from store.names import validate_name
from store.quarantine import holds_files


class ResourceFolders:
    """Path, lock, listing and name claim of the resources under ``root/kind_folder``.

    Parameters
    ----------
    root : Path
        The data folder.
    kind_folder : str
        Folder of this kind of resource under ``root`` (``"datasets"``, ``"models"``).
    not_found_kind : str
        Kind named by `NotFound` (``"dataset"``, ``"model"``).
    noun : str, optional
        The resource in `Conflict` messages (``"data set"``); default ``not_found_kind``.
    """

    def __init__(self, root: Path | str, kind_folder: str, not_found_kind: str, noun: str | None = None):
        self.root = Path(root)
        self.folder = self.root / kind_folder
        self._folder = str(self.folder)  # for `signature`'s path: joining strings, not `Path` objects
        self.kind = not_found_kind
        self.noun = noun or not_found_kind

    def path(self, name: str, field: str = "name") -> Path:
        """Folder of resource ``name`` (which may not exist); `Invalid` names ``field``. Cost O(len(name))."""
        return self.folder / validate_name(name, field=field)

    @contextlib.contextmanager
    def locked(self, name: str, shared: bool = False) -> Iterator[None]:
        """Hold the resource's ``.lock`` flock, shared or exclusive, for the ``with`` block.

        Raises `NotFound` (kind ``not_found_kind``) if the resource's folder
        does not exist, or vanishes while waiting; errors raised inside the
        block pass unchanged. Cost: see `store.atomic.file_lock`.
        """
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(file_lock(self.path(name) / ".lock", shared=shared))
            except (FileNotFoundError, NotADirectoryError):
                raise NotFound(self.kind, name) from None
            yield

    def read(self, name: str, document: str, max_version: int | None = None) -> dict:
        """The JSON document ``document`` of resource ``name``; `NotFound` if missing. Cost O(its size).

        `ValueError` if it is not a stored document, or its ``schema_version``
        is above ``max_version`` (None: `read_json`'s default).
        """
        path = self.path(name) / document
        try:
            return read_json(path) if max_version is None else read_json(path, max_version=max_version)
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound(self.kind, name) from None

    def signature(self, name: str, document: str) -> tuple[int, int, int, int]:
        """``(inode, mtime_ns, ctime_ns, size)`` of the document of ``name``: it changes whenever the document
        is written (every write is a new file renamed over it, `store.atomic`), so a view computed from
        the document can be kept under it. `NotFound` if missing. Cost: one ``stat``."""
        try:
            st = os.stat(os.path.join(self._folder, validate_name(name), document))
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound(self.kind, name) from None
        return st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size

    def orphaned(self, name: str, document: str) -> bool:
        """Whether the folder of ``name`` holds the resource's files but not its ``document`` (deleted or
        lost: the resource is then damaged, not absent). Looked at under the resource's shared lock, taken
        without waiting: while a claim (`claim`, whose ``before`` may write files first), a delete or
        this very thread holds it exclusively, the answer is False. Cost: a flock, a ``stat`` and a folder
        listing; False at once when the folder does not exist."""
        folder = self.path(name)
        if not os.path.isdir(folder):
            return False
        try:
            with try_file_lock(folder / ".lock", shared=True) as held:
                return held and not os.path.lexists(folder / document) and holds_files(folder, document)
        except (FileNotFoundError, NotADirectoryError):  # deleted meanwhile
            return False

    def present(self, name: str, document: str) -> bool:
        """Whether resource ``name`` is there, readable or damaged: its ``document`` exists (a folder in its
        place too) or its folder holds its files without it. Without a lock: for a caller that holds the
        resource's lock (`orphaned` otherwise). Cost: a ``stat``; a folder listing when it is missing."""
        folder = self.path(name)
        return os.path.lexists(folder / document) or holds_files(folder, document)

    def names(self) -> list[str]:
        """Sorted names of the resource folders, without hidden entries, tombstones and invalid names.

        A listed name may have no document yet (a claim in progress) or lose
        it at any time (a delete). Cost: one folder listing, O(entries).
        """
        try:
            with os.scandir(self.folder) as entries:
                found = sorted(entry.name for entry in entries if entry.is_dir())
        except FileNotFoundError:
            return []
        return [name for name in found if _valid(name)]

    def page(self, read, after: str | None = None, limit: int | None = None) -> list:
        """``read(name)`` for the names after ``after``, in name order, until ``limit`` results (all
        if None); a name ``read`` answers None for (no document, or not one to list) is skipped. What
        every paged list of the store shares. Cost: one listing plus one ``read`` per name visited."""
        return page_of(self.names(), read, after, limit)

    def claim(
        self,
        name: str,
        document: str,
        doc: dict,
        before: Callable[[], Path | None] | None = None,
        under_lock: bool = False,
        attempts: int = 1,
    ) -> None:
        """Create the folder of ``name`` and claim the name by writing ``document`` exclusively.

        Parameters
        ----------
        name : str
            Resource name (see `validate_name`).
        document : str
            The file whose existence means the resource exists (``"meta.json"``).
        doc : dict
            Its JSON content, written atomically and linked into place
            exclusively, so two concurrent claims cannot both succeed and a
            folder left without ``document`` by a crash does not block the name.
        before : callable, optional
            Run just before the write (under the lock when ``under_lock``),
            only if ``document`` does not exist then, so it may clear leftovers
            of an earlier resource of that name; it may refuse with an error of
            its own, and may return the path of a file it wrote, removed again
            if the claim fails.
        under_lock : bool
            Hold the resource's exclusive lock while ``before`` and the write run.
        attempts : int
            Tries when a concurrent delete removes the folder meanwhile; each
            makes the folder again.

        Raises
        ------
        Conflict
            Field ``"name"``: ``document`` exists ("{noun} 'x' already exists"),
            or the folder vanished on every attempt ("... is being deleted; try again").

        Notes
        -----
        Cost: one or two ``mkdir``, a ``stat``, the write of ``doc`` (O(its
        size) plus two fsyncs) and ``before``, per attempt.
        """
        folder = self.path(name)
        taken = f"{self.noun} {name!r} already exists"
        for _attempt in range(attempts):
            self.folder.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder)
            written = None
            try:
                with file_lock(folder / ".lock", shared=False) if under_lock else contextlib.nullcontext():
                    if (folder / document).exists():
                        raise Conflict(taken, field="name")  # before would touch the owner's files
                    if before is not None:
                        written = before()
                    atomic_write_json(folder / document, doc, exclusive=True)
                return
            except FileExistsError:
                _unlink_quietly(written)
                raise Conflict(taken, field="name") from None
            except FileNotFoundError:
                _unlink_quietly(written)  # a delete removed the folder meanwhile
        raise Conflict(f"{self.noun} {name!r} is being deleted; try again", field="name")


def page_of(names, read, after: str | None = None, limit: int | None = None) -> list:
    """``read(name)`` for the sorted ``names`` after ``after`` until ``limit`` results (all if None), those ``read``
    answers None for skipped: a page of any store's listing (`ResourceFolders.page`). O(names visited)."""
    found: list = []
    for name in names:
        if after is not None and name <= after:
            continue
        if limit is not None and len(found) >= limit:
            break
        item = read(name)
        if item is not None:
            found.append(item)
    return found


def _valid(name: str) -> bool:
    try:
        validate_name(name)
    except Invalid:
        return False
    return True


def _unlink_quietly(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
