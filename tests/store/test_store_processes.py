"""Process safety: uploads and record updates from separate processes (spawned, real flock)."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from store import DatasetStore, ModelRegistry
from store.jobs.records import ModelRecord

# each process records its stored chunks in a record field of its own; a read-modify-write
# without the cross-process lock would drop the other process's field
FIELDS = ("params_used", "params")


def _chunk(index: int) -> np.ndarray:
    return np.random.default_rng(index).normal(size=(20 + index, 8))


def _upload_and_update(root: str, field: str, indices: list[int]) -> list[int]:
    datasets, registry = DatasetStore(root), ModelRegistry(root)
    stored = {}
    for index in indices:
        datasets.put_chunk("shared", index, _chunk(index))
        stored[f"chunk{index}"] = "stored"
        registry.update("job", **{field: dict(stored)})
    return indices


def test_uploads_and_updates_from_two_processes(root):
    datasets, registry = DatasetStore(root), ModelRegistry(root)
    datasets.create("shared", 8, "float64")
    registry.create(ModelRecord(name="job", dataset="shared", kernel={"type": "gaussian", "sigma": 1.0},
                                n_components=2, solver="kha", status="running"))
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        done = list(pool.map(_upload_and_update, [str(root)] * 2, FIELDS, [[0, 2, 4, 6], [1, 3, 5, 7]]))
    assert sorted(sum(done, [])) == list(range(8))
    record = registry.get("job")
    assert record.params_used == {f"chunk{i}": "stored" for i in (0, 2, 4, 6)}
    assert record.params == {f"chunk{i}": "stored" for i in (1, 3, 5, 7)}
    assert record.status == "running"
    meta = datasets.commit("shared")
    expected = np.concatenate([_chunk(i) for i in range(8)])
    assert meta.n_rows == expected.shape[0]
    assert datasets.open_array("shared")[:].tobytes() == expected.tobytes()
