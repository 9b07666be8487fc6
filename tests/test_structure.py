"""The shape of the code: one-way layers, no import cycles, modules small enough to hold in one's head.

Read from the source (ast), nothing imported: kpca <- store <- workers <- service; client talks HTTP only.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = {"kpca": 0, "store": 1, "workers": 2, "service": 3}
PACKAGES = (*LAYERS, "client")
MAX_LINES = 500
NOT_IN_NUMERICS = ("zarr", "dask", "distributed", "fastapi", "starlette", "pydantic", "uvicorn", "httpx")


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the packages."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(path: Path) -> set[str]:
    """Absolute module names a file imports: ``from a.b import c`` is ``a.b.c`` where that is a
    module of ours, else ``a.b`` (a package's ``__init__`` running first is not counted as an edge)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                names.add(full if full in MODULES else node.module)
    return names


MODULES = modules()
GRAPH = {name: {other for other in imported(path) if other in MODULES} for name, path in MODULES.items()}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_over_500_lines(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{MODULES[name].relative_to(ROOT)} has {lines} lines; split it along its seams"


def test_nothing_is_imported_upward():
    upward = []
    for name, path in MODULES.items():
        top = name.split(".")[0]
        for other in imported(path):
            other_top = other.split(".")[0]
            if top == "client" and other_top in LAYERS:
                upward.append(f"{name} -> {other} (the client speaks HTTP only)")
            elif top in LAYERS and other_top in PACKAGES and (other_top == "client" or LAYERS[other_top] > LAYERS[top]):
                upward.append(f"{name} -> {other}")
    assert upward == []


def test_routes_do_no_maths():
    routes = {name: sorted(o for o in imported(MODULES[name]) if o.split(".")[0] == "kpca")
              for name in MODULES if name.startswith("service.routes")}
    assert {name: found for name, found in routes.items() if found} == {}


def test_store_runs_no_numerics():
    """store/ reads kpca's vocabulary (kernel specs, the solver registry, defaults) but never builds or runs a
    model: what needs one (an imported archive's serving check) is done in workers/."""
    numerics = ("kpca.model", "kpca.rows", "kpca.driver", "kpca.preimage", "kpca.estimator")
    found = {name: sorted(o for o in imported(path) if o.startswith(numerics))
             for name, path in MODULES.items() if name.startswith("store")}
    assert {name: bad for name, bad in found.items() if bad} == {}


def test_numerics_import_no_io_service_or_dask_library():
    bad = {name: sorted(o for o in imported(path) if o.split(".")[0] in NOT_IN_NUMERICS)
           for name, path in MODULES.items() if name.startswith("kpca")}
    assert {name: found for name, found in bad.items() if found} == {}


#: kpca's wings: each builds on the core, and nothing in the core imports it.
WINGS = ("kpca.images", "kpca.sharded")


def test_kpca_wings_point_to_the_core_only():
    """kpca is a core with wings (`kpca.images`, `kpca.sharded`): arrows point wing -> core, never core ->
    wing, and a wing is not imported by another wing."""
    def wing(name):
        return next((w for w in WINGS if name == w or name.startswith(w + ".")), None)

    inward = sorted(f"{name} -> {other}" for name in MODULES if name.startswith("kpca")
                    for other in GRAPH[name] if wing(other) and wing(other) != wing(name))
    assert inward == []
    assert all(w in MODULES for w in WINGS) and any(wing(other) for name in GRAPH for other in GRAPH[name])


def test_no_import_cycles():
    """Tarjan's strongly connected components of the module import graph: every one is a single module."""
    index, low, stack, on_stack, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for other in GRAPH[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    assert cycles == []


def test_the_graph_is_read():
    """The checks above see real edges (guards against a parser that finds nothing)."""
    assert "kpca.solvers" in GRAPH["kpca.driver"] and "store.jobs.records" in GRAPH["store.jobs.models"]
    assert len(MODULES) > 60



def test_paper_uses_no_service_or_workers():
    """paper/ (scripts like bench/, not a package) reruns the papers' experiments on the numerics: it may
    import kpca and bench's helpers, never workers, service or the HTTP client (bench/ may: it measures
    the service too)."""
    found = {}
    for path in sorted((ROOT / "paper").glob("*.py")):
        bad = sorted(o for o in imported(path) if o.split(".")[0] in ("workers", "service", "client"))
        if bad:
            found[str(path.relative_to(ROOT))] = bad
    assert found == {}
    assert (ROOT / "paper" / "run.py").is_file()


def test_bench_and_paper_import_nothing_from_tests():
    """bench/ and paper/ run without tests/: what they share with the tests lives in the packages or in
    bench/ (the tests import it from there), never the other way round."""
    found = {}
    for path in sorted([*(ROOT / "bench").glob("*.py"), *(ROOT / "paper").glob("*.py")]):
        bad = sorted(o for o in imported(path) if o.split(".")[0] == "tests")
        if bad:
            found[str(path.relative_to(ROOT))] = bad
    assert found == {}


#: Libraries that only some requests need, each slow to import (scikit-learn, for a clustering's k-means;
#: scipy.optimize, for the gradient pre-image): imported where they are used.
#: Every API process and every dask worker imports the service's code when it starts, so a module-level
#: import of one of them is paid by every start, every worker restart and every test module's cluster.
LAZY_LIBRARIES = ("sklearn", "scipy.optimize", "matplotlib", "skimage")


def test_starting_the_service_or_a_worker_imports_no_library_that_only_some_requests_need():
    code = ("import sys, service, service.__main__, workers.plugins\n"
            f"print(','.join(m for m in {LAZY_LIBRARIES!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"imported at start: {out.stdout.strip()}"
