"""The README and docs/ read as data: short enough to be a quick start, every page linked, every link and
anchor found, every `make` target and `kpca` command they name real, no address written into a command,
what the README's commands write ignored by git, and what they say of the logs true.

(The README's and docs/api.md's commands are run as pasted by tests/service/test_readme.py.)

Defends against: a README that grows back into a manual, a page nobody can reach, a link or a section
that moved, a command that was renamed, a port 8000 written where ``$KPCA_URL`` belongs, files the
quick start leaves untracked in the clone.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
MOST_README_LINES = 250


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _code_blocks(text: str) -> list[str]:
    return re.findall(r"```[a-z]*\n(.*?)```", text, re.S)


def _anchors(text: str) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    headings = re.findall(r"^#{1,6} (.+)$", prose, re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_the_readme_is_a_quick_start():
    lines = _text(README).splitlines()
    assert len(lines) <= MOST_README_LINES, f"README.md has {len(lines)} lines"
    headings = [line for line in lines if line.startswith("## ")]
    for wanted in ("## Two commands", "## Five minutes to a denoised picture", "## The command line",
                   "## From Python", "## Read more"):
        assert wanted in headings, wanted


def test_every_docs_page_is_linked_from_the_readme():
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)", _text(README)))
    assert {f"docs/{page.name}" for page in DOCS} <= linked, sorted({f"docs/{p.name}" for p in DOCS} - linked)


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: p.name)
def test_every_link_and_anchor_is_found(page):
    text = _text(page)
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", prose):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        found = (page.parent / path).resolve() if path else page
        assert found.exists(), f"{page.name}: {target} is not there"
        if anchor and found.suffix == ".md":
            assert anchor in _anchors(_text(found)), f"{page.name}: no heading for #{anchor} in {found.name}"


def test_the_make_targets_and_kpca_commands_named_exist():
    from client.cli import cli

    makefile = _text(ROOT / "Makefile")
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    commands = set(cli.commands)
    for page in [README, *DOCS]:
        text = _text(page)
        named = re.findall(r"`make ([a-z][\w-]*)", text)
        named += [t for block in _code_blocks(text) for t in re.findall(r"^make ([a-z][\w-]*)", block, re.M)]
        for target in named:
            assert target in targets, f"{page.name}: make {target}"
        for block in _code_blocks(text):
            code = "\n".join(line.split("  #", 1)[0] for line in block.splitlines())  # comments left out
            for command in re.findall(r"(?:^|[\s;/])kpca (?:--[\w-]+(?: \S+)? )*([a-z][\w-]*)", code, re.M):
                assert command in commands, f"{page.name}: kpca {command}"


def test_commands_read_the_address_from_kpca_url():
    """Issue 29, stumble 6: every snippet had port 8000 written in. A command reaches the service through
    ``$KPCA_URL`` (curl) or reads it (kpca, the examples); an address appears only where ``KPCA_URL`` is
    set or where another host is named."""
    for page in [README, *DOCS]:
        for block in _code_blocks(_text(page)):
            for line in block.replace("\\\n", " ").splitlines():  # a command continued over lines is one
                code = line.split("#", 1)[0] if not line.lstrip().startswith("curl") else line
                if re.search(r"(localhost|127\.0\.0\.1):\d+", code):
                    assert "KPCA_URL" in code or "other-host" in code, f"{page.name}: {line.strip()}"
                if line.lstrip().startswith(("curl", "until curl")):
                    assert "$KPCA_URL" in line, f"{page.name}: {line.strip()}"


def test_what_the_readme_writes_is_ignored_by_git():
    """Issue 29, stumble 6: the README's steps left four untracked camera-*.png files in the clone."""
    text = _text(README)
    written = set(re.findall(r"-o ([\w-]+\.[\w.]+)", text)) | set(re.findall(r"np\.save\('([\w.-]+)'", text))
    written |= {"camera-clean.png", "camera-noisy.png"}  # examples/noisy_camera.py's
    assert {"camera-denoised.png", "camera-compare.png", "components.npy", "digits.npy"} <= written, written
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *sorted(written)], cwd=ROOT, capture_output=True,
                             text=True)
    assert set(ignored.stdout.split()) == written, sorted(written - set(ignored.stdout.split()))


def test_the_dask_dashboard_is_described_as_the_log_says():
    """Issue 29, stumble 5: the README said the dask dashboard's address is logged; without bokeh the log
    says it is unavailable. The docs quote what `workers.dask_cluster.DaskCluster.describe` logs, both ways."""
    security = re.sub(r"\s+", " ", _text(ROOT / "docs" / "security.md"))
    source = _text(ROOT / "workers" / "dask_cluster.py")
    unavailable = "dask dashboard unavailable: it needs bokeh (pip install bokeh)"
    assert unavailable in security and "dask dashboard unavailable: it needs bokeh (pip install bokeh)" in source
    assert "dask dashboard (this machine only)" in security


def test_docker_compose_points_to_sections_that_exist():
    """Each "(FILE, *Section*)" a comment of docker-compose.yml points to is a heading of that file (issue 58,
    item 9: it pointed to the README for a section of docs/scaling.md)."""
    root = Path(__file__).resolve().parents[1]
    text = " ".join(line.strip().lstrip("#").strip() for line in (root / "docker-compose.yml").read_text().splitlines())
    pointers = re.findall(r"\((README|[\w/.-]+\.md), \*([^*]+)\*", text)
    assert pointers
    for name, heading in pointers:
        page = (root / ("README.md" if name == "README" else name)).read_text()
        assert re.search(rf"^#+ {re.escape(heading)}$", page, re.M), f"docker-compose.yml: {name} has no {heading!r}"
