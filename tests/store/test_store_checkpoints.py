"""Conformance suite for checkpoint stores; `TestLocalCheckpointStore` runs it on the file backend."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from store_helpers import temp_leftovers

from store import CheckpointStore, Invalid, NotFound
from store.objects.folder import FolderObjects


def solver_state(rng: np.random.Generator) -> dict:
    """A state shaped like a KHA-SMD solver's: arrays of several dtypes and Python scalars."""
    bit_generator = np.random.PCG64(7)
    return {
        "A": rng.normal(size=(16, 40)).astype(np.float32),
        "B": rng.normal(size=(16, 16)),
        "rho": np.array([np.nan, -0.0, np.inf, 5e-324]),  # payloads that must survive bit for bit
        "permutation": rng.permutation(40).astype(np.int64),
        "rng_words": np.array([2**64 - 1, 0, 2**63, 12345], dtype=np.uint64),
        "mt_key": rng.integers(0, 2**32, size=624, dtype=np.uint32),
        "mask": rng.random(10) > 0.5,
        "fortran": np.asfortranarray(rng.normal(size=(3, 5))),
        "empty": np.zeros((0, 4), dtype=np.float32),
        "t": 5391,
        "pass": 3,
        "big_unsigned": 2**63 + 5,
        "negative": -(2**63),
        "eta0": 0.05,
        "tiny": 5e-324,
        "converged": False,
        "solver": "kha-smd",
        "empty_str": "",
        "pcg_inc": int(bit_generator.state["state"]["inc"] & (2**64 - 1)),
    }


def assert_same_state(loaded: dict, saved: dict) -> None:
    assert set(loaded) == set(saved)
    for key, value in saved.items():
        got = loaded[key]
        if isinstance(value, np.ndarray):
            assert isinstance(got, np.ndarray), key
            assert got.dtype == value.dtype and got.shape == value.shape, key
            assert got.tobytes(order="A") == value.tobytes(order="A") or got.tobytes() == value.tobytes(), key
        else:
            assert type(got) is type(value), key
            assert got == value or (isinstance(value, float) and math.isnan(value) and math.isnan(got)), key


class CheckpointStoreConformance:
    """Behaviour every checkpoint store must show. Subclasses provide the ``checkpoints`` fixture."""

    def test_round_trip_bit_exact(self, checkpoints, rng):
        state = solver_state(rng)
        info = checkpoints.save("m", 3, state)
        assert info["pass"] == 3 and info["size_bytes"] > 0 and info["created_at"].endswith("Z")
        assert_same_state(checkpoints.load("m", 3), state)
        assert_same_state(checkpoints.load("m"), state)

    def test_float_scalars_bit_exact(self, checkpoints):
        values = {"third": 1 / 3, "nan": float("nan"), "neg_zero": -0.0, "huge": 1.7976931348623157e308}
        checkpoints.save("m", 0, values)
        loaded = checkpoints.load("m", 0)
        for key, value in values.items():
            assert np.float64(loaded[key]).tobytes() == np.float64(value).tobytes(), key

    def test_numpy_scalars_and_zero_d_arrays_come_back_as_python_scalars(self, checkpoints):
        checkpoints.save("m", 0, {"f32": np.float32(0.1), "i": np.int32(-4), "z": np.array(2.5),
                                  "u": np.uint64(2**64 - 1)})
        loaded = checkpoints.load("m", 0)
        assert loaded == {"f32": float(np.float32(0.1)), "i": -4, "z": 2.5, "u": 2**64 - 1}
        assert type(loaded["i"]) is int and type(loaded["f32"]) is float

    def test_keys_that_clash_with_savez_arguments(self, checkpoints):
        checkpoints.save("m", 0, {"file": np.arange(3), "allow_pickle": 1, "args": "x"})
        loaded = checkpoints.load("m", 0)
        np.testing.assert_array_equal(loaded["file"], [0, 1, 2])
        assert loaded["allow_pickle"] == 1 and loaded["args"] == "x"

    def test_latest_selection_and_listing(self, checkpoints):
        for pass_index in (1, 3, 2, 10, 9):
            checkpoints.save("m", pass_index, {"pass": pass_index})
        assert checkpoints.latest_pass("m") == 10
        assert checkpoints.load("m")["pass"] == 10
        assert checkpoints.load("m", 2)["pass"] == 2
        listed = checkpoints.list("m")
        assert [c["pass"] for c in listed] == [1, 2, 3, 9, 10]
        assert all(c["size_bytes"] > 0 for c in listed)
        checkpoints.save("m", 100_000, {"pass": 100_000})  # wider than 5 digits: ordered numerically
        assert checkpoints.latest_pass("m") == 100_000

    def test_resave_replaces(self, checkpoints):
        checkpoints.save("m", 4, {"t": 1})
        checkpoints.save("m", 4, {"t": 2})
        assert checkpoints.load("m") == {"t": 2}
        assert [c["pass"] for c in checkpoints.list("m")] == [4]

    def test_models_are_separate(self, checkpoints):
        checkpoints.save("a", 1, {"who": "a"})
        checkpoints.save("b", 5, {"who": "b"})
        assert checkpoints.load("a") == {"who": "a"}
        assert checkpoints.latest_pass("a") == 1

    def test_none_yet(self, checkpoints):
        assert checkpoints.latest_pass("m") is None
        assert checkpoints.list("m") == []
        with pytest.raises(NotFound) as info:
            checkpoints.load("m")
        assert info.value.code == "not_found"
        checkpoints.save("m", 1, {"t": 1})
        with pytest.raises(NotFound):
            checkpoints.load("m", 2)

    @pytest.mark.parametrize(
        "state, error",
        [
            ({"x": np.array([object()], dtype=object)}, TypeError),
            ({"x": None}, TypeError),
            ({"x": [1.0, 2.0]}, TypeError),
            ({"x": b"bytes"}, TypeError),
            ({"x": 2**70}, ValueError),
            ({"x": -(2**63) - 1}, ValueError),
            ({"__schema_version__": 2}, ValueError),
            ({"a/b": 1}, ValueError),
            ({"": 1}, ValueError),
            ({3: 1}, ValueError),
            ([("x", 1)], TypeError),
        ],
    )
    def test_unstorable_state_is_refused_and_nothing_written(self, checkpoints, root, state, error):
        with pytest.raises(error):
            checkpoints.save("m", 0, state)
        assert checkpoints.list("m") == []
        assert temp_leftovers(root) == []

    @pytest.mark.parametrize("pass_index", [-1, True, 1.0, "3", 10**9])
    def test_bad_pass_index(self, checkpoints, pass_index):
        with pytest.raises(Invalid) as info:
            checkpoints.save("m", pass_index, {"t": 1})
        assert info.value.field == "pass"

    @pytest.mark.parametrize("bad", ["../x", "a/b", "", ".."])
    def test_bad_model_names(self, checkpoints, bad):
        for call in (lambda: checkpoints.save(bad, 0, {"t": 1}), lambda: checkpoints.load(bad),
                     lambda: checkpoints.list(bad), lambda: checkpoints.latest_pass(bad),
                     lambda: checkpoints.delete(bad, 0)):
            with pytest.raises(Invalid) as info:
                call()
            assert info.value.field == "model"

    def test_no_temp_files_and_crash_leftovers_ignored(self, checkpoints, root, rng):
        state = solver_state(rng)
        checkpoints.save("m", 1, state)
        checkpoints.save("m", 2, state)
        assert temp_leftovers(root) == []
        folder = root / "models" / "m" / "checkpoints"
        (folder / ".pass-00007.npz.tmp-0badc0ffee00").write_bytes(b"PK\x03\x04 half a zip")
        (folder / "pass-00008.npz.partial").write_bytes(b"junk")
        assert [c["pass"] for c in checkpoints.list("m")] == [1, 2]
        assert checkpoints.latest_pass("m") == 2
        assert_same_state(checkpoints.load("m"), state)

    def test_file_is_a_plain_npz_with_schema_version(self, checkpoints, root):
        checkpoints.save("m", 12, {"A": np.eye(2), "t": 4})
        path = root / "models" / "m" / "checkpoints" / "pass-00012.npz"
        with np.load(path, allow_pickle=False) as archive:
            assert sorted(archive.files) == ["A", "__schema_version__", "__sha256__", "t"]
            assert int(archive["__schema_version__"]) == 1


