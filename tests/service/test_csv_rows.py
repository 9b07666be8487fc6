"""CSV chunk bodies are parsed with bounded memory (issue 30, item 2): the rows are counted before
they are parsed and land in one float64 array, piece by piece, instead of the decoded text of the whole
body plus a growing buffer of its values (a 64 MiB one-column chunk grew the API process by 727 MiB)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from service.csv_rows import CSV_PIECE_BYTES, count_csv_rows
from service.errors import ApiError
from service.payloads import rows_from_csv

ROWS = 2_000_000  # "1\n" each: a 4 MiB body, 16 MiB of float64


def traced_peak(function, *args):
    """``function(*args)`` and the peak of memory Python allocated while it ran (tracemalloc, which
    numpy and ``array`` report to), over what was allocated before."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        result = function(*args)
        return result, tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_a_one_column_csv_body_costs_its_float64_rows_and_a_few_pieces():
    body = b"x\n" + b"1\n" * (ROWS - 1) + b"2\n"
    rows, peak = traced_peak(rows_from_csv, body, 1)
    assert rows.shape == (ROWS, 1) and rows[-1, 0] == 2.0 and (rows[:-1] == 1.0).all()
    # the old parser held the decoded text (the body again) and an array.array that grew by copies
    # beside the result (2.2 times the result); now the result plus a few pieces' numpy temporaries
    assert peak < rows.nbytes + 32 * CSV_PIECE_BYTES, f"peak {peak / 2**20:.1f} MiB for {rows.nbytes / 2**20:.0f} MiB"


def test_too_many_csv_rows_are_refused_from_the_count_before_they_are_parsed():
    body = b"x\n" + b"1\n" * 3_000_000
    refusal, peak = traced_peak(_refusal, body, 2_000_000)
    assert (refusal.status_code, refusal.field) == (413, "rows")
    assert "3000000 rows is over the limit of 2000000" in refusal.message
    # the old parser read the first 2,000,000 rows (16 MiB of float64 and the decoded text) to refuse
    assert peak < 32 * CSV_PIECE_BYTES, f"peak {peak / 2**20:.1f} MiB before the refusal"


def test_one_line_of_millions_of_fields_is_refused_before_it_is_parsed():
    """Issue 30: a 4 MiB body of one line, "1,1,...,1" (2,000,000 fields), for a data set of 3 columns.
    Before: Python's csv reader split it into 2,000,000 strings (about 130 MiB) before the width was
    seen to be wrong."""
    body = b"0,0,0\n" + b",".join([b"1"] * 2_000_000) + b"\n" + b"2,2,2\n"
    refusal, peak = traced_peak(_refusal, body, None, 3)
    assert (refusal.status_code, refusal.field) == (422, "rows") and "line 2 " in refusal.message
    assert peak < 32 * CSV_PIECE_BYTES, f"peak {peak / 2**20:.1f} MiB before the refusal"
    wide = b",".join([b"0.12345678901234567"] * 20_000) + b"\n"  # a legitimately wide row: 400 KB
    assert rows_from_csv(wide * 2, 20_000).shape == (2, 20_000)


def _refusal(body: bytes, max_rows: int | None, n_columns: int = 1) -> ApiError | None:
    try:
        rows_from_csv(body, n_columns, max_rows)
    except ApiError as exc:
        return exc
    return None


@pytest.mark.parametrize("line_end", [b"\n", b"\r\n", b"\r"])
def test_pieces_keep_values_and_line_numbers_across_their_cuts(line_end):
    rng = np.random.default_rng(0)
    values = rng.normal(size=(40_000, 3))
    lines = [b"a,b,c", b""] + [",".join(repr(float(v)) for v in row).encode() for row in values]
    body = line_end.join(lines)
    assert len(body) > 3 * CSV_PIECE_BYTES
    assert count_csv_rows(body) == len(values) + 1  # the header too; the blank line not
    np.testing.assert_array_equal(rows_from_csv(body, 3), values)  # exact: Python's float and strtod agree
    quoted = body.replace(b"a,b,c", b'"a","b","c"') + line_end + b'"1","2","3"'
    np.testing.assert_array_equal(rows_from_csv(quoted, 3)[-1], [1, 2, 3])
    for bad, status, words in [(b"1,2,x", 400, f"CSV line {len(lines) + 1}, column 3: 'x'"),
                               (b"1,2", 422, f"line {len(lines) + 1} has 2 values, line 3 (the first row) has 3"),
                               (b'1,2,"3', 400, f"CSV line {len(lines) + 1} is malformed")]:
        with pytest.raises(ApiError) as caught:
            rows_from_csv(body + line_end + bad, 3)
        assert caught.value.status_code == status and words in caught.value.message, caught.value.message
    with pytest.raises(ApiError) as caught:
        rows_from_csv(body + line_end + "é".encode("latin-1"), 3)
    assert f"invalid byte at offset {len(body) + len(line_end)}" in caught.value.message


@pytest.mark.parametrize(("bad", "shown"), [(b"1,nan,3", "'nan'"), (b"1,2, inf", "'inf'"), (b"1e999,2,3", "'1e999'")])
def test_a_value_that_is_not_finite_is_named_by_its_line(bad, shown):
    """A CSV whose first line is a header: a NaN, an inf, or a number that overflows to inf is refused naming its
    CSV line and column (issue 58, item 5: the store's "row 1" counted data rows, not the file's lines)."""
    body = b"a,b,c\n\n1,2,3\n" + bad + b"\n4,5,6\n"
    with pytest.raises(ApiError) as caught:
        rows_from_csv(body, 3)
    column = 2 if b"nan" in bad else 3 if b"inf" in bad else 1
    assert caught.value.status_code == 422 and caught.value.field == "rows"
    assert f"CSV line 4, column {column} is {shown}; every value must be finite" in caught.value.message
