"""Data that is not in memory, for the scikit-learn estimators: a ``zarr.Array``, a dask array or an
``np.memmap``, read a block of rows at a time and never whole.

`kpca.rows.KernelRows` reads its source by slices of rows (``source[a:b]``) already; what the estimators add
is to recognise such a source (`is_out_of_core`) instead of copying it into memory as scikit-learn's input
checks do, check it as they would (`checked_source`: two dimensions, a numeric type, finite values, in
one streaming pass), and read it block by block (`row_blocks`, `column_mean`). Reading is the caller's
array's own indexing: this module opens nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from kpca.rows import default_chunk_rows

_LAZY_PACKAGES = ("zarr", "dask")


def is_out_of_core(X) -> bool:
    """Whether X is read in blocks instead of copied: an ``np.memmap``, or an array of zarr or dask. O(1)."""
    return isinstance(X, np.memmap) or type(X).__module__.split(".")[0] in _LAZY_PACKAGES


def block_rows(X) -> int:
    """Rows per read of X: `kpca.rows.default_chunk_rows` (its chunking along rows where it has one, else
    4,096), and for a dask array, whose chunks along rows are a tuple of sizes, the largest of them."""
    chunks = getattr(X, "chunks", None)
    if chunks and isinstance(chunks[0], tuple) and chunks[0]:
        return int(max(chunks[0]))
    return default_chunk_rows(X)


def row_blocks(X, dtype=np.float64) -> Iterator[tuple[int, np.ndarray]]:
    """``(start, rows)`` for the blocks of X in order, each read into memory as a C-contiguous ``dtype``
    array. Memory O(block rows x n)."""
    step = block_rows(X)
    for a in range(0, int(X.shape[0]), step):
        yield a, np.ascontiguousarray(X[a : a + step], dtype=dtype)


def checked_source(X, n_features: int | None = None, where: str = "X") -> tuple[int, int]:
    """``(rows, features)`` of an out-of-core X after scikit-learn's checks of an input, in one pass of
    reads: two dimensions, at least one row and feature (``n_features`` of them where given), a real or
    integer type, finite values. ValueError naming ``where`` and what to do. O(l n) reads."""
    shape = tuple(int(s) for s in X.shape)
    if len(shape) != 2:
        raise ValueError(f"{where}: expected a 2-D array (rows x features), got shape {shape}")
    if shape[0] < 1 or shape[1] < 1:
        raise ValueError(f"{where}: needs at least one row and one feature, got shape {shape}")
    if n_features is not None and shape[1] != n_features:
        raise ValueError(f"{where} has {shape[1]} features, but the estimator was fitted with {n_features} features")
    kind = np.dtype(X.dtype).kind
    if kind not in "fiu":
        raise ValueError(f"{where}: expected real numbers, got dtype {np.dtype(X.dtype)}")
    if kind == "f":
        for a, block in row_blocks(X, X.dtype):
            bad = ~np.isfinite(block)
            if bad.any():
                row, col = np.argwhere(bad)[0]
                raise ValueError(f"{where}: row {a + int(row)}, feature {int(col)} is {block[row, col]}; every "
                                 "value must be finite (remove or impute the rows that are not)")
    return shape[0], shape[1]


def column_mean(X) -> np.ndarray:
    """The float64 mean of X's columns, one pass of reads. O(l n)."""
    total = np.zeros(int(X.shape[1]))
    for _, block in row_blocks(X):
        total += block.sum(axis=0)
    return total / int(X.shape[0])


class UnitRows:
    """The rows of an out-of-core X scaled to unit norm as they are read (the cosine kernel's points, for
    `kpca.rows.KernelRows`, which reads ``source[a:b]``); an array-like of X's shape, float64. O(1); each read
    O(rows n)."""

    def __init__(self, source):
        self.source, self.shape, self.dtype = source, tuple(source.shape), np.dtype(np.float64)
        self.chunks = getattr(source, "chunks", None)

    def __getitem__(self, key) -> np.ndarray:
        rows = np.asarray(self.source[key], dtype=np.float64)
        norms = np.linalg.norm(rows, axis=-1, keepdims=True)
        return rows / np.where(norms == 0, 1.0, norms)  # a zero row stays zero, as scikit-learn's normalize


__all__ = ["UnitRows", "is_out_of_core", "block_rows", "row_blocks", "checked_source", "column_mean"]
