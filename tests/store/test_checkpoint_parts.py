"""Sharded checkpoints: parts written by each shard, a manifest written last by the coordinator."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest
from store_helpers import all_files, temp_leftovers
from test_store_checkpoints import assert_same_state

from store.objects.folder import FolderObjects
from store import CheckpointStore, NotFound

BOUNDS = [(0, 7), (7, 19), (19, 30)]
COLUMN_KEYS = ("A", "AK", "BK", "centering_column_means")


@pytest.fixture(params=["folder", "objects"])
def checkpoints(root: Path, request) -> CheckpointStore:
    """The data folder's checkpoints, and the same files kept through the object-store interface over the same
    folder (`CheckpointStore.on_objects` on `FolderObjects`: one file per object, the same layout; issue 57)."""
    if request.param == "objects":
        return CheckpointStore.on_objects(FolderObjects(root))
    return CheckpointStore(root)


def sharded_state(rng: np.random.Generator, n_columns: int = 30) -> tuple[dict, dict]:
    """(columns split by shard, the rest) of a state shaped like a sharded KHA fit."""
    columns = {
        "A": rng.normal(size=(4, n_columns)),
        "AK": rng.normal(size=(4, n_columns)).astype(np.float32),
        "BK": rng.normal(size=(4, n_columns)),
        "centering_column_means": np.array([np.nan, -0.0, *rng.normal(size=n_columns - 2)]),
    }
    rest = {"B": rng.normal(size=(4, 4)).astype(np.float32), "t": 1234, "eta0": 0.05,
            "converged": False, "solver": "kha-smd", "rng_words": np.array([2**64 - 1, 3], dtype=np.uint64)}
    return columns, rest


def save_sharded(checkpoints: CheckpointStore, pass_index: int, columns: dict, rest: dict,
                 bounds=BOUNDS, model: str = "m") -> None:
    for first, stop in bounds:
        checkpoints.save_part(model, pass_index, first, stop,
                              {key: value[..., first:stop] for key, value in columns.items()})
    checkpoints.save(model, pass_index, rest, parts=bounds)


def parts_folder(root: Path, pass_index: int, model: str = "m") -> Path:
    return root / "models" / model / "checkpoints" / f"pass-{pass_index:05d}.parts"


def test_round_trip_equals_plain_save_bit_for_bit(checkpoints, rng):
    columns, rest = sharded_state(rng)
    save_sharded(checkpoints, 2, columns, rest)
    checkpoints.save("m", 3, {**columns, **rest})
    sharded, plain = checkpoints.load("m", 2), checkpoints.load("m", 3)
    assert_same_state(sharded, {**columns, **rest})
    assert_same_state(sharded, plain)
    for key in COLUMN_KEYS:
        assert sharded[key].flags.c_contiguous
    assert checkpoints.parts_of("m", 2) == BOUNDS
    assert checkpoints.parts_of("m", 3) is None


def test_load_without_some_entries_leaves_them_unread_and_still_checks_every_part(checkpoints, rng):
    """A sharded fit's coordinator loads a checkpoint without the columns its shards read themselves."""
    columns, rest = sharded_state(rng)
    save_sharded(checkpoints, 2, columns, rest)
    checkpoints.save("m", 3, {**columns, **rest})
    skipped = ("A", "AK")
    want = {k: v for k, v in {**columns, **rest}.items() if k not in skipped}
    for pass_index in (2, 3):  # sharded and plain
        assert_same_state(checkpoints.load("m", pass_index, without=skipped), want)
    middle = {key: value[..., 7:19] for key, value in columns.items() if key != "A"}  # a part lacking A
    checkpoints.save_part("m", 2, 7, 19, middle)
    with pytest.raises(ValueError, match="inconsistent checkpoint"):
        checkpoints.load("m", 2, without=skipped)


def test_latest_load_of_a_sharded_checkpoint(checkpoints, rng):
    columns, rest = sharded_state(rng)
    checkpoints.save("m", 0, {"x": 1})
    save_sharded(checkpoints, 1, columns, rest)
    assert checkpoints.latest_pass("m") == 1
    assert_same_state(checkpoints.load("m"), {**columns, **rest})


def test_part_files_record_pass_and_bounds(checkpoints, rng, root):
    columns, rest = sharded_state(rng)
    save_sharded(checkpoints, 4, columns, rest)
    assert all_files(parts_folder(root, 4)) == {f"{a:012d}-{b:012d}.npz" for a, b in BOUNDS}
    with np.load(parts_folder(root, 4) / f"{7:012d}-{19:012d}.npz") as part:
        assert (int(part["__pass__"]), int(part["__first__"]), int(part["__stop__"])) == (4, 7, 19)
        assert "__schema_version__" in part.files
        np.testing.assert_array_equal(part["A"], columns["A"][:, 7:19])
    with np.load(root / "models" / "m" / "checkpoints" / "pass-00004.npz") as manifest:
        assert manifest["__parts__"].dtype == np.int64
        np.testing.assert_array_equal(manifest["__parts__"], np.array(BOUNDS))
        assert "A" not in manifest.files
    assert temp_leftovers(root) == []


