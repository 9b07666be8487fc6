"""Image jobs on a worker: a data set of patches cut from an image."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kpca.images import extract_patches
from store import DatasetStore

CHUNK_ROWS = 4096


def patch_dataset(data_dir: str, name: str, image: np.ndarray, patch: int, stride: int) -> dict:
    """Create data set ``name`` of the ``patch`` x ``patch`` patches of ``image`` on a grid of step ``stride``.

    Rows are flattened patches (C order, channels last) of the [0, 1] image,
    stored as float32, uploaded in chunks and committed. Returns the data
    set's metadata. Cost O(#patches * patch^2).
    """
    patches, _ = extract_patches(np.asarray(image, dtype=np.float64), patch, stride)
    store = DatasetStore(Path(data_dir))
    store.create(name, patches.shape[1], "float32")
    for i, start in enumerate(range(0, patches.shape[0], CHUNK_ROWS)):
        store.put_chunk(name, i, patches[start : start + CHUNK_ROWS].astype(np.float32))
    return store.commit(name)
