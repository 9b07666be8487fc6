"""Existing zarr arrays registered as data sets without copying: open, check, checksum.

A registered array is only ever opened read-only (``zarr.open_array(url,
mode="r")``); the store never writes where it lives. Its rows are read in
*row chunks* of the array's own chunk (shard, if sharded) length along axis 0,
which are also the "chunks" of the checksum scheme in `store.checksums`.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np
import zarr

from store.datasets.rows import convert_finite
from store.errors import Invalid

SOURCE_KINDS = "iuf"
"""numpy dtype kinds a registered array may have: signed and unsigned integers, floats."""

NATIVE_DTYPES = ("float32", "float64")
"""Source dtypes kept as they are; any other accepted dtype is read as float64."""

READ_BYTES = 64 << 20
"""Largest block read at once while scanning (64 MiB); a row chunk larger than this is read in pieces."""


def is_url(location: str) -> bool:
    """True if ``location`` names a URL (``scheme://...``) rather than a local path. Cost O(len)."""
    return "://" in location


def open_source(location: str):
    """Open the zarr array at ``location`` read-only.

    Parameters
    ----------
    location : str
        An absolute local path or any URL zarr can open through fsspec.

    Returns
    -------
    zarr.Array

    Raises
    ------
    Invalid
        Field ``"source"``: a relative path, or zarr cannot open an array
        there (its reason is included).

    Notes
    -----
    Cost: reading the array's metadata (one small object, local or remote).
    """
    if not isinstance(location, str) or not location or "\0" in location:
        raise Invalid("source", "source must be a non-empty path or URL of a zarr array")
    if not is_url(location) and not os.path.isabs(location):
        raise Invalid("source", f"source path {location!r} must be absolute")
    try:
        return zarr.open_array(location, mode="r")
    except Exception as exc:  # zarr, fsspec and the OS each raise their own kinds; all mean "cannot open"
        reason = str(exc) or type(exc).__name__
        raise Invalid("source", f"cannot open a zarr array at {location!r}: {reason}") from None


def row_chunk_length(array) -> int:
    """Rows per storage unit of ``array`` along axis 0 (its shard, else chunk, length). Cost O(1)."""
    shards = getattr(array, "shards", None)
    length = shards[0] if shards else array.chunks[0]
    return max(1, int(length))


def check_source(array, dtype: str | None) -> tuple[str, str]:
    """Check the shape and dtype of a source array; choose the data set's dtype.

    Parameters
    ----------
    array : zarr.Array
        The opened source.
    dtype : {"float32", "float64"} or None
        Requested dtype; None keeps float32 and float64 sources as they are
        and reads any other integer or float dtype as float64.

    Returns
    -------
    (dtype, source_dtype) : tuple of str
        The data set's dtype and the array's own dtype.

    Raises
    ------
    Invalid
        Field ``"source"``: not 2-D, fewer than 2 rows or 1 column, or a
        dtype that is not an integer or float. Field ``"dtype"``: an
        unsupported requested dtype.

    Notes
    -----
    Cost O(1).
    """
    if dtype is not None and dtype not in NATIVE_DTYPES:
        raise Invalid("dtype", f"dtype must be one of {', '.join(NATIVE_DTYPES)}, got {dtype!r}")
    shape = tuple(int(s) for s in array.shape)
    if len(shape) != 2:
        raise Invalid("source", f"the zarr array must be 2-D (n_rows, n_features), got shape {shape}")
    if shape[1] < 1:
        raise Invalid("source", f"the zarr array must have at least 1 column, got shape {shape}")
    if shape[0] < 2:
        raise Invalid("source", f"the zarr array must have at least 2 rows, got shape {shape}")
    try:
        source_dtype = np.dtype(array.dtype)
    except TypeError:
        source_dtype = None
    if source_dtype is None or source_dtype.kind not in SOURCE_KINDS or source_dtype.fields is not None:
        raise Invalid(
            "source", f"the zarr array has dtype {array.dtype}; only integer and float arrays can be registered"
        )
    if dtype is None:
        dtype = source_dtype.name if source_dtype.name in NATIVE_DTYPES else "float64"
    return dtype, source_dtype.name


def scan_source(array, dtype: str, n_rows: int) -> tuple[list[str], list[int]]:
    """Read the first ``n_rows`` rows once, row chunk by row chunk: digests, row counts, finiteness.

    Parameters
    ----------
    array : zarr.Array
        Source of shape (>= n_rows, n_features).
    dtype : {"float32", "float64"}
        The data set's dtype; rows are cast to it (``astype``) before hashing.
    n_rows : int
        Rows to read.

    Returns
    -------
    (chunk_digests, chunk_rows) : tuple of lists
        One sha256 hex digest (see `store.checksums`) and one row count per
        row chunk of the array, in order.

    Raises
    ------
    Invalid
        Field ``"source"``: ``"row i contains NaN or inf"`` (i counted from 0
        over the whole array; values too large for ``dtype`` count as inf), or
        a read error of the array.

    Notes
    -----
    Cost: one full read of the rows, O(n_rows * n_features) time (plus the
    transfer for remote arrays); memory one row chunk, capped at 64 MiB per
    read by splitting larger chunks (the digest of a chunk is the same either
    way).
    """
    n_features = int(array.shape[1])
    chunk_length = row_chunk_length(array)
    itemsize = max(np.dtype(dtype).itemsize, np.dtype(array.dtype).itemsize)
    read_rows = max(1, min(chunk_length, READ_BYTES // (n_features * itemsize)))
    digests, counts = [], []
    for chunk_start in range(0, n_rows, chunk_length):
        chunk_stop = min(chunk_start + chunk_length, n_rows)
        digest = hashlib.sha256()
        for start in range(chunk_start, chunk_stop, read_rows):
            stop = min(start + read_rows, chunk_stop)
            try:
                block = np.asarray(array[start:stop])
            except Exception as exc:  # a missing or damaged chunk object
                raise Invalid("source", f"cannot read rows {start}..{stop - 1} of the zarr array: {exc}") from None
            block = convert_finite(block, dtype, "source", first_row=start)
            digest.update(block.data)
        digests.append(digest.hexdigest())
        counts.append(chunk_stop - chunk_start)
    return digests, counts
