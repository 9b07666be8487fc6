"""Settings in one place (`service.settings`, `workers.settings`), in groups, each described once.

Defends against: a module reading a ``KPCA_*`` variable (or any setting) from the environment behind the
settings' back, where no flag, no ``--help`` and no validation sees it; a setting outside every group; a
description repeated in a docstring that drifts from it; a page of docs/ naming a variable that does not
exist, or a default that is not the setting's. No service is started.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from service.settings import (
    LimitSettings,
    PlacementSettings,
    ProcessSettings,
    SecuritySettings,
    ServerSettings,
    Settings,
)
from workers.settings import WorkerGroup, WorkerSettings

ROOT = Path(__file__).resolve().parents[2]
GROUPS = (ServerSettings, ProcessSettings, WorkerGroup, PlacementSettings, SecuritySettings, LimitSettings)
#: the only modules that read the environment, and why
READERS = {
    "service/settings.py": "the service's settings",
    "workers/settings.py": "the workers' settings",
    "workers/environ.py": "saves and puts back what the embedded cluster's nannies overwrite (any name)",
    "service/metrics.py": "prometheus_client's own PROMETHEUS_MULTIPROC_DIR, not a setting of ours",
}
#: variables the docs name that are not the service's settings: the client's, the tests' and bench's
OTHERS = {"KPCA_URL", "KPCA_API_KEY", "KPCA_DOCS_SCREENSHOTS", "KPCA_CHROMIUM", "KPCA_TEST_ARTEFACTS",
          "KPCA_BENCH_RESULTS"}


def environment_reads(tree: ast.AST) -> list[int]:
    """Lines of ``tree`` that read the environment: ``os.environ`` used other than to be written
    (``.get``, subscripts read, iteration), ``os.getenv``, ``os.environ.copy``."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "getenv":
            lines.append(node.lineno)
        if isinstance(node, ast.Attribute) and node.attr == "environ":
            parent = getattr(node, "parent", None)
            written = isinstance(parent, ast.Attribute) and parent.attr in ("update", "pop", "setdefault") or (
                isinstance(parent, ast.Subscript) and isinstance(parent.ctx, (ast.Store, ast.Del)))
            if not written:
                lines.append(node.lineno)
    return lines


def test_no_product_module_reads_the_environment_but_the_settings():
    found = {}
    for package in ("kpca", "store", "workers", "service"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                for child in ast.iter_child_nodes(node):
                    child.parent = node
            relative = path.relative_to(ROOT).as_posix()
            if environment_reads(tree) and relative not in READERS:
                found[relative] = environment_reads(tree)
    assert not found, f"read the environment outside the settings: {found}"


def test_every_setting_is_in_exactly_one_group_with_one_description():
    grouped = [name for group in GROUPS for name in group.model_fields]
    assert sorted(grouped) == sorted(Settings.model_fields) and len(grouped) == len(set(grouped))
    assert list(Settings.model_fields) == grouped  # ``--help`` lists them group by group
    assert list(WorkerSettings.model_fields) == list(WorkerGroup.model_fields)
    docstrings = " ".join(ast.get_docstring(node) or "" for path in ("service/settings.py", "workers/settings.py")
                          for node in ast.walk(ast.parse((ROOT / path).read_text()))
                          if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)))
    for name, field in Settings.model_fields.items():
        assert field.description, name
        assert f"``{name}``" not in docstrings and f"{name} :" not in docstrings, f"{name} described twice"


def test_a_worker_setting_that_cannot_be_read_names_its_variable(monkeypatch):
    monkeypatch.setenv("KPCA_BACKGROUND_POLICY", "fastest")
    with pytest.raises(ValueError, match="KPCA_BACKGROUND_POLICY"):
        Settings()
    monkeypatch.setenv("KPCA_BACKGROUND_POLICY", " Normal")
    assert Settings().background_policy == "normal"
    assert Settings(fit_nice=40, preimage_nice=-1).worker_environ() == {
        "KPCA_FIT_NICE": "19", "KPCA_PREIMAGE_NICE": "0", "KPCA_BACKGROUND_POLICY": "normal",
        "KPCA_SHARD_MIN_ROWS": "50000", "KPCA_LEASE_TTL_S": "60.0", "KPCA_READ_CACHE_MB": "1024.0"}


@pytest.mark.parametrize("page", ["README.md", "docs/api.md", "docs/limits.md", "docs/scaling.md",
                                  "docs/security.md", "docs/dashboard.md", "docs/denoising.md"])
def test_every_variable_the_docs_name_is_a_setting(page):
    named = set(re.findall(r"KPCA_[A-Z0-9_]*[A-Z0-9]", (ROOT / page).read_text()))
    settings = {f"KPCA_{name.upper()}" for name in Settings.model_fields}
    assert named - settings - OTHERS == set(), page


def _number(text: str) -> float:
    """The leading number of a default as docs/limits.md writes it: ``4,194,304 (2048²)``, ``16 MiB``,
    ``30 s``."""
    match = re.match(r"([\d,.]+)\s*(KiB|MiB|GiB)?", text.strip())
    scale = {None: 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[match.group(2)]
    return float(match.group(1).replace(",", "")) * scale


def test_the_limits_table_gives_each_settings_default():
    rows = re.findall(r"^\| (`KPCA_[^|]+) \| ([^|]+) \|", (ROOT / "docs" / "limits.md").read_text(), re.M)
    assert len(rows) > 10
    for variables, defaults in rows:
        names = re.findall(r"KPCA_(\w+)", variables)
        values = [v for v in defaults.split(",") if v.strip()] if len(names) > 1 else [defaults]
        for name, value in zip(names, values):
            field = Settings.model_fields[name.lower()]
            if value.strip().startswith("automatic"):
                assert field.default is None, name
            else:
                assert _number(value) == field.default, (name, value, field.default)
