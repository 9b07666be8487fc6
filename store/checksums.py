"""Checksums of data sets: one sha256 per chunk, and one per version computed from those.

*Chunk digest*: the sha256 hex digest of a chunk's rows exactly as stored,
that is cast to the data set's dtype, C-contiguous, in native (little-endian)
byte order. For an uploaded set a chunk is one ``PUT .../chunks/{index}``;
for a registered zarr array it is one row chunk of that array (see
`store.datasets.sources`).

*Version checksum*: ``"sha256:"`` followed by the sha256 hex digest of the
ASCII concatenation of the chunk digests (64 hex characters each) in chunk
index order::

    checksum(v) = "sha256:" + sha256(hex(d_0) + hex(d_1) + ... + hex(d_{k-1}))

Two versions have the same checksum exactly when they hold the same chunks
with the same rows in the same order, so the checksum depends on how the rows
were cut into chunks, not only on the rows. Because it is a function of the
per-chunk digests (recorded at commit), the checksum of version v+1 is
computed from the digests of version v plus those of the new chunks, without
re-reading any committed data: O(k) hashing of 64-byte strings.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

CHECKSUM_PREFIX = "sha256:"


def chunk_digest(rows: np.ndarray) -> str:
    """sha256 hex digest of the bytes of ``rows`` in C order.

    Parameters
    ----------
    rows : ndarray of shape (n_rows, n_features)
        Rows already cast to the data set's dtype.

    Returns
    -------
    str
        64 lower-case hex characters.

    Notes
    -----
    Cost O(rows bytes); no copy when ``rows`` is already C-contiguous.
    """
    return hashlib.sha256(np.ascontiguousarray(rows).data).hexdigest()


def version_checksum(chunk_digests: Iterable[str]) -> str:
    """The checksum of a version from its chunk digests in index order (see the module docstring).

    Cost O(number of chunks) (64 bytes hashed per chunk); no row data is read.
    """
    digest = hashlib.sha256()
    for hex_digest in chunk_digests:
        digest.update(hex_digest.encode("ascii"))
    return CHECKSUM_PREFIX + digest.hexdigest()
