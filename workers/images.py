"""Image jobs on a worker: a data set of patches cut from an image, and an image denoised by a patch model.

Images arrive as the integer pixels of a decoded PNG (uint8 or uint16, shape
(H, W) or (H, W, C)); they are scaled to [0, 1] here (`kpca.images.patches.to_unit`)
and a denoised image goes back in the input's dtype and range.
"""

from __future__ import annotations

import numpy as np

from kpca.images.patches import assemble_patches, extract_patches, from_unit, to_unit, upscale_replicate
from store import DatasetInfo
from store.places import datasets_at
from workers.serve import reconstruct_rows

CHUNK_ROWS = 4096


def patch_dataset(data_dir: str, name: str, image: np.ndarray, patch: int, stride: int) -> DatasetInfo:
    """Create data set ``name`` of the ``patch`` x ``patch`` patches of ``image`` on a grid of step ``stride``.

    Rows are flattened patches (C order, channels last) of the image scaled
    to [0, 1], stored as float32, uploaded in chunks and committed. Returns
    the data set's metadata. Cost O(#patches * patch^2).
    """
    unit, _ = to_unit(image)
    patches, _ = extract_patches(np.asarray(unit, dtype=np.float64), patch, stride)
    store = datasets_at(data_dir)
    store.create(name, patches.shape[1], "float32")
    for i, start in enumerate(range(0, patches.shape[0], CHUNK_ROWS)):
        store.put_chunk(name, i, patches[start : start + CHUNK_ROWS].astype(np.float32))
    return store.commit(name)


def denoise_image(data_dir: str, model_name: str, image: np.ndarray, patch: int, stride: int,
                  method: str = "auto", options: dict | None = None, upscale: int = 1) -> np.ndarray:
    """Denoise (or, with ``upscale`` > 1, hyper-resolve) an image through a patch model.

    The image is scaled to [0, 1], first enlarged by pixel replication if
    asked (seed 002 §4.2), cut into overlapping ``patch`` x ``patch`` patches
    on a grid of step ``stride``, each patch replaced by the pre-image of its
    projection, and the overlaps averaged (seed 000 §5.2). Returns the image
    of the (upscaled) shape in the input's dtype, values clipped to its range.
    """
    unit, info = to_unit(image)
    if upscale > 1:
        unit = upscale_replicate(unit, upscale)
    patches, grid = extract_patches(unit, patch, stride)
    cleaned = reconstruct_rows(data_dir, model_name, patches, method, options)
    return from_unit(assemble_patches(cleaned, grid), info)