class TestLocalCheckpointStore(CheckpointStoreConformance):
    @pytest.fixture
    def checkpoints(self, root: Path) -> CheckpointStore:
        return CheckpointStore(root)


class TestObjectCheckpointStore(CheckpointStoreConformance):
    """The same files through the object-store interface over the data folder (issue 57)."""

    @pytest.fixture
    def checkpoints(self, root: Path) -> CheckpointStore:
        return CheckpointStore.on_objects(FolderObjects(root))


class TestS3CheckpointStore(CheckpointStoreConformance):
    """The checkpoints as objects of an S3 API over HTTP on loopback (moto's server; issue 57)."""

    @pytest.fixture
    def checkpoints(self, s3_url) -> CheckpointStore:
        from store.objects.open import open_objects

        return CheckpointStore.on_objects(open_objects(s3_url))

    def test_file_is_a_plain_npz_with_schema_version(self, checkpoints, root):
        import io

        checkpoints.save("m", 12, {"A": np.eye(2), "t": 4})
        data = checkpoints._place.objects.get("models/m/checkpoints/pass-00012.npz").data
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            assert sorted(archive.files) == ["A", "__schema_version__", "__sha256__", "t"]

    def test_no_temp_files_and_crash_leftovers_ignored(self, checkpoints, root, rng):
        state = solver_state(rng)
        checkpoints.save("m", 1, state)
        objects = checkpoints._place.objects
        objects.put("models/m/checkpoints/pass-00008.npz.partial", b"junk")  # not a checkpoint's name
        objects.put("models/m/checkpoints/pass-00009.parts/000000000000-000000000004.npz", b"PK")  # no manifest
        assert [c["pass"] for c in checkpoints.list("m")] == [1] and checkpoints.latest_pass("m") == 1
        assert_same_state(checkpoints.load("m"), state)

    def test_sharded_round_trip_and_columns(self, checkpoints, rng):
        columns = {"A": rng.normal(size=(3, 10)), "AK": rng.normal(size=(3, 10)).astype(np.float32)}
        for first, stop in ((0, 4), (4, 10)):
            checkpoints.save_part("m", 2, first, stop, {key: value[..., first:stop] for key, value in columns.items()})
        checkpoints.save("m", 2, {"t": 7}, parts=[(0, 4), (4, 10)])
        assert_same_state(checkpoints.load("m", 2), {**columns, "t": 7})
        np.testing.assert_array_equal(checkpoints.load_columns("m", 2, 3, 6, ["A"])["A"], columns["A"][:, 3:6])
        assert checkpoints.verify("m", 2) is not None and checkpoints.identity("m", 2) is not None
        checkpoints.delete("m", 2)
        assert checkpoints.list("m") == [] and checkpoints.identity("m", 2) is None
