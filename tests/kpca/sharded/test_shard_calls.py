"""The typed seam between a sharded fit's coordinator and its shards (`kpca.sharded.messages`): a call is
a shard method itself, it travels by reference (as dask sends it to an actor), the shards in this
process answer in shard order, and nothing in the sharded wing calls a method by its name."""

import ast
import pickle
from pathlib import Path

import numpy as np
import pytest

from kpca.kernels import KernelSpec
from kpca.rows import KernelRows
from kpca.sharded.messages import OwnedColumns, ShardCall, shard_call
from kpca.sharded.passes import split_state
from kpca.sharded.ritz import RitzShard
from kpca.sharded.shards import LocalShards, Shard, make_group, shard_bounds
from tests.naive import start_state

ROOT = Path(__file__).resolve().parents[3]
KERNEL = KernelSpec("gaussian", sigma=2.0)
# the sharded wing and the modules that ask its shards
SHARDED_SOURCES = [*sorted((ROOT / "kpca" / "sharded").glob("*.py")), ROOT / "workers" / "shards.py",
                   ROOT / "bench" / "scale_out.py"]


@pytest.fixture(scope="module")
def group():
    data = np.random.default_rng(3).normal(size=(90, 4))
    rows = KernelRows(data, KERNEL)
    rows.fit_centering()
    group = make_group(data, KERNEL, shard_bounds(90, [20, 45, 25]), 3, "kha")
    split_state(start_state("kha", 3, rows, seed=1, eta0=0.3), group)
    return group


def test_a_call_travels_by_reference_and_runs_the_method_it_names(group):
    """Pickled as dask pickles an actor call's arguments, a call keeps the method itself (not a copy and
    not a name) and its arguments, and gives each shard's own reply."""
    indices = np.array([3, 30, 70, 71])
    call = pickle.loads(pickle.dumps(shard_call(Shard.gather, indices), protocol=5))
    assert isinstance(call, ShardCall) and call.method is Shard.gather
    np.testing.assert_array_equal(call.args[0], indices)
    for shard in group.shards:
        got, want = call.run(shard), shard.gather(indices)
        assert isinstance(got, OwnedColumns)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
    assert pickle.loads(pickle.dumps(shard_call(RitzShard.rotate, np.eye(3)))).method is RitzShard.rotate


def test_local_shards_answer_in_shard_order(group):
    """`LocalShards.each` asks every shard, `each_with` shard i its own call; the replies come in shard
    order, so that a gather puts each row where it belongs."""
    shards = group.shards
    assert isinstance(shards, LocalShards) and len(shards) == 3
    assert [reply.positions.tolist() for reply in shards.each(shard_call(Shard.points, np.array([80, 10, 40])))] \
        == [[1], [2], [0]]
    sizes = shards.each_with([shard_call(Shard.owned, np.arange(first, first + 5)) for first in (0, 25, 70)])
    assert [s.tolist() for s in sizes] == [[0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4]]
    got = group.gather(np.array([80, 10, 40]))
    np.testing.assert_array_equal(got.ZK, np.concatenate([s.ZK for s in shards], axis=1)[:, [80, 10, 40]])


def _calls_by_name(path: Path, root: Path = ROOT) -> list[str]:
    """Where ``path`` calls something by a name in a string: getattr/setattr/hasattr with a literal
    name, operator.methodcaller/attrgetter, or a ``_call``/``_call_each`` dispatch."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        literal = len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
        if (name in ("getattr", "setattr", "hasattr") and literal) or name in ("methodcaller", "attrgetter",
                                                                                "_call", "_call_each"):
            found.append(f"{path.relative_to(root)}:{node.lineno} {ast.unparse(node)[:80]}")
    return found


def test_nothing_in_the_sharded_wing_calls_a_method_by_its_name():
    """Every message to the shards names its method as an attribute (``Shard.gather``), which a type
    checker and a rename see. Before: 29 ``group._call("gather", ...)`` string dispatches."""
    assert all(path.exists() for path in SHARDED_SOURCES)
    assert [line for path in SHARDED_SOURCES for line in _calls_by_name(path)] == []


def test_the_check_finds_a_call_by_name(tmp_path):
    """The check above can fail: it finds each form of a call by name."""
    source = tmp_path / "dispatch.py"
    source.write_text('group._call("gather", p)\ngetattr(shard, "gather")(p)\nmethodcaller("norms")(shard)\n'
                      'getattr(shard, name, None)\n')
    found = [line.split(" ", 1)[1] for line in _calls_by_name(source, tmp_path)]
    assert found == ["group._call('gather', p)", "getattr(shard, 'gather')", "methodcaller('norms')"]
