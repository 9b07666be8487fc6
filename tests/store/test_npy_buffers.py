"""`store.npy.read_buffer_header` and `array_in_buffer`: the array of ``.npy`` bytes already in memory (a
request body) is a view on them, not a copy, and is what numpy reads from the same bytes."""

from __future__ import annotations

import io

import numpy as np
import pytest
from numpy.lib import format as npy_format

from client.upload import npy_bytes
from store.npy import MAX_BUFFER_HEADER_BYTES, array_in_buffer, read_buffer_header
from tests.store.test_npy_threads import ARRAYS


def npy_header(fields: dict) -> bytes:
    out = io.BytesIO()
    npy_format.write_array_header_1_0(out, fields)
    return out.getvalue()


def read(buffer) -> np.ndarray:
    return array_in_buffer(buffer, *read_buffer_header(buffer))


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_a_buffer_reads_as_numpy_reads_the_same_bytes(name):
    data = npy_bytes(ARRAYS[name])
    ours, numpys = read(data), np.load(io.BytesIO(data))
    assert ours.dtype == numpys.dtype and ours.shape == numpys.shape
    np.testing.assert_array_equal(ours, numpys)


def test_the_array_is_a_view_on_the_buffer_not_a_copy():
    buffer = bytearray(npy_bytes(np.arange(1000.0).reshape(100, 10)))
    array = read(buffer)
    assert np.shares_memory(array, np.frombuffer(buffer, dtype=np.uint8))
    assert array.flags.writeable  # a bytearray's view; a bytes object's is read-only
    buffer[-8:] = np.float64(-1.0).tobytes()
    assert array[-1, -1] == -1.0
    assert not read(bytes(buffer)).flags.writeable


def test_damaged_buffers_are_refused():
    data = npy_bytes(np.ones((4, 3)))
    with pytest.raises(ValueError, match="truncated"):
        read(data[:-1])
    with pytest.raises(ValueError):
        read(b"not a npy file at all")
    with pytest.raises(ValueError, match="objects"):
        read(npy_header({"descr": "|O", "fortran_order": False, "shape": (2,)}) + bytes(16))
    long_header = npy_format.magic(2, 0) + (MAX_BUFFER_HEADER_BYTES + 10).to_bytes(4, "little") + \
        b" " * (MAX_BUFFER_HEADER_BYTES + 10)
    with pytest.raises(ValueError, match="truncated"):
        read_buffer_header(long_header)


def test_data_a_short_header_leaves_unaligned_are_copied_into_an_aligned_array():
    """numpy pads its headers so that the data start aligned; a hand-made one need not, and an unaligned
    array is another type to numba (and slower to numpy)."""
    rows = np.arange(12.0).reshape(4, 3)
    text = b"{'descr': '<f8', 'fortran_order': False, 'shape': (4, 3), }\n"
    data = npy_format.magic(1, 0) + len(text).to_bytes(2, "little") + text + rows.tobytes()
    assert (len(data) - rows.nbytes) % 8 != 0  # the data start off an 8-byte boundary
    array = read(bytearray(data))
    assert array.flags.aligned
    np.testing.assert_array_equal(array, rows)
