"""uv.lock, what `make install` and CI install from (`uv sync --frozen`), still says what pyproject.toml asks for.

`--frozen` installs the lock as it is without looking at pyproject.toml, so a dependency changed there and not
locked again (`make lock`) would go unnoticed: this test reads both files (no index, no uv) and compares the
project's requirements as uv recorded them with pyproject.toml's.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def _key(name: str, extras, specifier: str, marker: str | None) -> tuple:
    """A requirement as a comparable tuple: its name normalised, its extras sorted, its specifier and marker
    parsed (so that ``>=3,<4`` is ``<4,>=3`` and quotes do not count)."""
    return (canonicalize_name(name), tuple(sorted(extras)), SpecifierSet(specifier or ""),
            str(Marker(marker)) if marker else None)


def declared(project: dict) -> set[tuple]:
    """pyproject.toml's requirements, the optional ones with their extra as uv writes it in their marker."""
    found = set()
    groups = [(None, project["dependencies"]), *project.get("optional-dependencies", {}).items()]
    for extra, requirements in groups:
        for line in requirements:
            req = Requirement(line)
            marker = str(req.marker) if req.marker else None
            if extra is not None:
                marker = f"extra == '{extra}'" if marker is None else f"{marker} and extra == '{extra}'"
            found.add(_key(req.name, req.extras, str(req.specifier), marker))
    return found


def locked(lock: dict, name: str) -> set[tuple]:
    """The requirements uv.lock recorded for the project ``name``."""
    package = next(p for p in lock["package"] if canonicalize_name(p["name"]) == canonicalize_name(name))
    return {_key(r["name"], r.get("extras", ()), r.get("specifier", ""), r.get("marker"))
            for r in package["metadata"]["requires-dist"]}


def test_the_lock_file_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    assert lock["requires-python"] == project["requires-python"]
    wanted, recorded = declared(project), locked(lock, project["name"])
    assert wanted == recorded, ("uv.lock is out of date: run `make lock` and commit it; "
                                f"only in pyproject.toml {sorted(map(str, wanted - recorded))}, "
                                f"only in uv.lock {sorted(map(str, recorded - wanted))}")
