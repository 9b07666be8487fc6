"""Helpers shared by the store tests (a uniquely named module, not conftest)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path


def temp_leftovers(root: Path) -> list[str]:
    """Paths under ``root`` that look like temporary or tombstone files."""
    found = []
    for folder, dirs, files in os.walk(root):
        for entry in dirs + files:
            if ".tmp" in entry or ".deleted-" in entry:
                found.append(os.path.join(folder, entry))
    return found


def all_files(path: Path) -> set[str]:
    """Every file and folder below ``path``, relative to it, but the lock files a folder object store keeps beside
    its objects (``.{name}.lock``, `store.objects.folder`)."""
    return {str(p.relative_to(path)) for p in path.rglob("*")
            if not (p.name.startswith(".") and p.name.endswith(".lock"))}


# ---------------------------------------------------------------- model archives (tar members)
def members(path: Path) -> dict[str, bytes]:
    """Every member of the tar at ``path``, by name."""
    with tarfile.open(path) as tar:
        return {info.name: tar.extractfile(info).read() for info in tar}


def build(path: Path, entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    """A tar at ``path`` holding ``entries`` in order; returns ``path``."""
    with tarfile.open(path, "w") as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def regular(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    """A regular-file member ``name`` holding ``data``."""
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def link(name: str, kind=tarfile.SYMTYPE, to: str = "/etc/passwd") -> tuple[tarfile.TarInfo, None]:
    """A link member ``name`` (symbolic by default) pointing at ``to``."""
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, to
    return info, None


def with_manifest_digests(content: dict[str, bytes], manifest_name: str = "manifest.json") -> dict[str, bytes]:
    """``content`` (members by name) with the manifest's sizes and sha256 rewritten to match the others."""
    manifest = json.loads(content[manifest_name])
    for entry in manifest["members"]:
        entry["sha256"] = hashlib.sha256(content[entry["name"]]).hexdigest()
        entry["size"] = len(content[entry["name"]])
    return dict(content, **{manifest_name: json.dumps(manifest).encode()})


def zip_bomb(checkpoint_npz: bytes, inflated: int) -> bytes:
    """The checkpoint with one more member: a deflated .npy of ``inflated`` bytes of zeros (a multiple of
    8 MiB), the other members stored as they were (a zip bomb)."""
    import zipfile

    from numpy.lib import format as npy_format

    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(checkpoint_npz)) as source, \
            zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1, allowZip64=True) as target:
        for info in source.infolist():
            target.writestr(info, source.read(info))  # stored, as they were
        with target.open("bomb.npy", "w", force_zip64=True) as member:
            npy_format.write_array_header_1_0(member, {"descr": "<f8", "fortran_order": False,
                                                       "shape": (inflated // 8,)})
            block = bytes(8 << 20)
            for _ in range(inflated // len(block)):
                member.write(block)
    return out.getvalue()


def write_archive(export, path: Path | str) -> None:
    """Write the whole of a `store.jobs.archive.ModelExport` (an iterable of byte blocks) to ``path``."""
    with open(path, "wb") as out:
        for block in export:
            out.write(block)
