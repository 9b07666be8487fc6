"""CSV chunk bodies as float64 arrays, parsed piece by piece with bounded memory (issue 30, item 2).

The rows are counted first (`count_csv_rows`: the lines holding something other than white space,
with numpy, a piece at a time), so that a body over the row limit is refused before it is parsed and
the result is allocated once; then the body is parsed `CSV_PIECE_BYTES` at a time, each piece ending
at a line end outside quotes, into that array. A piece of plain numbers (the common case) is read by
numpy (`_fast_piece`), any other by Python's ``csv`` reader and ``float`` (`_slow_piece`), which also
gives every error its line and column. Python objects exist for one piece at a time: memory is the
float64 result plus a few pieces, not the decoded text and a growing buffer of the whole body.
"""

from __future__ import annotations

import array
import codecs
import csv
import io
import math
import re
from dataclasses import dataclass

import numpy as np

from service.errors import ApiError
from service.limits import check_rows

#: Bytes of CSV text parsed at once (a piece ends at the first line end after this many bytes).
CSV_PIECE_BYTES = 1 << 18
#: Bytes looked at at once while the rows are counted (numpy temporaries of 9 bytes per byte).
COUNT_PIECE_BYTES = 1 << 18

_LINE_END = re.compile(rb"\r\n|\r|\n")
#: what ``str.strip`` removes among ASCII bytes: a line of these only is blank
_BLANK = np.zeros(256, dtype=bool)
_BLANK[list(b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f")] = True
#: a byte that no piece of plain numbers holds, and an empty field (a comma beside a comma or a line end)
_NOT_PLAIN = re.compile(rb"[^0-9eE+\-., \t\r\n]")
_EMPTY_FIELD = re.compile(rb",[ \t]*(?:,|\r|\n|\Z)|(?:\A|\r|\n)[ \t]*,")
_COMMAS_TO_SPACES = bytes.maketrans(b",", b" ")
_SENTINEL, _SENTINEL_VALUE = b" 7", 7.0


def count_csv_rows(body: bytes | bytearray, start: int = 0) -> int:
    """The lines of ``body[start:]`` holding a byte other than ASCII white space (``\\n``, ``\\r\\n``
    and ``\\r`` end lines, as in the ``csv`` reader): exactly the data rows plus a header for ASCII text
    without quotes, otherwise at least them (a quoted line end starts a line the reader does not).
    Cost O(body) in numpy, `COUNT_PIECE_BYTES` at a time; memory 9 bytes per byte of a piece."""
    total, open_line_has_content = 0, False
    view = memoryview(body)
    for begin in range(start, len(body), COUNT_PIECE_BYTES):
        stop = min(begin + COUNT_PIECE_BYTES, len(body))
        b = np.frombuffer(view[begin:stop], dtype=np.uint8)
        ends, line = _line_ends(b, body[stop] if stop < len(body) else 0)
        lines_with_content = line[~_BLANK[b]]
        if lines_with_content.size:
            total += 1 + int(np.count_nonzero(np.diff(lines_with_content)))
            if open_line_has_content and lines_with_content[0] == 0:
                total -= 1  # the line carried over from the previous piece was counted there
        n_ends = int(line[-1] + ends[-1])
        if n_ends:
            open_line_has_content = bool(lines_with_content.size) and int(lines_with_content[-1]) == n_ends
        else:
            open_line_has_content = open_line_has_content or bool(lines_with_content.size)
    return total


def _line_ends(b: np.ndarray, following: int) -> tuple[np.ndarray, np.ndarray]:
    """For the bytes ``b`` (followed by the byte ``following``, 0 at the end): which bytes end a line
    (``\\n``, and ``\\r`` not before ``\\n``), and the line (counted from 0) each byte belongs to, its end
    included. Cost O(len(b)) in numpy, 9 bytes per byte."""
    ends = b == 10
    ends[:-1] |= (b[:-1] == 13) & (b[1:] != 10)
    ends[-1] |= b[-1] == 13 and following != 10
    return ends, np.cumsum(ends, dtype=np.int32) - ends


def max_line_bytes(n_columns: int) -> int:
    """The longest CSV line read for rows of ``n_columns`` values (0: unknown): 64 bytes a value and
    4 KiB more (a float64 takes at most 24 characters, quoted and spaced a few more), and never less
    than `CSV_PIECE_BYTES`. O(1)."""
    return max(CSV_PIECE_BYTES, 64 * max(0, int(n_columns)) + 4096)


def _piece_end(body: bytes | bytearray, position: int, max_line: int | None = None) -> int:
    """Where the piece starting at ``position`` ends: after the first line end at or past
    `CSV_PIECE_BYTES` with an even number of quotes before it (not inside a quoted field), or the
    end of the body. The line that crosses `CSV_PIECE_BYTES` (the only one a piece does not bound)
    longer than ``max_line`` bytes is a 422 on ``rows`` naming it, before it is parsed: one line of
    millions of fields would otherwise become millions of Python strings. Cost O(piece)."""
    target = position + CSV_PIECE_BYTES
    if target >= len(body):
        return len(body)
    line_start = max(body.rfind(b"\n", position, target), body.rfind(b"\r", position, target)) + 1 or position
    odd = body.count(b'"', position, target) % 2
    cut = len(body)
    while True:
        match = _LINE_END.search(body, target)
        if match is None:
            break
        odd ^= body.count(b'"', target, match.start()) % 2
        if not odd:
            cut = match.end()
            break
        target = match.end()
    if max_line is not None and cut - line_start > max_line:
        line = _line_count(body[:line_start]) + 1
        raise ApiError(422, "invalid", f"line {line} of the CSV body is {cut - line_start} bytes long, more than a "
                       f"row of this data set's values can take ({max_line}); check the separator (a comma) "
                       "and the line ends", "rows")
    return cut


@dataclass
class _State:
    """Where the parse stands: the result array, rows in it, width, lines and header seen."""

    n_columns: int
    max_rows: int | None
    counted: int  # non-blank lines (`count_csv_rows`)
    exact: bool  # whether ``counted`` is exact (ASCII without quotes)
    body_bytes: int
    out: np.ndarray | None = None
    n_rows: int = 0
    width: int | None = None
    first_line: int | None = None
    header_checked: bool = False
    header: bool = False
    lines: int = 0  # lines of the pieces before this one (as the csv reader counts them)

    def start_rows(self, width: int, line: int) -> None:
        """The first data row (``width`` values, on ``line``): refuse a count over the limit, allocate."""
        self.width, self.first_line = width, line
        rows = self.counted - self.header
        if self.exact and self.max_rows is not None:
            check_rows(rows, self.max_rows)  # counted before the rows are parsed
        most = (self.body_bytes + 1) // (2 * width) + 1  # a row of w values takes 2w bytes at least
        self.out = np.empty((max(1, min(rows, most)), width), dtype=np.float64)

    def add(self, block: np.ndarray) -> None:
        """Append ``block`` (rows of ``width`` values) to the result (grown if the count fell short)."""
        width, out = self.started_width(), self.out
        assert out is not None  # allocated by `start_rows`, with the width
        end = self.n_rows + block.shape[0]
        if end > out.shape[0]:  # cannot happen (the count is an upper bound); kept as a guard
            out = self.out = np.concatenate([out[:self.n_rows], np.empty((end - self.n_rows, width))])
        out[self.n_rows:end] = block
        self.n_rows = end

    def started_width(self) -> int:
        """``width``, set by `start_rows` at the first data row, before any row is added."""
        if self.width is None:
            raise RuntimeError("CSV rows read before the first data row set their width")
        return self.width


def rows_from_csv(body: bytes | bytearray, n_columns: int = 0, max_rows: int | None = None) -> np.ndarray:
    """A float64 array from CSV text: one row per line, values separated by commas.

    Format: UTF-8 (a byte-order mark is allowed), lines ending in ``\n``, ``\r\n`` or ``\r``, fields
    optionally double-quoted. Lines that are empty or hold only whitespace are ignored. The first
    other line is a header, and skipped, if none of its fields is a number (``x1,x2,x3``, or pandas'
    ``,x1,x2``); a first line with some numbers is data, so a typo in the first row is reported
    instead of being dropped as a header. Values are parsed as Python's ``float`` reads them
    (surrounding spaces allowed); one that is not finite (``nan``, ``inf``, ``1e999``) is refused naming
    its line and column.

    Parameters
    ----------
    body : bytes or bytearray
        The request body.
    n_columns : int
        Columns of the empty array returned when there are no data lines.
    max_rows : int, optional
        More data rows is a 413 on ``rows``: from the count before parsing (`count_csv_rows`) for
        ASCII text without quotes, else when line ``max_rows + 1`` is reached.

    Returns
    -------
    ndarray of shape (n_rows, n_values_per_line), float64

    Raises
    ------
    ApiError
        400 on ``"body"``: not UTF-8, malformed quoting, or a field that is not a number (naming its
        line, counting from 1 over the whole body including header and blank lines, its column and
        the field). 422 on ``"rows"``: lines with different numbers of values (naming the line), a value
        that is not finite (naming its line and column), or a line longer than a row of ``n_columns``
        values can be (`max_line_bytes`), refused unparsed.

    Notes
    -----
    Cost O(body) time; memory the float64 result (allocated once, from the count of rows) and a few
    times one piece (`CSV_PIECE_BYTES`) beside the body.
    """
    start = len(codecs.BOM_UTF8) if body.startswith(codecs.BOM_UTF8) else 0
    exact = body.isascii() and b'"' not in body
    state = _State(n_columns, max_rows, count_csv_rows(body, start), exact, len(body))
    position, max_line = start, max_line_bytes(n_columns)
    while position < len(body):
        cut = _piece_end(body, position, max_line)
        piece = bytes(memoryview(body)[position:cut])  # bytes, as numpy's text parser wants, from a bytearray too
        if state.width is None or not _fast_piece(piece, state.width, state):
            _slow_piece(piece, position - start, state)
        state.lines += _line_count(piece)
        position = cut
    if state.out is None:
        return np.empty((0, n_columns), dtype=np.float64)
    return state.out[:state.n_rows]


def _line_count(piece: bytes | bytearray) -> int:
    """Lines in ``piece`` as the csv reader counts them (its line ends, plus an unterminated last line)."""
    ends = piece.count(b"\n") + piece.count(b"\r") - piece.count(b"\r\n")
    return ends + (1 if piece and not piece.endswith((b"\n", b"\r")) else 0)


def _fast_piece(piece: bytes, width: int, state: _State) -> bool:
    """Read a piece of plain numbers with numpy into the result; False (nothing read) for any other
    piece, or one whose rows would pass the limit, which `_slow_piece` then reads or refuses with its
    line. Plain: only digits, ``+-.eE``, commas, spaces, tabs and line ends (`_NOT_PLAIN`), no empty
    field (`_EMPTY_FIELD`), ``width - 1`` commas (``width``: the data rows', from the first one) on every
    line that is not blank, and every field read whole by numpy's ``strtod`` (a field it stops in, such as
    ``1e`` or ``1-2``, is an error, or with an older numpy leaves the sentinel value after the piece unread).
    Cost O(piece) in numpy and two linear scans."""
    if _NOT_PLAIN.search(piece) is not None or _EMPTY_FIELD.search(piece) is not None:
        return False
    b = np.frombuffer(piece, dtype=np.uint8)
    _, line = _line_ends(b, 0)
    n_lines = int(line[-1]) + 1
    with_content = np.bincount(line[~_BLANK[b]], minlength=n_lines) > 0
    commas = np.bincount(line[b == 44], minlength=n_lines)
    if np.any(commas[with_content] != width - 1):
        return False
    n_rows = int(np.count_nonzero(with_content))
    if state.max_rows is not None and state.n_rows + n_rows > state.max_rows:
        return False
    try:  # a field strtod stops in: an error (numpy 2.3 on), a warning before; either way not plain
        values = np.fromstring(piece.translate(_COMMAS_TO_SPACES) + _SENTINEL, dtype=np.float64, sep=" ")
    except (ValueError, DeprecationWarning):
        return False
    if values.size != n_rows * width + 1 or values[-1] != _SENTINEL_VALUE or not np.isfinite(values).all():
        return False  # (a value that overflows to inf: `_slow_piece` names its line)
    state.add(values[:-1].reshape(n_rows, width))
    return True


def _is_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def _slow_piece(piece: bytes, offset: int, state: _State) -> None:
    """Read one piece (starting ``offset`` bytes into the text after a byte-order mark) with the csv
    reader and ``float`` into the result: header, blank lines, quotes, ``nan``; every refusal names its
    line. Cost O(piece) Python objects."""
    try:
        text = piece.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, "bad_request", f"CSV body is not UTF-8 text (invalid byte at offset {offset + exc.start})",
                       "body") from None
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    values = array.array("d")
    try:
        for fields in reader:
            line = state.lines + reader.line_num
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue  # blank line
            if not state.header_checked:
                state.header_checked = True
                if not any(_is_number(field) for field in fields):
                    state.header = True
                    continue  # a header: no field of the first line is a number
            if state.width is None:
                state.start_rows(len(fields), line)
            elif state.max_rows is not None and state.n_rows + len(values) // state.width >= state.max_rows:
                raise ApiError(413, "too_large", f"rows: line {line} is row {state.max_rows + 1}, over the limit "
                               f"of {state.max_rows} rows per request (KPCA_MAX_ROWS_PER_REQUEST); send them in "
                               "several requests", "rows")
            elif len(fields) != state.width:
                raise ApiError(422, "invalid", f"CSV rows are ragged: line {line} has {len(fields)} values, "
                               f"line {state.first_line} (the first row) has {state.width}", "rows")
            try:
                parsed = [float(field) for field in fields]
            except ValueError:
                column, bad = next((j, f) for j, f in enumerate(fields) if not _is_number(f))
                shown = bad if len(bad) <= 40 else bad[:40] + "..."
                raise ApiError(400, "bad_request", f"CSV line {line}, column {column + 1}: {shown!r} is not a number",
                               "body") from None
            if not all(map(math.isfinite, parsed)):  # named by its line here: the store knows only data rows
                column = next(j for j, v in enumerate(parsed) if not math.isfinite(v))
                raise ApiError(422, "invalid", f"rows: CSV line {line}, column {column + 1} is "
                               f"{fields[column].strip()!r}; every value must be finite (remove or impute the "
                               "rows that are not)", "rows")
            values.extend(parsed)
    except csv.Error as exc:
        raise ApiError(400, "bad_request", f"CSV line {state.lines + reader.line_num} is malformed: {exc}",
                       "body") from None
    if values:
        state.add(np.frombuffer(values, dtype=np.float64).reshape(-1, state.started_width()))
