"""`store.jobs.archive`: a completed model exported as one tar and imported into another data folder, and every
kind of damaged or hostile archive refused before anything is created. Imports pass the real serving
check (`workers.archive.check_served`), whose own tests are in tests/workers/test_import_check.py."""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path

import numpy as np
import pytest

from store import CheckpointStore, DatasetStore, ModelRegistry
from store.jobs.archive import CHECKPOINT, MANIFEST, MEMBERS, RECORD, ROWS, ModelExport, import_archive
from store.errors import Conflict, Invalid
from store.jobs.records import ModelRecord
from tests.store.store_helpers import (all_files, build, link, members, regular, with_manifest_digests, write_archive,
                                       zip_bomb)
from workers.archive import check_served


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> tuple[Path, np.ndarray]:
    """A data folder with model ``m`` (KHA-SMD, 3 components, 3 passes) completed on data set ``d``
    (160 rows of 6 features in chunks of 50, 50, 60), fitted in this process; and the rows."""
    from workers.fit import FitJob

    root = tmp_path_factory.mktemp("source")
    rows = np.random.default_rng(20240531).normal(size=(160, 6))
    datasets = DatasetStore(root)
    datasets.create("d", 6, "float64")
    for index, (start, stop) in enumerate(((0, 50), (50, 100), (100, 160))):
        datasets.put_chunk("d", index, rows[start:stop])
    datasets.commit("d")
    ModelRegistry(root).create(ModelRecord.new("m", datasets.get("d"), kernel={"type": "gaussian", "sigma": 3.0},
                                               n_components=3, solver="kha-smd",
                                               params={"passes": 3, "seed": 0, "init": "random"}))
    assert FitJob(root).run("m") == "completed"
    return root, rows