@pytest.mark.parametrize("first, stop", [(0, 30), (0, 7), (3, 5), (5, 8), (6, 20), (7, 19), (18, 30), (29, 30)])
def test_load_columns_across_parts_and_from_a_plain_checkpoint(checkpoints, rng, first, stop):
    columns, rest = sharded_state(rng)
    save_sharded(checkpoints, 1, columns, rest)
    checkpoints.save("m", 2, {**columns, **rest})
    keys = ["A", "AK", "centering_column_means"]
    for pass_index in (1, 2):
        got = checkpoints.load_columns("m", pass_index, first, stop, keys)
        assert set(got) == set(keys)
        for key in keys:
            expected = columns[key][..., first:stop]
            assert got[key].dtype == expected.dtype and got[key].shape == expected.shape
            assert got[key].tobytes() == expected.tobytes(), (pass_index, key)
            assert got[key].flags.c_contiguous


def test_load_columns_reads_only_overlapping_parts(checkpoints, rng, root):
    columns, rest = sharded_state(rng)
    save_sharded(checkpoints, 1, columns, rest)
    (parts_folder(root, 1) / f"{0:012d}-{7:012d}.npz").write_bytes(b"garbage")
    got = checkpoints.load_columns("m", 1, 8, 25, ["BK"])
    np.testing.assert_array_equal(got["BK"], columns["BK"][:, 8:25])
    with pytest.raises(ValueError):  # the garbage part is read once the range overlaps it
        checkpoints.load_columns("m", 1, 6, 8, ["BK"])


@pytest.mark.parametrize("first, stop", [(0, 31), (-1, 3), (5, 5)])
def test_load_columns_out_of_range(checkpoints, rng, first, stop):
    columns, rest = sharded_state(rng)
    save_sharded(checkpoints, 1, columns, rest)
    checkpoints.save("m", 2, {**columns, **rest})
    for pass_index in (1, 2):
        with pytest.raises(ValueError):
            checkpoints.load_columns("m", pass_index, first, stop, ["A"])


def test_load_columns_unknown_key_and_missing_pass(checkpoints, rng):
    columns, rest = sharded_state(rng)
    save_sharded(checkpoints, 1, columns, rest)
    checkpoints.save("m", 2, {**columns, **rest})
    for pass_index, key in ((1, "nope"), (1, "t"), (2, "nope"), (2, "t")):
        with pytest.raises(ValueError):
            checkpoints.load_columns("m", pass_index, 0, 3, [key])
    with pytest.raises(NotFound):
        checkpoints.load_columns("m", 9, 0, 3, ["A"])


@pytest.mark.parametrize("shape", [(4, 6), (4,), ()])
def test_save_part_checks_last_axis(checkpoints, shape, root):
    with pytest.raises(ValueError, match="last axis"):
        checkpoints.save_part("m", 0, 0, 7, {"A": np.zeros(shape)})
    assert not parts_folder(root, 0).exists() or all_files(parts_folder(root, 0)) == set()


@pytest.mark.parametrize("parts", [[], [(1, 7)], [(0, 7), (8, 19)], [(0, 7), (7, 7)], [(7, 19), (0, 7)],
                                   [(0, "7")]])
def test_manifest_bounds_must_be_contiguous_from_zero(checkpoints, rng, parts, root):
    columns, _ = sharded_state(rng)
    for first, stop in BOUNDS:
        checkpoints.save_part("m", 0, first, stop, {"A": columns["A"][:, first:stop]})
    with pytest.raises(ValueError):
        checkpoints.save("m", 0, {"t": 1}, parts=parts)
    assert checkpoints.list("m") == []


def test_manifest_refuses_missing_part(checkpoints, rng):
    columns, rest = sharded_state(rng)
    for first, stop in BOUNDS[:2]:
        checkpoints.save_part("m", 0, first, stop, {"A": columns["A"][:, first:stop]})
    with pytest.raises(ValueError, match="missing"):
        checkpoints.save("m", 0, rest, parts=BOUNDS)
    assert checkpoints.list("m") == [] and checkpoints.latest_pass("m") is None


def test_manifest_refuses_mismatched_keys_and_key_clashes(checkpoints, rng):
    columns, rest = sharded_state(rng)
    checkpoints.save_part("m", 0, 0, 7, {"A": columns["A"][:, :7]})
    checkpoints.save_part("m", 0, 7, 30, {"A": columns["A"][:, 7:], "AK": columns["AK"][:, 7:]})
    with pytest.raises(ValueError, match="inconsistent checkpoint .*keys"):
        checkpoints.save("m", 0, rest, parts=[(0, 7), (7, 30)])
    checkpoints.save_part("m", 1, 0, 30, {"A": columns["A"]})
    with pytest.raises(ValueError, match="'A'"):
        checkpoints.save("m", 1, {"A": 1}, parts=[(0, 30)])
    assert checkpoints.list("m") == []


