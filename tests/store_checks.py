"""Test-side twins of the data set store's documented formats, shared by store and API tests."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from tests.waiting import PATIENCE_S, wait_until


def version_checksum(*chunks: np.ndarray, dtype=None) -> str:
    """The documented scheme, written out: sha256 over the chunks' hex sha256 digests in index order
    (each chunk first cast to ``dtype``, the set's, if given)."""
    hex_digests = "".join(hashlib.sha256(np.ascontiguousarray(c, dtype=dtype).tobytes()).hexdigest() for c in chunks)
    return "sha256:" + hashlib.sha256(hex_digests.encode("ascii")).hexdigest()


def snapshot(path: Path, with_root: bool = True) -> dict[str, tuple[int, int]]:
    """(size, mtime) of every file and folder below ``path`` (and of ``path`` itself, as ".")."""
    found = {".": (0, path.stat().st_mtime_ns)} if with_root else {}
    for entry in sorted(path.rglob("*")):
        info = entry.stat()
        found[str(entry.relative_to(path))] = (info.st_size, info.st_mtime_ns)
    return found


def wait_for_record(registry, name: str, predicate, timeout: float = PATIENCE_S):
    """Poll job ``name`` of ``registry`` until ``predicate(record)`` holds (AssertionError with the
    record after ``timeout`` seconds); the record."""
    seen = {}

    def holds() -> bool:
        seen["record"] = registry.get(name)
        return predicate(seen["record"])

    wait_until(holds, timeout, lambda: f"job {name} (last seen: {seen['record']})")
    return seen["record"]


def ended(record) -> bool:
    """Whether a job's record is final: completed, failed or cancelled."""
    return record.status in ("completed", "failed", "cancelled")


def committed_digits(root: Path, rows: np.ndarray, chunks: int = 1) -> Path:
    """``root`` holding data set "digits" (64 float64 features): ``rows`` in ``chunks`` chunks, committed."""
    from store import DatasetStore

    ds = DatasetStore(root)
    ds.create("digits", 64, "float64")
    for i, chunk in enumerate(np.array_split(rows, chunks)):
        ds.put_chunk("digits", i, chunk)
    ds.commit("digits")
    return root


def aged_image_job(jobs, name: str, seconds: float) -> None:
    """Rewrite image job ``name``'s record (`store.image_jobs.ImageJobStore` ``jobs``) as if its last write were
    ``seconds`` ago, as its worker would have left it."""
    import time

    from store.atomic import atomic_write_json
    from store.timestamps import to_iso

    record = jobs.get(name).model_copy(update={"updated_at": to_iso(time.time() - seconds)})
    if hasattr(jobs, "objects"):  # `store.image_job_objects.ObjectImageJobStore`
        from store.atomic import dump_json

        jobs.objects.put(f"image-jobs/{name}/job.json", dump_json(record.model_dump(mode="json")))
        return
    atomic_write_json(jobs.folders.path(name) / "job.json", record.model_dump(mode="json"))
