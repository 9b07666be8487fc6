"""`store.npy`: .npy headers read without ``ast`` in any thread.

numpy parses every .npy header with ``ast.literal_eval``, which CPython before 3.11.8 / 3.12.2 cannot run
in two threads at once (python/cpython#106905): a chunk upload under bench/load.py failed with
``SystemError: AST constructor recursion depth mismatch`` (a 500). The race is too rare to provoke in a
test, so these tests check what removes it: the headers numpy writes are read with ``ast`` out of reach,
what numpy reads is read the same, and any other header is parsed one thread at a time.
"""

from __future__ import annotations

import ast
import io
import threading
import zipfile

import numpy as np
import pytest
from numpy.lib import format as npy_format

from store.npy import NpzArchive, map_npy, parse_header, read_array, read_header, read_npy

ARRAYS = {
    "rows": np.arange(12.0).reshape(3, 4),
    "float32": np.ones((5, 2), dtype=np.float32),
    "big_endian": np.arange(6, dtype=">f4").reshape(2, 3),
    "vector": np.arange(7, dtype=np.int64),
    "scalar": np.array(3),
    "empty": np.zeros((0, 16)),
    "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
    "text": np.asarray('{"a": 1}', dtype=np.str_),
    "flags": np.array([True, False]),
}


@pytest.fixture
def no_ast(monkeypatch):
    """``ast.parse`` and ``ast.literal_eval`` fail the test if anything calls them."""
    def refuse(*args, **kwargs):
        raise AssertionError("ast was used to read a .npy header")
    monkeypatch.setattr(ast, "literal_eval", refuse)
    monkeypatch.setattr(ast, "parse", refuse)


def npy_bytes(array: np.ndarray, version=None) -> bytes:
    buffer = io.BytesIO()
    npy_format.write_array(buffer, array, version=version)
    return buffer.getvalue()


@pytest.mark.parametrize("version", [None, (2, 0), (3, 0)])
def test_the_headers_numpy_writes_are_read_without_ast_as_numpy_reads_them(no_ast, version):
    for name, array in ARRAYS.items():
        out = read_array(io.BytesIO(npy_bytes(array, version)))
        assert out.dtype == array.dtype and out.shape == array.shape and np.array_equal(out, array), name
        assert out.flags.writeable and out.flags.f_contiguous == array.flags.f_contiguous, name


def test_files_and_archives_are_read_without_ast(no_ast, tmp_path):
    np.save(tmp_path / "rows.npy", ARRAYS["rows"])
    assert np.array_equal(read_npy(tmp_path / "rows.npy"), ARRAYS["rows"])
    mapped = map_npy(tmp_path / "rows.npy")
    assert isinstance(mapped, np.memmap) and np.array_equal(mapped, ARRAYS["rows"]) and not mapped.flags.writeable
    np.savez(tmp_path / "archive.npz", **ARRAYS)
    with NpzArchive(tmp_path / "archive.npz") as archive:
        assert sorted(archive.files) == sorted(ARRAYS) and "rows" in archive
        for name, array in ARRAYS.items():
            assert np.array_equal(archive[name], array), name
        with pytest.raises(KeyError):
            archive["absent"]
    with pytest.raises(FileNotFoundError):
        NpzArchive(tmp_path / "absent.npz")
    (tmp_path / "damaged.npz").write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(zipfile.BadZipFile):
        NpzArchive(tmp_path / "damaged.npz")


def test_other_headers_are_parsed_as_numpy_would_and_bad_ones_refused():
    assert parse_header("{'shape': (2, 3), 'fortran_order': True, 'descr': '<f8'}") == ((2, 3), True, np.dtype("<f8"))
    structured = np.zeros(2, dtype=[("a", "<f4"), ("b", "<i2")])  # its descr is a list: not the fast path
    assert np.array_equal(read_array(io.BytesIO(npy_bytes(structured))), structured)
    for text in ("{'descr': '<f8', 'fortran_order': False}", "{'descr': '<f8', 'fortran_order': 0, 'shape': (2,)}",
                 "{'descr': 'nonsense', 'fortran_order': False, 'shape': (2,)}", "__import__('os')",
                 "{'descr': '<f8', 'fortran_order': False, 'shape': (-1,)}", "[" * 100_000):
        with pytest.raises(ValueError):
            parse_header(text)
    with pytest.raises(ValueError, match="truncated"):
        read_array(io.BytesIO(npy_bytes(ARRAYS["rows"])[:-8]))
    forged = npy_bytes(np.zeros((2, 2))).replace(b"(2, 2)", b"(1000000000000,)", 1)
    with pytest.raises(ValueError, match="announces 8000000000000 bytes"):  # refused before a byte is allocated
        read_array(io.BytesIO(forged), len(forged))
    with pytest.raises(ValueError, match="objects"):
        read_array(io.BytesIO(npy_bytes(np.array([None, 1], dtype=object))))
    with pytest.raises(ValueError):
        read_header(io.BytesIO(b"not a .npy file at all"))


def test_many_threads_read_headers_at_once(tmp_path):
    """Sixteen threads, each reading both kinds of header 300 times: every read right, none failing."""
    plain, structured = npy_bytes(ARRAYS["rows"]), npy_bytes(np.zeros(2, dtype=[("a", "<f4")]))
    failures: list = []

    def read_many():
        try:
            for _ in range(300):
                assert read_array(io.BytesIO(plain)).shape == (3, 4)
                assert read_array(io.BytesIO(structured)).shape == (2,)
        except Exception as exc:  # noqa: BLE001 (reported below)
            failures.append(repr(exc))

    threads = [threading.Thread(target=read_many) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
