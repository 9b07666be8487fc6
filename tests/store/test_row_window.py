"""`store.datasets.segments.RowWindow`: rows first..stop-1 of a row source, indexed from 0."""

from __future__ import annotations

import numpy as np
import pytest

from store import DatasetStore, RowWindow, SegmentedRows


@pytest.fixture
def rows(rng) -> np.ndarray:
    return rng.normal(size=(50, 6))


def test_numpy_source_matches_numpy_slicing(rows):
    window = RowWindow(rows, 10, 37)
    expected = rows[10:37]
    assert window.shape == (27, 6) and len(window) == 27
    assert window.dtype == rows.dtype
    assert window.chunks == (4096, 6)  # numpy has no chunks
    for key in [slice(None), slice(0, 5), slice(3, 27), slice(-5, None), slice(None, -3),
                slice(20, 100), slice(-100, 4), slice(8, 2), slice(27, 30)]:
        np.testing.assert_array_equal(window[key], expected[key], err_msg=str(key))
    np.testing.assert_array_equal(window[4:9, 2:5], expected[4:9, 2:5])
    np.testing.assert_array_equal(window[4:9, [0, 5]], expected[4:9, [0, 5]])
    np.testing.assert_array_equal(window[0], rows[10])
    np.testing.assert_array_equal(window[-1], rows[36])
    np.testing.assert_array_equal(window[np.int64(3)], rows[13])
    np.testing.assert_array_equal(window[3, 1:4], rows[13, 1:4])


def test_step_slices_read_the_span_then_subsample(rows):
    window = RowWindow(rows, 1, 20)
    for key in (slice(0, 10, 2), slice(None, None, -1), slice(15, 3, -4)):
        np.testing.assert_array_equal(window[key], rows[1:20][key], err_msg=str(key))


@pytest.mark.parametrize("key", [[1, 2], np.array([0]), 1.5, True, (1, 2, 3)])
def test_other_indices_raise_type_error(rows, key):
    with pytest.raises(TypeError):
        RowWindow(rows, 1, 20)[key]


def test_row_index_out_of_range(rows):
    window = RowWindow(rows, 5, 10)
    with pytest.raises(IndexError):
        window[5]
    with pytest.raises(IndexError):
        window[-6]


@pytest.mark.parametrize("first, stop", [(-1, 5), (5, 5), (6, 5), (0, 51), (50, 51)])
def test_bounds_are_validated(rows, first, stop):
    with pytest.raises(ValueError, match=f"first={first}, stop={stop}"):
        RowWindow(rows, first, stop)


def test_whole_source_and_last_row(rows):
    np.testing.assert_array_equal(RowWindow(rows, 0, 50)[:], rows)
    np.testing.assert_array_equal(RowWindow(rows, 49, 50)[:], rows[49:])


def test_read_only(rows):
    with pytest.raises(ValueError):
        RowWindow(rows, 0, 5)[0:1] = 0


def test_segmented_source_across_segments(rows):
    source = SegmentedRows([rows[:20], rows[20:33], rows[33:]], np.float32, chunk_rows=7)
    window = RowWindow(source, 15, 40)
    assert window.chunks == (7, 6) and window.dtype == np.float32
    np.testing.assert_array_equal(window[2:22], rows[17:37].astype(np.float32))


def test_zarr_array_from_dataset_store(tmp_path, rows):
    datasets = DatasetStore(tmp_path / "data")
    datasets.create("d", rows.shape[1], "float64")
    datasets.put_chunk("d", 0, rows)
    datasets.commit("d")
    source = datasets.open_array("d")
    window = RowWindow(source, 12, 44)
    assert window.chunks == (int(source.chunks[0]), 6)
    assert window.dtype == np.float64 and window.shape == (32, 6)
    np.testing.assert_array_equal(window[:], rows[12:44])
    np.testing.assert_array_equal(window[-4:, 1:3], rows[40:44, 1:3])
    np.testing.assert_array_equal(window[7], rows[19])
