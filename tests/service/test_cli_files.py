"""``kpca upload`` (and ``project``, ``denoise``) of a CSV file, and of files that are not tables of numbers:
a usage error naming the file, the line and what to give instead, never a traceback (issue 58, item 1: a CSV
crashed with 30 lines of numpy's "pickled (object) data")."""

from __future__ import annotations

import json

import numpy as np
import pytest

from client.files import BadFile, load_table


def test_csv_with_a_header_uploads_as_its_rows(kpca, tmp_path, rng):
    rows = rng.normal(size=(30, 4))
    path = tmp_path / "points.csv"
    path.write_text("x1,x2,x3,x4\n" + "\n".join(",".join(repr(float(v)) for v in row) for row in rows) + "\n\n")
    uploaded = kpca("--json", "upload", "from-csv", str(path))
    assert uploaded.exit_code == 0, uploaded.output
    meta = json.loads(uploaded.stdout)
    assert (meta["n_rows"], meta["n_features"], meta["status"]) == (30, 4, "ready")
    np.testing.assert_array_equal(load_table(path), rows)  # repr round-trips: the same values


@pytest.mark.parametrize(("content", "said"), [
    ("a,b\n1,2\n3,x\n", "line 3, column 2: 'x' is not a number"),
    ("1 2 3\n4 5\n", "line 2: 2 values where the first row has 3"),
    ("a,b\n1,2\n\n3,nan\n", "line 4, column 2: nan; every value must be finite"),
    ("h1,h2\n", "a header line and no rows of numbers"),
])
def test_a_bad_text_file_is_a_usage_error_naming_the_line(kpca, tmp_path, content, said):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    result = kpca("upload", "bad", str(path))
    assert result.exit_code == 2 and said in result.output and "Traceback" not in result.output
    with pytest.raises(BadFile, match=said.split(":")[0]):
        load_table(path)


def test_a_npy_of_objects_or_not_a_table_is_a_usage_error(kpca, tmp_path):
    objects = tmp_path / "objects.npy"
    np.save(objects, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    result = kpca("upload", "bad", str(objects))
    assert result.exit_code == 2 and "not a .npy file of numbers" in result.output and "Traceback" not in result.output
    cube = tmp_path / "cube.npy"
    np.save(cube, np.zeros((2, 2, 2)))
    assert "a 3-D array" in kpca("project", "any", str(cube)).output
    binary = tmp_path / "image.bin"
    binary.write_bytes(bytes(range(256)))
    assert "neither a .npy file nor text" in kpca("upload", "bad", str(binary)).output
    nan_npy = tmp_path / "nan.npy"
    np.save(nan_npy, np.array([[1.0, 2.0], [np.inf, 0.0]]))
    assert "row 2 of 2, column 1: inf" in kpca("upload", "bad", str(nan_npy)).output