def planted_part(checkpoints, root, pass_index, first, stop, arrays) -> None:
    """Write a part for (pass_index, first, stop) and plant it as pass 0's part (7, 19), as a stale part would be."""
    checkpoints.save_part("m", pass_index, first, stop, arrays)
    source = parts_folder(root, pass_index) / f"{first:012d}-{stop:012d}.npz"
    source.replace(parts_folder(root, 0) / f"{7:012d}-{19:012d}.npz")


@pytest.mark.parametrize("corruption", ["pass", "bounds", "keys", "dtype", "rows", "missing"])
def test_load_detects_inconsistent_parts(checkpoints, rng, root, corruption):
    columns, rest = sharded_state(rng)
    save_sharded(checkpoints, 0, columns, rest)
    middle = {key: value[..., 7:19] for key, value in columns.items()}
    if corruption == "pass":
        planted_part(checkpoints, root, 5, 7, 19, middle)
    elif corruption == "bounds":
        planted_part(checkpoints, root, 0, 6, 19, {key: value[..., 6:19] for key, value in columns.items()})
    elif corruption == "keys":
        del middle["BK"]
        checkpoints.save_part("m", 0, 7, 19, middle)
    elif corruption == "dtype":
        middle["A"] = middle["A"].astype(np.float32)
        checkpoints.save_part("m", 0, 7, 19, middle)
    elif corruption == "rows":
        middle["A"] = np.concatenate([middle["A"], middle["A"][:1]])
        checkpoints.save_part("m", 0, 7, 19, middle)
    else:
        (parts_folder(root, 0) / f"{7:012d}-{19:012d}.npz").unlink()
    bad_part = str(parts_folder(root, 0) / f"{7:012d}-{19:012d}.npz")
    with pytest.raises(ValueError, match="inconsistent checkpoint") as caught:
        checkpoints.load("m", 0)
    assert bad_part in str(caught.value) and "delete it or resume from an earlier pass" in str(caught.value)
    with pytest.raises(ValueError, match="inconsistent checkpoint"):
        checkpoints.load_columns("m", 0, 5, 25, ["A"])


def test_a_sound_part_rewritten_the_same_way_loads(checkpoints, rng):
    """The corruption test's control: rewriting a part with its own columns changes nothing."""
    columns, rest = sharded_state(rng)
    save_sharded(checkpoints, 0, columns, rest)
    checkpoints.save_part("m", 0, 7, 19, {key: value[..., 7:19] for key, value in columns.items()})
    assert_same_state(checkpoints.load("m", 0), {**columns, **rest})


def test_delete_removes_parts(checkpoints, rng, root):
    columns, rest = sharded_state(rng)
    save_sharded(checkpoints, 0, columns, rest)
    save_sharded(checkpoints, 1, columns, rest)
    checkpoints.delete("m", 0)
    assert not all_files(parts_folder(root, 0)) and all_files(parts_folder(root, 1))  # folders may stay on objects
    assert [c["pass"] for c in checkpoints.list("m")] == [1]
    with pytest.raises(NotFound):
        checkpoints.load("m", 0)
    checkpoints.delete("m", 0)  # already gone: no error
    checkpoints.save_part("m", 5, 0, 30, columns)  # parts without a manifest are removed too
    checkpoints.delete("m", 5)
    assert not all_files(parts_folder(root, 5))
    checkpoints.delete("m", 1)
    assert not all_files(parts_folder(root, 1)) and checkpoints.list("m") == []
    assert temp_leftovers(root) == []


def test_list_ignores_parts_without_manifest(checkpoints, rng, root):
    columns, rest = sharded_state(rng)
    save_sharded(checkpoints, 1, columns, rest)
    for first, stop in BOUNDS:
        checkpoints.save_part("m", 2, first, stop, {"A": columns["A"][:, first:stop]})
    assert parts_folder(root, 2).is_dir()
    assert [c["pass"] for c in checkpoints.list("m")] == [1]
    assert checkpoints.latest_pass("m") == 1
    assert_same_state(checkpoints.load("m"), {**columns, **rest})
    with pytest.raises(NotFound):
        checkpoints.load("m", 2)
    checkpoints.save("m", 2, rest, parts=BOUNDS)
    assert [c["pass"] for c in checkpoints.list("m")] == [1, 2]


def test_manifest_is_a_plain_npz(checkpoints, rng, root):
    columns, rest = sharded_state(rng)
    save_sharded(checkpoints, 0, columns, rest)
    manifest = root / "models" / "m" / "checkpoints" / "pass-00000.npz"
    with zipfile.ZipFile(manifest) as archive:
        assert all(info.compress_type == zipfile.ZIP_STORED for info in archive.infolist())