@pytest.fixture(scope="module")
def archive(fitted, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("archive") / "m.tar"
    export = ModelExport(fitted[0], "m")
    write_archive(export, path)
    assert path.stat().st_size == export.size
    return path


def project(root: Path, name: str, X: np.ndarray) -> np.ndarray:
    from workers.serve import project_rows

    return project_rows(str(root), name, X)


def test_round_trip_into_another_data_folder_serves_identically(fitted, archive, tmp_path, rng):
    source, rows = fitted
    target = tmp_path / "target"
    target.mkdir()
    record = import_archive(target, archive, name="copy", dataset="rows", check_served=check_served)
    assert (record.name, record.dataset, record.dataset_version, record.status) == ("copy", "rows", 1, "completed")
    original = ModelRegistry(source).get("m")
    assert record.history == original.history and record.params_used == original.params_used
    meta = DatasetStore(target).get("rows")
    assert meta.checksum == DatasetStore(source).get("d").checksum and meta.n_rows == 160
    assert [c["pass"] for c in CheckpointStore(target).list("copy")] == [3]
    X = rng.normal(size=(7, 6))
    np.testing.assert_allclose(project(target, "copy", X), project(source, "m", X), rtol=0, atol=1e-12)
    assert not (target / ".imports").exists() or not any((target / ".imports").iterdir())

    again = import_archive(target, archive, name="copy2", dataset="rows", check_served=check_served)  # reused
    assert again.dataset == "rows" and DatasetStore(target).get("rows").version == 1
    with pytest.raises(Conflict) as taken:
        import_archive(target, archive, name="copy", dataset="rows", check_served=check_served)
    assert taken.value.field == "name"


def test_a_data_set_of_that_name_with_other_rows_is_a_conflict(archive, tmp_path):
    datasets = DatasetStore(tmp_path)
    datasets.create("d", 6, "float64")
    datasets.put_chunk("d", 0, np.ones((4, 6)))
    datasets.commit("d")
    with pytest.raises(Conflict) as clash:
        import_archive(tmp_path, archive, check_served=check_served)
    assert clash.value.field == "dataset" and "dataset=" in clash.value.message
    assert not (tmp_path / "models").exists() or not ModelRegistry(tmp_path).list()


def test_a_sharded_checkpoint_is_joined(fitted, tmp_path):
    """The served checkpoint rewritten as a manifest with two parts exports as one plain checkpoint with
    the same arrays."""
    source, _ = fitted
    copy = tmp_path / "sharded"
    import shutil

    shutil.copytree(source, copy)
    checkpoints = CheckpointStore(copy)
    state = checkpoints.load("m", 3)
    split = {k for k, v in state.items() if isinstance(v, np.ndarray) and v.ndim == 2 and v.shape[-1] == 160}
    assert {"A", "AK"} <= split
    for first, stop in ((0, 70), (70, 160)):
        checkpoints.save_part("m", 3, first, stop, {k: state[k][:, first:stop] for k in split})
    saved = checkpoints.save("m", 3, {k: v for k, v in state.items() if k not in split}, parts=[(0, 70), (70, 160)])
    ModelRegistry(copy).update("m", checkpoint={"pass": 3, "sha256": saved["sha256"]})  # as a sharded fit records it
    path = tmp_path / "sharded.tar"
    write_archive(ModelExport(copy, "m"), path)
    target = tmp_path / "target"
    target.mkdir()
    import_archive(target, path, check_served=check_served)
    imported = CheckpointStore(target).load("m")
    assert CheckpointStore(target).parts_of("m", 3) is None and imported.keys() == state.keys()
    for key, value in state.items():
        np.testing.assert_array_equal(imported[key], value)


def test_only_a_completed_model_is_exported(fitted):
    registry = ModelRegistry(fitted[0])
    registry.create(ModelRecord.new("queued", DatasetStore(fitted[0]).get("d"), kernel={"type": "linear"},
                                    n_components=2, solver="kha", params={}))
    with pytest.raises(Conflict) as refused:
        ModelExport(fitted[0], "queued")
    assert refused.value.field == "name" and "completed" in refused.value.message
    registry.delete("queued")


# ---------------------------------------------------------------- refusals
def refused(root: Path, path: Path, *words: str, check=check_served) -> None:
    """``import_archive`` (serving checked by ``check``) refuses the archive on ``body`` with ``words`` in
    its message, and leaves no file."""
    before = all_files(root)
    with pytest.raises(Invalid) as caught:
        import_archive(root, path, check_served=check)
    assert caught.value.field == "body"
    for word in words:
        assert word in caught.value.message, caught.value.message
    assert all_files(root) - before <= {".imports"}
    assert not DatasetStore(root).list() and not ModelRegistry(root).list()


def test_a_tampered_member_is_refused(archive, tmp_path):
    content = members(archive)
    rows = bytearray(content[ROWS])
    rows[-1] ^= 0x01
    path = build(tmp_path / "t.tar", [regular(n, bytes(rows) if n == ROWS else content[n]) for n in MEMBERS])
    refused(tmp_path / "root", path, ROWS, "sha256")


def test_a_tampered_member_with_a_matching_manifest_is_still_refused(archive, tmp_path):
    """Rewriting the manifest's digests does not help: the rows must still match the data set checksum."""
    content = members(archive)
    rows = bytearray(content[ROWS])
    rows[-1] ^= 0x01
    content = with_manifest_digests(dict(content, **{ROWS: bytes(rows)}), MANIFEST)
    refused(tmp_path / "root", build(tmp_path / "t.tar", [regular(n, content[n]) for n in MEMBERS]),
            ROWS, "checksum")


@pytest.mark.parametrize("hostile", [
    regular("../x", b"x"), regular("/etc/x", b"x"), link("model.json"), link("rows.npy", tarfile.LNKTYPE, "x"),
    regular("extra.txt", b"x"),
], ids=["dotdot", "absolute", "symlink", "hardlink", "unknown"])
def test_hostile_member_names_and_links_are_refused(archive, tmp_path, hostile):
    content = members(archive)
    path = build(tmp_path / "h.tar", [hostile] + [regular(n, content[n]) for n in MEMBERS])
    root = tmp_path / "root"
    refused(root, path, repr(hostile[0].name))
    assert not (tmp_path / "x").exists() and not Path("/etc/x").exists()


def test_a_duplicate_member_is_refused(archive, tmp_path):
    content = members(archive)
    path = build(tmp_path / "d.tar", [regular(n, content[n]) for n in MEMBERS] + [regular(RECORD, b"{}")])
    refused(tmp_path / "root", path, "twice")


def test_a_truncated_archive_is_refused(archive, tmp_path):
    data = archive.read_bytes()
    for cut in (len(data) // 2, 700, len(data) - 3000):
        path = tmp_path / f"cut-{cut}.tar"
        path.write_bytes(data[:cut])
        refused(tmp_path / "root", path)


def test_a_newer_format_is_refused(archive, tmp_path):
    content = members(archive)
    manifest = json.loads(content[MANIFEST])
    manifest["format_version"] = 2
    newer = dict(content, **{MANIFEST: json.dumps(manifest).encode()})
    refused(tmp_path / "root", build(tmp_path / "n.tar", [regular(n, newer[n]) for n in MEMBERS]),
            "format_version 2")


def test_the_serving_check_decides_after_every_other_check(archive, tmp_path):
    """The caller's ``check_served`` sees the checkpoint's state, the record and the rows once everything
    else passed; its ValueError is the refusal on ``body``, and nothing is created."""
    seen = []

    def refuse(state, record, rows):
        seen.append((state["solver"], record.name, rows.shape))
        raise ValueError(f"{CHECKPOINT}: refused by the caller")

    refused(tmp_path / "root", archive, CHECKPOINT, "refused by the caller", check=refuse)
    assert seen == [("kha-smd", "m", (160, 6))]


def test_not_a_tar_is_refused(tmp_path):
    path = tmp_path / "junk.tar"
    path.write_bytes(b"not an archive at all" * 100)
    refused(tmp_path / "root", path, "tar")


def test_start_up_sweeps_what_interrupted_imports_left(tmp_path):
    from store.jobs.archive import STALE_IMPORT_S, sweep_imports

    imports = tmp_path / ".imports"
    (imports / "0123abcd").mkdir(parents=True)
    (imports / "0123abcd" / "rows.npy").write_bytes(b"x" * 10)
    (imports / ".upload-old.tar").write_bytes(b"y" * 10)
    (imports / ".upload-new.tar").write_bytes(b"z" * 10)
    old = imports.stat().st_mtime - STALE_IMPORT_S - 60
    for stale in (imports / "0123abcd", imports / ".upload-old.tar"):
        os.utime(stale, (old, old))
    assert sweep_imports(tmp_path) == [".upload-old.tar", "0123abcd"]
    assert [p.name for p in imports.iterdir()] == [".upload-new.tar"]  # an import may still be writing it
    assert sweep_imports(tmp_path / "never-used") == []


# ------------------------------------------------------- issue 30: sizes, digests, damage
def test_a_checkpoint_member_that_would_inflate_past_the_limit_is_refused_unread(archive, tmp_path):
    content = members(archive)
    content = with_manifest_digests(dict(content, **{CHECKPOINT: zip_bomb(content[CHECKPOINT], 64 << 20)}), MANIFEST)

    def never(*_args):  # the refusal comes before the checkpoint is read, let alone served
        raise AssertionError("the checkpoint was read")

    refused(tmp_path / "root", build(tmp_path / "t.tar", [regular(n, content[n]) for n in MEMBERS]),
            CHECKPOINT, "'bomb.npy'", "at most", check=never)


def test_a_checkpoint_member_failing_its_digest_is_refused_even_with_a_matching_manifest(archive, tmp_path):
    import io
    import zipfile

    content = members(archive)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(content[CHECKPOINT])) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            body = source.read(info)
            if info.filename == "A.npy":
                body = body[:-1] + bytes([body[-1] ^ 0x01])  # CRC recomputed by zipfile: only our digest sees it
            target.writestr(info, body)
    content = with_manifest_digests(dict(content, **{CHECKPOINT: out.getvalue()}), MANIFEST)
    refused(tmp_path / "root", build(tmp_path / "t.tar", [regular(n, content[n]) for n in MEMBERS]),
            CHECKPOINT, "'A'", "sha256")


def test_an_import_drops_the_error_text_and_names_its_checkpoint(archive, tmp_path):
    content = members(archive)
    doc = json.loads(content[RECORD])
    doc["error"] = {"code": "internal", "message": "call this number"}
    content = with_manifest_digests(dict(content, **{RECORD: json.dumps(doc).encode()}), MANIFEST)
    root = tmp_path / "root"
    root.mkdir()
    record = import_archive(root, build(tmp_path / "t.tar", [regular(n, content[n]) for n in MEMBERS]),
                            check_served=check_served)
    assert record.error is None and ModelRegistry(root).get("m").error is None
    assert record.checkpoint.pass_ == 3
    assert CheckpointStore(root).verify("m", 3, record.checkpoint.sha256) == record.checkpoint.sha256


def test_a_damaged_or_missing_checkpoint_is_not_exported(fitted, tmp_path):
    import shutil

    from store.errors import DamagedCheckpoint

    copy = tmp_path / "copy"
    shutil.copytree(fitted[0], copy)
    path = copy / "models" / "m" / "checkpoints" / "pass-00003.npz"
    body = bytearray(path.read_bytes())
    body[len(body) // 3] ^= 0x01
    path.write_bytes(bytes(body))
    with pytest.raises(DamagedCheckpoint):
        ModelExport(copy, "m")
    path.unlink()
    assert (copy / "models" / "m" / "checkpoints" / "pass-00002.npz").exists()  # not exported instead
    with pytest.raises(DamagedCheckpoint, match="missing"):
        ModelExport(copy, "m")


@pytest.mark.parametrize("where", ["instead of the end", "after the end"])
def test_a_trailing_truncated_member_declaring_8_gib_is_refused(fitted, archive, tmp_path, where):
    """Issue 52, item 7: a member header cut short after the last member (declaring 8 GiB) was taken by
    `tarfile` for the archive's end, and the archive was accepted."""
    info = tarfile.TarInfo("rows.npy")
    info.size = 8 << 30
    header = info.tobuf(format=tarfile.GNU_FORMAT)[:300]
    body = archive.read_bytes()
    end = len(body) - 1024 if where == "instead of the end" else len(body)
    assert body[end:] == bytes(len(body) - end)
    damaged = tmp_path / "trailing.tar"
    damaged.write_bytes(body[:end] + header)
    target = tmp_path / "target"
    target.mkdir()
    with pytest.raises(Invalid, match="after the last member") as refused:
        import_archive(target, damaged, name="copy", dataset="rows", check_served=check_served)
    assert refused.value.field == "body"
    assert not ModelRegistry(target).list() and not DatasetStore(target).list()
