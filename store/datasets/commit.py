"""Committing a data set's staged chunks as its next version: a new zarr segment, its digests, the record.

A commit writes ``segments/{seg:04d}.zarr`` (into a temporary folder, then
renamed), then ``segments/{seg:04d}.json``, then ``meta.json`` (the commit
point), then removes the staging folder. A crash before the commit point
leaves the set as it was; the next commit removes what it left. See
`store.datasets.dataset_store` for the layout and versions.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from store.atomic import atomic_write_json, fsync_dir, fsync_tree, remove_tree, temp_path
from store.checksums import chunk_digest, version_checksum
from store.datasets.integrity import file_digest
from store.datasets.records import DatasetInfo, DatasetRecord, SegmentDigests, SegmentRecord
from store.datasets.repair import repair_staged
from store.datasets.staging import (
    check_staged,
    damaged_message,
    read_staged,
    staged_digests,
    staged_paths,
    staged_rows,
)
from store.datasets.zarr_rows import AlignedRowWriter, create_row_array, zarr_chunk_rows
from store.errors import Invalid
from store.npy import DAMAGED, npy_damage
from store.timestamps import utc_now

_MISSING_SHOWN = 20


def commit_staged(folder: Path, meta: DatasetRecord) -> DatasetInfo:
    """Commit the staged chunks of the set in ``folder`` as its next version; see `DatasetStore.commit`.

    Parameters
    ----------
    folder : Path
        The data set folder; the caller holds its exclusive lock.
    meta : DatasetRecord
        Its ``meta.json``, read under that lock; updated in place when a
        version is recorded.

    Returns
    -------
    DatasetInfo
        Public metadata (see `DatasetStore.get`), no chunk staged.

    Raises
    ------
    Invalid
        Field ``"chunks"``: an open set with no chunks, missing indices, or a
        damaged staged chunk.

    Notes
    -----
    Cost O(new rows * n_features) time plus O(committed chunks) to re-hash
    the recorded digests; memory one staged chunk plus one zarr chunk.
    """
    staging = folder / "staging"
    committed = meta.committed_chunks
    _repair(folder, meta, {i: path for i, path in staged_paths(folder).items() if i < committed})
    staged = {i: path for i, path in staged_paths(folder).items() if i >= committed}
    marks = staged_digests(folder)
    gone = sorted(i for i in marks if i >= committed and i not in staged)
    if gone:  # uploaded (marked), its file since deleted: never left out of the version silently
        raise Invalid("chunks", damaged_message(gone[0], "its file is missing"))
    if not staged:
        if meta.status == "ready":
            shutil.rmtree(staging, ignore_errors=True)  # only leftovers of a crashed commit
            return meta.info({})
        raise Invalid("chunks", "no chunks uploaded")
    refuse_gaps(meta, committed, staged)
    indices = sorted(staged)
    rows_per_chunk = staged_rows(folder) or {}
    damaged = [i for i in indices if rows_per_chunk.get(i, DAMAGED) == DAMAGED]
    if damaged:
        raise Invalid("chunks", damaged_message(damaged[0], npy_damage(staged[damaged[0]]) or "unreadable"))
    new_rows = int(sum(rows_per_chunk[i] for i in indices))
    chunk_rows = meta.zarr_chunk_rows or zarr_chunk_rows(new_rows, meta.n_features, np.dtype(meta.dtype).itemsize)
    segment = len(meta.segments) + 1
    segments_dir = folder / "segments"
    segments_dir.mkdir(exist_ok=True)
    final = segments_dir / f"{segment:04d}.zarr"
    digests, counts, stored = _write_segment(final, staged, new_rows, meta, chunk_rows, marks)
    fsync_dir(segments_dir)
    doc_name = f"segments/{segment:04d}.json"
    atomic_write_json(folder / doc_name, SegmentDigests(
        segment=segment, first_chunk=committed, chunk_sha256=digests, chunk_rows=counts, zarr_chunk_sha256=stored,
        zarr_json_sha256=file_digest(final / "zarr.json"),
    ).document())
    checksum = version_checksum(meta.recorded_digests(folder) + digests)
    first_row = meta.n_rows if meta.status == "ready" else 0
    meta.add_version(SegmentRecord(
        segment=segment, location=f"segments/{segment:04d}.zarr", external=False, first_chunk=committed,
        n_chunks=len(indices), first_row=first_row, n_rows=new_rows, chunk_rows=chunk_rows, digests=doc_name,
    ), checksum, utc_now())
    meta.write(folder)
    remove_tree(staging)
    return meta.info({})


def _repair(folder: Path, meta: DatasetRecord, uploads: dict[int, Path]) -> None:
    """Repair damaged committed chunks uploaded again (`store.datasets.repair.repair_staged`); record it."""
    marked = set(meta.corrupt)
    wanted = {i: read_staged(path, i) for i, path in uploads.items() if i in marked}
    if wanted and repair_staged(folder, meta, wanted):
        meta.write(folder)
        for index in wanted:
            uploads[index].unlink(missing_ok=True)


def refuse_gaps(meta: DatasetRecord, committed: int, staged) -> None:
    """Refuse (`Invalid` on ``"chunks"``, naming the missing indices) staged chunk indices ``staged`` (a
    collection of them) that are not exactly ``committed..max(staged)``. O(chunks)."""
    missing = sorted(set(range(committed, max(staged) + 1)) - set(staged))
    if missing:
        after = ""
        if committed:
            after = (f"; version {meta.version} holds chunks 0..{committed - 1}, so appended "
                     f"chunks are numbered from {committed} without gaps")
        raise Invalid(
            "chunks", f"missing chunk indices {_show(missing)}{after}; upload them and commit again"
        )


def _write_segment(final: Path, staged: dict[int, Path], n_rows: int, meta: DatasetRecord,
                   chunk_rows: int, marks: dict[int, set[str]]) -> tuple[list[str], list[int], list[str]]:
    """Write the ``staged`` chunks in index order as the zarr array ``final``; their digests and rows,
    and the digests of the zarr chunks written. A chunk whose rows match none of its ``marks`` (the
    digests taken when it was staged, `store.datasets.staging.staged_digests`) is refused as damaged."""
    n_features, dtype = meta.n_features, meta.dtype
    _remove_leftover_arrays(final.parent, final)
    tmp = temp_path(final)
    digests, counts = [], []
    try:
        writer = AlignedRowWriter(create_row_array(tmp, n_rows, n_features, dtype, chunk_rows))
        for index in sorted(staged):
            block = read_staged(staged[index], index)
            check_staged(block, index, n_features, dtype)
            digests.append(chunk_digest(block))
            if index in marks and digests[-1] not in marks[index]:
                raise Invalid("chunks", damaged_message(index, "its rows do not match the digest taken when it "
                                                               "was uploaded: altered on disk"))
            counts.append(int(block.shape[0]))
            writer.append(block)
        writer.close()
        fsync_tree(tmp)
        stored = writer.digests
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return digests, counts, stored


def _remove_leftover_arrays(folder: Path, final: Path) -> None:
    """Remove arrays left by an interrupted commit (temporary, or renamed but not recorded)."""
    shutil.rmtree(final, ignore_errors=True)
    prefix = f".{final.name}.tmp-"
    for entry in os.scandir(folder):
        if entry.name.startswith(prefix):
            shutil.rmtree(entry.path, ignore_errors=True)


def _show(indices: list[int]) -> str:
    if len(indices) <= _MISSING_SHOWN:
        return str(indices)
    shown = ", ".join(str(i) for i in indices[:_MISSING_SHOWN])
    return f"[{shown}, ...] ({len(indices)} missing)"
