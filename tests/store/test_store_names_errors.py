from __future__ import annotations

from pathlib import Path

import pytest

import store
from store import Conflict, Invalid, NotFound, StoreError, validate_name

GOOD_NAMES = ["a", "digits", "USPS-16.rbf_v2", "0", "x" * 64, "a.b", "a-", "9lives"]
BAD_NAMES = [
    "", "../x", "a/b", "..", ".", ".hidden", "-dash", "_under", "a..b", "x" * 65,
    "abc\n", "a b", "a\\b", "é", "a\x00b", "/abs", "con:1",
]


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_good_names_pass_unchanged(name):
    assert validate_name(name) == name


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_names_are_invalid_and_name_the_field(name):
    with pytest.raises(Invalid) as info:
        validate_name(name, field="dataset")
    assert info.value.field == "dataset"
    assert info.value.code == "invalid"


@pytest.mark.parametrize("name", [None, 3, b"abc", ["a"]])
def test_non_strings_are_invalid(name):
    with pytest.raises(Invalid) as info:
        validate_name(name)
    assert info.value.field == "name"


def test_error_codes_messages_and_fields():
    missing = NotFound("dataset", "x")
    assert (missing.code, missing.message, missing.field) == ("not_found", "dataset 'x' not found", None)
    assert str(missing) == "dataset 'x' not found"
    clash = Conflict("taken", field="name")
    assert (clash.code, clash.message, clash.field) == ("conflict", "taken", "name")
    assert Conflict("no field").field is None
    bad = Invalid("rows", "empty chunk")
    assert (bad.code, bad.message, bad.field) == ("invalid", "empty chunk", "rows")
    assert (bad.code, bad.message, bad.field) == ("invalid", "empty chunk", "rows")
    for error in (missing, clash, bad):
        assert isinstance(error, StoreError)


def test_package_reexports():
    for public in ("DatasetStore", "CheckpointStore", "ModelRegistry", "StoreError", "NotFound",
                   "Conflict", "Invalid"):
        assert hasattr(store, public)


def test_store_imports_no_http_or_dask():
    import subprocess
    import sys

    code = (
        "import sys, store; "
        "bad = [m for m in ('dask', 'distributed', 'fastapi', 'starlette', 'uvicorn') if m in sys.modules]; "
        "print(','.join(bad))"
    )
    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=repo)
    assert out.stdout.strip() == ""
